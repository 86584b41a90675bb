"""Accuracy and cost of the Cosserat rod against its own fine-step solution: the tip path over the run, per dt.

    python benchmarks/cosserat_accuracy.py --dt 0.0025 0.005 0.01 0.02 --json

Runs the scenario (default experiments/rod/rod_on_plane.toml: a tapered rod released onto a plane) once at the
reference step --reference-dt (default 0.5 ms) and once per --dt, records the tip centreline point after every step
and reports, per dt, the largest and the final distance of the tip from the reference's at the same time, with the
CPU time of the run, its Newton iterations and its sub-steps (more sub-steps than steps: halved steps). Every --dt
must be a whole multiple of --reference-dt. Also reports how far the final tip moves when the initial strains are
perturbed by --perturbation (default 1e-10): where that spread is as large as the error, the error measures the
solver path (which steps were halved), not the time step.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiko.robots.rod_bench.experiment import load_rod_experiment  # noqa: E402
from sim.cosserat import kinematics, step  # noqa: E402


def tip_path(scenario, dt_s: float, perturbation: float = 0.0) -> dict:
    """The tip after every step of dt_s over the scenario's duration, with the run's CPU time and solver counts."""
    model = scenario.model
    state = scenario.initial_state.copy()
    state.q = state.q.copy()
    state.q[6:] += perturbation
    tip_node = model.grid.node_index[-1]
    n_steps = int(round(scenario.duration_s / dt_s))
    tips, iterations, substeps, cpu = np.empty((n_steps, 3)), 0, 0, 0.0
    for k in range(n_steps):
        start = time.process_time()
        info = step(model, state, dt_s, scenario.newton, None, scenario.max_halvings)
        cpu += time.process_time() - start
        iterations += info.iterations
        substeps += info.substeps
        tips[k] = kinematics(model, state.q).p[tip_node]
    return {"tips_m": tips, "cpu_s": cpu, "iterations": iterations, "substeps": substeps, "steps": n_steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="rod_on_plane", help="name of experiments/rod/<name>.toml")
    parser.add_argument("--dt", type=float, nargs="+", default=[0.0025, 0.005, 0.01, 0.02], metavar="S")
    parser.add_argument("--reference-dt", type=float, default=5e-4, metavar="S")
    parser.add_argument("--duration", type=float, metavar="S", help="simulated seconds (default: the file's)")
    parser.add_argument("--perturbation", type=float, default=1e-10, help="added to every initial strain")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    strides = [dt / args.reference_dt for dt in args.dt]
    if args.reference_dt <= 0 or any(abs(s - round(s)) > 1e-9 or round(s) < 1 for s in strides):
        parser.error("every --dt must be a positive whole multiple of --reference-dt")
    overrides = {"run.duration_s": args.duration} if args.duration else None
    scenario = load_rod_experiment(ROOT / "experiments" / "rod" / f"{args.scenario}.toml", overrides)
    step(scenario.model, scenario.initial_state.copy(), scenario.dt_s, scenario.newton)  # numba compile / cache

    reference = tip_path(scenario, args.reference_dt)
    rows = []
    for dt, stride in zip(args.dt, strides, strict=True):
        run = tip_path(scenario, dt)
        perturbed = tip_path(scenario, dt, args.perturbation)
        stride = int(round(stride))
        error = np.linalg.norm(run["tips_m"] - reference["tips_m"][stride - 1 :: stride], axis=1)
        rows.append(
            {
                "dt_s": dt,
                "max_tip_error_mm": 1e3 * float(error.max()),
                "at_t_s": dt * (int(np.argmax(error)) + 1),
                "final_tip_error_mm": 1e3 * float(error[-1]),
                "final_tip_spread_mm": 1e3 * float(np.linalg.norm(perturbed["tips_m"][-1] - run["tips_m"][-1])),
                "cpu_s": run["cpu_s"],
                "iterations": run["iterations"],
                "steps": run["steps"],
                "substeps": run["substeps"],
            }
        )
    out = {
        "scenario": args.scenario,
        "duration_s": scenario.duration_s,
        "reference_dt_s": args.reference_dt,
        "reference_substeps": reference["substeps"],
        "perturbation": args.perturbation,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.scenario}, {scenario.duration_s:g} s, reference dt {args.reference_dt * 1e3:g} ms")
        print("dt (ms) | max tip error (mm) | final (mm) | spread (mm) | CPU (s) | iterations | sub-steps / steps")
        for r in rows:
            print(
                f"{r['dt_s'] * 1e3:g} | {r['max_tip_error_mm']:.2f} | {r['final_tip_error_mm']:.2f} | "
                f"{r['final_tip_spread_mm']:.2f} | {r['cpu_s']:.3f} | {r['iterations']} | "
                f"{r['substeps']} / {r['steps']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
