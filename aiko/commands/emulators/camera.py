"""``aiko emulate camera …``: the soft-rod bench's fast camera, filming the simulated rod.

A camera's "protocol" is its video: this runs a rod experiment in the Cosserat simulator, films it with the
synthetic side camera (red beads on the rod, noise, motion blur) and writes a lossless video that any OpenCV
source reader opens (``aiko.devices.camera.source.FrameSource``), the camera's plane calibration, and the truth
(bead positions and strains at the control points per frame).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

DESCRIPTION = __doc__.split("\n\n")[1].replace("\n", " ")


def register(devices: argparse._SubParsersAction) -> None:
    p = devices.add_parser("camera", help="film a simulated rod experiment with the red-bead camera (a video file)")
    p.description = DESCRIPTION
    p.add_argument("experiment", help="rod experiment file (experiments/rod/*.toml)")
    p.add_argument("--out", required=True, metavar="VIDEO.avi", help="video to write (.avi or .mkv: lossless FFV1)")
    p.add_argument("--truth-out", metavar="TRUTH.json", help="write bead positions and strains per frame here")
    p.add_argument(
        "--calibration-out", metavar="CAMERA.json", help="write the camera's plane calibration and plane here"
    )
    p.add_argument("--duration", type=float, metavar="S", help="seconds to film (default: the experiment's)")
    p.add_argument("--fps", type=float, default=100.0, metavar="HZ", help="frame rate; must divide 1/dt (default 100)")
    p.add_argument("--markers", type=int, default=8, metavar="N", help="red beads along the rod (default 8)")
    p.add_argument("--noise", type=float, default=2.0, metavar="SIGMA", help="sensor noise in grey levels (default 2)")
    p.add_argument("--blur-samples", type=int, default=3, metavar="N", help="instants per exposure (1 = no blur)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="noise seed (default 0)")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import cv2
    import numpy as np

    from aiko.core.errors import AikoError, writing
    from aiko.devices.camera.calibration import CameraIntrinsics
    from aiko.devices.camera.plane import calibration_from_pose
    from aiko.devices.camera.rod_film import RodFilm, frame_side_camera
    from aiko.devices.camera.synthetic import SyntheticCamera, SyntheticCameraSettings
    from aiko.robots.rod_bench.experiment import load_rod_experiment
    from sim.cosserat.scenario import simulate

    out = Path(args.out)
    if out.suffix.lower() not in (".avi", ".mkv"):
        raise AikoError(f"--out {out}: use .avi or .mkv (lossless FFV1), not {out.suffix or 'no extension'}")
    if not 1 <= args.markers <= 50:
        raise AikoError(f"--markers must lie in 1..50, got {args.markers}")
    scenario = load_rod_experiment(args.experiment)
    if args.duration is not None:
        if not args.duration > 0:
            raise AikoError(f"--duration must be > 0 s, got {args.duration}")
        scenario = replace(scenario, duration_s=args.duration)
    steps = 1.0 / (args.fps * scenario.dt_s) if args.fps > 0 else 0.0
    if not (args.fps > 0 and steps >= 1 and abs(steps - round(steps)) < 1e-9):
        raise AikoError(f"--fps {args.fps} must divide the simulator rate {1 / scenario.dt_s:g} Hz")
    steps = round(steps)

    rod, n = scenario.model.rod, scenario.model.n_sections
    marker_arc = np.linspace(0.1, 0.975, args.markers) * rod.length_m if args.markers > 1 else [rod.length_m]
    film = RodFilm(rod, n, marker_arc)
    states: list[tuple[float, np.ndarray]] = []
    simulate(scenario, lambda s: states.append((s.t_s, s.state.q.copy())))

    intrinsics = CameraIntrinsics(np.array([[800.0, 0, 320], [0, 800, 240], [0, 0, 1]]), np.zeros(5), (640, 480))
    everything = np.vstack([film.scene(q).centreline_m for _, q in states[:: max(len(states) // 20, 1)]])
    pose, plane = frame_side_camera(everything, intrinsics)
    camera = SyntheticCamera(
        intrinsics, pose, SyntheticCameraSettings(fps=args.fps, noise_sigma=args.noise, seed=args.seed)
    )
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"FFV1"), args.fps, intrinsics.image_size)
    if not writer.isOpened():
        raise AikoError(f"cannot write {out}: OpenCV could not open an FFV1 video writer there")
    truth = {"t_s": [], "base_alpha": [], "markers_m": [], "strain_nodes": []}
    try:
        for j in range(0, len(states), steps):
            t_s, q = states[j]
            before, after = states[max(j - 1, 0)][1], states[min(j + 1, len(states) - 1)][1]
            writer.write(camera.render(film.exposure(before, q, after, args.blur_samples)))
            truth["t_s"].append(j / steps / args.fps)
            truth["base_alpha"].append(q[0:6].tolist())
            truth["markers_m"].append(film.markers_m(q).tolist())
            truth["strain_nodes"].append(film.strain_nodes(q).tolist())
    finally:
        writer.release()
    calibration = calibration_from_pose(intrinsics, pose, plane)
    if args.calibration_out:
        with writing(args.calibration_out):
            Path(args.calibration_out).write_text(
                json.dumps(
                    {
                        "calibration": calibration.to_dict(),
                        "plane": {k: v.tolist() for k, v in vars(plane).items()},
                        "camera_pose": {
                            "rotation": pose.rotation.tolist(),
                            "translation_m": pose.translation_m.tolist(),
                        },
                    },
                    indent=1,
                )
            )
    if args.truth_out:
        truth.update(
            experiment=str(args.experiment),
            fps=args.fps,
            marker_arc_m=list(map(float, marker_arc)),
            control_x_m=film.model.grid.x_nodes.tolist(),
        )
        with writing(args.truth_out):
            Path(args.truth_out).write_text(json.dumps(truth))
    print(f"{out}: {len(truth['t_s'])} frames at {args.fps:g} fps, {args.markers} beads")
    return 0
