"""Camera → tracker → strain observer accuracy on a simulated bench run (paper 004, X: the stick test's rod).

The Cosserat simulator runs ``experiments/rod/bench_stick.toml`` (the Table II rod held 70° nose-down by the arm,
tip on the table, sagging into contact for the first second; pressing after that); every sample is rendered by
the synthetic side camera (the rod bends in the vertical x–z plane, so the camera looks along +y at it, 100 fps,
motion blur over half the frame period, Gaussian noise), the red-marker tracker finds the beads, the plane
calibration of that camera turns pixels into (x, 0, z), and the strain observer estimates the strains at the
control points (strain nodes). Truth: the simulator's marker positions and nodal strains.

Prints one JSON object: marker error (mm, px), strain error of the bending components at the control points
(absolute, 1/m, and relative = |est − true| / max over time of |true| at that node, the notes' error metric), the
same for the observer fed the exact marker positions (to separate camera error from observer error), and the
render / tracking / observer speeds.

    PYTHONPATH=. python benchmarks/camera_observer_accuracy.py --duration-s 1.0 --fps 100
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from aiko.devices.camera.calibration import CameraIntrinsics
from aiko.devices.camera.pipeline import StrainPipeline, observer_model
from aiko.devices.camera.plane import MarkerPlane, calibration_from_pose, look_at
from aiko.devices.camera.red_markers import PixelsToWorld, RedMarkerSettings, RedMarkerTracker
from aiko.devices.camera.rod_film import RodFilm
from aiko.devices.camera.synthetic import SyntheticCamera, SyntheticCameraSettings
from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat.newton import ConvergenceError
from sim.cosserat.observer import observe_strains
from sim.cosserat.scenario import simulate


def stats(values: np.ndarray) -> dict:
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return {"mean": None, "p95": None, "max": None, "n": 0}
    return {"mean": float(v.mean()), "p95": float(np.percentile(v, 95)), "max": float(v.max()), "n": int(len(v))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="experiments/rod/bench_stick.toml", help="rod experiment TOML")
    parser.add_argument("--duration-s", type=float, default=1.0, help="simulated time (s)")
    parser.add_argument("--fps", type=float, default=100.0, help="camera frame rate (divides the sim's 1/dt)")
    parser.add_argument("--markers", type=int, default=8, help="red beads along the rod")
    parser.add_argument("--noise", type=float, default=2.0, help="sensor noise sigma (grey levels)")
    parser.add_argument("--blur-samples", type=int, default=3, help="instants averaged per exposure (1 = sharp)")
    parser.add_argument("--compliance", type=float, default=0.0, help="observer marker compliance (m/N)")
    args = parser.parse_args()

    scenario = load_rod_experiment(args.experiment)
    scenario = replace(scenario, duration_s=args.duration_s)
    steps_per_frame = round(1.0 / (args.fps * scenario.dt_s))
    if steps_per_frame < 1 or abs(steps_per_frame * args.fps * scenario.dt_s - 1.0) > 1e-9:
        raise SystemExit(f"--fps {args.fps} must divide the simulator rate {1 / scenario.dt_s:g} Hz")
    rod, n = scenario.model.rod, scenario.model.n_sections
    length = rod.length_m
    marker_arc = np.linspace(0.02, length - 0.005, args.markers)
    film = RodFilm(rod, n, marker_arc)  # beads 1.5 mm proud of the rod

    t0 = time.perf_counter()
    states = []
    simulate(scenario, lambda s: states.append((s.t_s, s.state.q.copy())), sample_every=1)
    sim_s = time.perf_counter() - t0

    k_mat = np.array([[800.0, 0.0, 320.0], [0.0, 800.0, 240.0], [0.0, 0.0, 1.0]])
    intrinsics = CameraIntrinsics(k_mat, np.zeros(5), (640, 480))
    pose = look_at((0.05, -0.45, 0.13), (0.05, 0.0, 0.095))
    camera = SyntheticCamera(intrinsics, pose, SyntheticCameraSettings(fps=args.fps, noise_sigma=args.noise, seed=1))
    plane = MarkerPlane.vertical_xz()
    to_world = PixelsToWorld(calibration_from_pose(intrinsics, pose, plane), plane)
    tracker = RedMarkerTracker(RedMarkerSettings(args.markers), marker_arc_m=marker_arc, to_world=to_world)
    model = observer_model(rod, n, marker_arc, tuple(scenario.model.gravity_m_s2))
    pipeline = StrainPipeline(tracker, model, marker_arc, np.zeros(6), marker_compliance_m_per_n=args.compliance)

    wall = np.zeros(3)  # render, track, observe (s)
    cpu = np.zeros(3)  # the same in this process's CPU time: the machine is shared, wall time is not ours alone
    marker_err_mm, marker_err_px, strain_err, strain_true, strain_est, strain_err_exact = [], [], [], [], [], []
    missed = observer_failures = exact_failures = 0
    exact_q = None
    frames = 0
    for j in range(0, len(states), steps_per_frame):
        t_s, q = states[j]
        lo, hi = states[max(j - 1, 0)][1], states[min(j + 1, len(states) - 1)][1]
        # the exposure spans half a sim step either side (half the frame period at 100 fps): q interpolated
        instants = film.exposure(lo, q, hi, args.blur_samples)
        truth_p = film.markers_m(q)
        a, a_cpu = time.perf_counter(), time.process_time()
        image = camera.render(instants)
        b, b_cpu = time.perf_counter(), time.process_time()
        hint = to_world.to_pixels(q[3:6][None])[0]
        obs = tracker.process(image, round(t_s * 1e9), base_hint_px=hint)
        c, c_cpu = time.perf_counter(), time.process_time()
        est = pipeline.observe(obs, q[0:6])
        d, d_cpu = time.perf_counter(), time.process_time()
        wall += (b - a, c - b, d - c)
        cpu += (b_cpu - a_cpu, c_cpu - b_cpu, d_cpu - c_cpu)
        frames += 1
        missed += int((~obs.visible).sum())
        truth_px, _ = camera.project(truth_p)
        marker_err_px.append(np.linalg.norm(obs.pixels - truth_px, axis=1))
        marker_err_mm.append(1e3 * np.linalg.norm(obs.world_m - truth_p, axis=1))
        true_strain = film.strain_nodes(q)
        try:  # warm-started from the previous frame, as the pipeline does
            exact = observe_strains(model, q[0:6], marker_arc, truth_p, exact_q, args.compliance)
            exact_q = exact.q
            strain_err_exact.append(np.abs(exact.strain_nodes[:, 1:3] - true_strain[:, 1:3]))
        except ConvergenceError:
            exact_q = None
            exact_failures += 1
            strain_err_exact.append(np.full_like(true_strain[:, 1:3], np.nan))
        strain_true.append(true_strain[:, 1:3])
        if est.strain_nodes is None:
            observer_failures += 1
            strain_est.append(np.full_like(true_strain[:, 1:3], np.nan))
        else:
            strain_est.append(est.strain_nodes[:, 1:3])
        strain_err.append(np.abs(strain_est[-1] - strain_true[-1]))

    strain_true_a = np.array(strain_true)  # (frames, n+1, 2)
    scale = np.max(np.abs(strain_true_a), axis=0).clip(1e-9)  # per node and component, over time
    rel = np.nanmean(np.array(strain_err), axis=0) / scale
    rel_exact = np.nanmean(np.array(strain_err_exact), axis=0) / scale
    bending = scale > 0.1 * scale.max()  # relative errors only where the node bends noticeably
    result = {
        "experiment": args.experiment,
        "duration_s": args.duration_s,
        "frames": frames,
        "fps": args.fps,
        "markers": args.markers,
        "noise_sigma": args.noise,
        "blur_samples": args.blur_samples,
        "image_size": list(intrinsics.image_size),
        "mm_per_px_at_rod": 1e3 * 0.45 / 800.0,
        "marker_error_mm": stats(np.concatenate(marker_err_mm)),
        "marker_error_px": stats(np.concatenate(marker_err_px)),
        "markers_missed": missed,
        "observer_failures": observer_failures,
        "max_true_bending_strain_1_per_m": float(scale.max()),
        "strain_error_abs_1_per_m": stats(np.array(strain_err)),
        "strain_error_rel_mean_over_time": {
            "mean": float(rel[bending].mean()),
            "max": float(rel[bending].max()),
            "nodes_compared": int(bending.sum()),
            "per_node_kappa_y": [round(float(v), 4) for v in rel[:, 0]],
        },
        "control_points_x_m": [round(float(x), 5) for x in model.grid.x_nodes],
        "max_true_kappa_y_per_node_1_per_m": [round(float(v), 4) for v in scale[:, 0]],
        "observer_on_exact_markers": {
            "observer_failures": exact_failures,
            "strain_error_abs_1_per_m": stats(np.array(strain_err_exact)),
            "strain_error_rel_mean_over_time": {
                "mean": float(rel_exact[bending].mean()),
                "max": float(rel_exact[bending].max()),
                "per_node_kappa_y": [round(float(v), 4) for v in rel_exact[:, 0]],
            },
        },
        "speed": {
            "render_fps_wall": frames / wall[0],
            "tracking_fps_wall": frames / wall[1],
            "observer_fps_wall": frames / wall[2],
            "render_fps_cpu": frames / cpu[0],
            "tracking_fps_cpu": frames / cpu[1],
            "observer_fps_cpu": frames / cpu[2],
            "simulation_s": sim_s,
        },
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
