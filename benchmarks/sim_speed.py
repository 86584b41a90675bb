"""Speed of the 3D snake simulator on the paper's runs at the paper's Δt = 0.25 ms, printed as JSON.

    python benchmarks/sim_speed.py --scenario sidewinding --duration 15 --json

realtime_factor = simulated time / wall-clock time of the run (the paper needed 7.1 min of Matlab per simulated
second of sidewinding, 1.3 min for lateral undulation). cpu_realtime_factor uses this process's CPU time, which is
what one unshared core would give on a loaded machine. numba compilation happens before the clock starts
(a 10 ms warm-up run), as it is cached on disk after the first use anyway.

The ``obstacle_aided`` scenario belongs to the planar obstacle simulator; this script dispatches to
``benchmarks/_scenario_obstacle_aided.py`` (``run(duration_s) -> dict``) when that file exists.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SCENARIOS = {
    "sidewinding": "sidewinding",
    "lateral_undulation": "lateral_undulation_isotropic",
    "lateral_undulation_isotropic": "lateral_undulation_isotropic",
    "lateral_undulation_orthotropic": "lateral_undulation_orthotropic",
}


def run_snake3d(scenario: str, duration_s: float, dt_s: float) -> dict:
    from aiko.robots.aiko.paper_runs import run_paper

    run_paper(SCENARIOS[scenario], 0.01, dt_s=dt_s)  # compile (or load the numba cache) outside the timing
    result = run_paper(SCENARIOS[scenario], duration_s, dt_s=dt_s)
    start, end = result.tracked_m[0], result.tracked_m[-1]
    dx, dy = end[0] - start[0], end[1] - start[1]
    return {
        "scenario": scenario,
        "simulator": "snake3d",
        "dt_s": dt_s,
        "sim_time_s": result.sim_time_s,
        "wall_time_s": result.wall_time_s,
        "cpu_time_s": result.cpu_time_s,
        "realtime_factor": result.realtime_factor,
        "cpu_realtime_factor": result.cpu_realtime_factor,
        "steps": result.steps,
        "newton_iterations_mean": result.newton_iterations_mean,
        "newton_iterations_max": result.newton_iterations_max,
        "contact_residual_max_m_s": result.simulator.stats.max_residual_m_s,
        "tracked_point_start_m": start.tolist(),
        "tracked_point_end_m": end.tolist(),
        "distance_m": math.hypot(dx, dy),
        "heading_deg": math.degrees(math.atan2(dy, dx)),
        "paper_matlab_s_per_sim_s": 7.1 * 60 if scenario == "sidewinding" else 1.3 * 60,
    }


def run_external(scenario: str, duration_s: float, **options: str) -> dict:
    path = HERE / f"_scenario_{scenario}.py"
    spec = importlib.util.spec_from_file_location(f"_scenario_{scenario}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run(duration_s, **options)


def main(argv: list[str] | None = None) -> int:
    external = sorted(p.stem.removeprefix("_scenario_") for p in HERE.glob("_scenario_*.py"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS) + external, default="sidewinding")
    parser.add_argument("--duration", type=float, default=5.0, help="simulated seconds (default 5)")
    parser.add_argument("--dt", type=float, default=2.5e-4, help="time step in s (default: the paper's 0.25 ms)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default output anyway)")
    parser.add_argument(
        "--environment", choices=["structured", "unstructured"], help="obstacle_aided only: which obstacle field"
    )
    args = parser.parse_args(argv)
    if not (math.isfinite(args.duration) and args.duration > 0):
        parser.error(f"--duration must be > 0, got {args.duration}")
    if args.scenario in SCENARIOS:
        out = run_snake3d(args.scenario, args.duration, args.dt)
    else:
        options = {"environment": args.environment} if args.environment else {}
        out = run_external(args.scenario, args.duration, **options)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
