"""Compare the contact smoothing functions on the rod-on-plane drop (paper 004, IX-C, Figs. 15-16).

    python benchmarks/cosserat_smoothing.py --sections 20 --json

For each smoothing: Newton iterations, halved steps, wall time, and the final (resting) contact load:
its total variation along the rod relative to the total load (smoothness), the number of "virtual contacts"
(nodes touching, |gap| < 1 µm, that carry less than 1 % of the mean nodal load), ΣF_n against the weight, and
the load history of the node 6 cm from the base (Fig. 16) over the last half of the run: its total variation
in time relative to its mean (jumps while resting).

The trigonometric map is also run in its own slacks (the paper's Newton; `regular_slack_coordinates` off) at
w = 2, where it stalls at the first impact, and at w = 2π; the default iterates in the regular (Heaviside)
slack coordinates and maps back (see docs/cosserat.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiko.rod_experiment import load_rod_experiment  # noqa: E402
from sim.cosserat import ConvergenceError, step  # noqa: E402

SHARPNESS = {"sigmoid": 50.0, "trigonometric": 2.0, "heaviside": 1.0}


def run(
    smoothing: str, sections: int, duration_s: float, regular_coordinates: bool = True, sharpness: float | None = None
) -> dict:
    sharpness = SHARPNESS[smoothing] if sharpness is None else sharpness
    overrides = {
        "model.n_sections": sections,
        "contact.m_sections": sections,
        "contact.smoothing": smoothing,
        "contact.sharpness": sharpness,
        "run.duration_s": duration_s,
    }
    sc = load_rod_experiment(ROOT / "experiments/rod/rod_on_plane.toml", overrides)
    settings = dataclasses.replace(sc.newton, regular_slack_coordinates=regular_coordinates)
    state = sc.initial_state.copy()
    iterations, halved, info = [], 0, None
    n_steps = int(round(sc.duration_s / sc.dt_s))
    contact_x_m = sc.model.grid.x_points[sc.model.grid.contact_index]
    probe = int(np.argmin(np.abs(contact_x_m - 0.06)))  # Fig. 16: the contact point 6 cm from the left end
    history = []
    t0 = time.perf_counter()
    try:
        for i in range(n_steps):
            info = step(sc.model, state, sc.dt_s, settings)
            iterations.append(info.iterations)
            halved += info.substeps > 1
            if i >= n_steps // 2:
                history.append(info.contact_force_n[probe, 2])
        error = None
    except ConvergenceError as exc:
        error = f"t = {state.t_s:.3f} s: {exc}"
    out = {
        "smoothing": smoothing,
        "sharpness": sharpness,
        "newton_in": "regular slacks" if regular_coordinates and smoothing == "trigonometric" else "own slacks",
        "sim_time_s": state.t_s,
        "wall_time_s": time.perf_counter() - t0,
        "newton_iterations_mean": float(np.mean(iterations)),
        "newton_iterations_max": int(np.max(iterations)) if iterations else 0,
        "halved_steps": int(halved),
        "error": error,
    }
    if info is not None:
        fn = info.contact_force_n[:, 2]
        touching = np.abs(info.contact_gap_m) < 1e-6
        weight = sc.model.rod.mass_kg() * float(np.linalg.norm(sc.model.gravity_m_s2))
        out["total_normal_force_n"] = float(fn.sum())
        out["total_normal_force_over_weight"] = float(fn.sum() / weight)
        out["load_total_variation"] = float(np.sum(np.abs(np.diff(fn))) / max(fn.sum(), 1e-300))
        out["virtual_contacts"] = int(np.sum(touching & (fn < 0.01 * fn.mean())))
        out["nodes_touching"] = int(np.sum(touching))
        if len(history) > 1:
            h = np.array(history)
            out["probe_node"] = probe
            out["probe_load_time_variation"] = float(np.sum(np.abs(np.diff(h))) / max(abs(h.mean()), 1e-300))
        out["normal_force_n"] = fn.round(6).tolist()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", type=int, default=20)
    p.add_argument("--duration", type=float, default=1.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    results = [run(kind, args.sections, args.duration) for kind in ("sigmoid", "trigonometric", "heaviside")]
    for w in (2.0, 2.0 * np.pi):  # the paper's Newton, in the trigonometric slacks
        results.append(run("trigonometric", args.sections, args.duration, regular_coordinates=False, sharpness=w))
    if args.json:
        print(json.dumps({"results": results}))
    else:
        for r in results:
            print({k: v for k, v in r.items() if k != "normal_force_n"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
