"""Speed of the Cosserat rod simulator on a scenario: simulated time per wall-clock time.

    python benchmarks/cosserat_speed.py --scenario rod_on_plane --sections 20 --dt 0.005 --json

n = m = --sections. numba compilation and the first step are excluded (a warm-up run of one step).
BLAS is pinned to one thread: the dense solves are ~200 x 200, where threading only adds contention.
--step reference runs the readable reference step (NewtonSettings.compiled_step=False) instead of the compiled one;
cpu_time_s is this process's CPU time (what one unshared core gives on a loaded machine), load_average the machine's
1-minute load at the end, end_centreline_m the rod's last centreline (the two steps agree to the Newton tolerance).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiko.robots.rod_bench.experiment import load_rod_experiment  # noqa: E402
from sim.cosserat import step  # noqa: E402
from sim.cosserat.forces import centreline  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="rod_on_plane", help="name of experiments/rod/<name>.toml")
    parser.add_argument("--sections", type=int, default=20, help="n = m")
    parser.add_argument("--dt", type=float, default=0.005, help="time step in seconds")
    parser.add_argument("--duration", type=float, help="simulated seconds (default: the file's)")
    parser.add_argument("--smoothing", help="override the contact smoothing")
    parser.add_argument("--tolerance", type=float, help="override run.newton_tolerance (default 1e-8)")
    parser.add_argument("--step", choices=("compiled", "reference"), default="compiled", help="which step to run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    path = ROOT / "experiments" / "rod" / f"{args.scenario}.toml"
    overrides = {"model.n_sections": args.sections, "contact.m_sections": args.sections, "run.dt_s": args.dt}
    if args.tolerance:
        overrides["run.newton_tolerance"] = args.tolerance
    if args.duration:
        overrides["run.duration_s"] = args.duration
    if args.smoothing:
        overrides["contact.smoothing"] = args.smoothing
    scenario = load_rod_experiment(path, overrides)
    newton = dataclasses.replace(scenario.newton, compiled_step=args.step == "compiled")

    warm = scenario.initial_state.copy()
    step(scenario.model, warm, scenario.dt_s, newton)  # numba compile / cache load

    state = scenario.initial_state.copy()
    n_steps = int(round(scenario.duration_s / scenario.dt_s))
    iterations, halved = [], 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(n_steps):
        info = step(scenario.model, state, scenario.dt_s, newton)
        iterations.append(info.iterations)
        halved += info.substeps > 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    out = {
        "command": " ".join(["python", *sys.argv]),
        "step": args.step,
        "scenario": args.scenario,
        "sections": args.sections,
        "contact_sections": args.sections,
        "dt_s": scenario.dt_s,
        "smoothing": scenario.model.contact.smoothing.kind if scenario.model.contact else None,
        "sim_time_s": state.t_s,
        "wall_time_s": wall,
        "realtime_factor": state.t_s / wall,
        "cpu_time_s": cpu,
        "cpu_realtime_factor": state.t_s / cpu,
        "load_average": os.getloadavg()[0],
        "newton_iterations_mean": float(np.mean(iterations)),
        "newton_iterations_max": int(np.max(iterations)),
        "halved_steps": int(halved),
        "steps": n_steps,
        "end_centreline_m": centreline(scenario.model, state.q).tolist(),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
