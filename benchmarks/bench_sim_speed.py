"""The soft-rod bench on the simulator as a user runs it: `aiko bench run EXPERIMENT --backend sim`, a fresh process
each time, from start to exit.

    python benchmarks/bench_sim_speed.py --json                        # bench_stick and bench_slide, 3 each
    python benchmarks/bench_sim_speed.py --experiment bench_stick --repeat 5 --other-checkout ../old --json

Per run: the run's own real-time factor (simulated seconds per second of its control loop: what the loop needs to
hold real time), the process's wall time from start to exit (what the user waits for: imports, the kernels loaded
from numba's cache, the log closed) and its CPU time (user + system, less sensitive to a shared machine), and the
Newton iterations per rod step. ``--other-checkout PATH`` runs the same command from another checkout of the
project between ours (interleaved, the machine's load shared alike) and reports the median ratios other / ours.
The first run of a checkout whose numba cache is cold compiles; ``--warmup`` (default 1) runs that are not counted.
Prints one JSON object; the 1-minute load average is recorded beside each run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one_run(checkout: Path, experiment: str, log_dir: Path) -> dict:
    """`python -m aiko.cli bench run` from ``checkout`` in a fresh process; its summary plus wall and CPU times."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "OPENBLAS_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "aiko.cli", "bench", "run", f"experiments/rod/{experiment}.toml"]
    command += ["--backend", "sim", "--json", "--out", str(log_dir / f"{experiment}.mcap")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} (in {checkout}) exited {done.returncode}: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return {
        "realtime_factor": summary["realtime_factor"],
        "loop_wall_s": summary["loop_wall_time_s"],
        "process_wall_s": round(wall_s, 3),
        "process_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
        "newton_iterations_mean": summary.get("newton_iterations_mean"),
        "halved_steps": summary.get("halved_steps"),
        "duration_s": summary["duration_s"],
        "load_1min": os.getloadavg()[0],
    }


def _medians(runs: list[dict]) -> dict:
    keys = ("realtime_factor", "loop_wall_s", "process_wall_s", "process_cpu_s")
    return {key: statistics.median(r[key] for r in runs) for key in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", nargs="+", default=["bench_stick", "bench_slide"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="uncounted runs per checkout first (numba cache)")
    parser.add_argument("--other-checkout", type=Path, help="another checkout of the project, run interleaved")
    parser.add_argument("--json", action="store_true", help="(the output is always one JSON object)")
    args = parser.parse_args()
    checkouts = {"ours": REPO}
    if args.other_checkout is not None:
        checkouts["other"] = args.other_checkout.resolve()
    result: dict = {"command": "aiko bench run experiments/rod/EXPERIMENT.toml --backend sim --json", "runs": {}}
    with tempfile.TemporaryDirectory(prefix="bench-sim-speed-") as tmp:
        for experiment in args.experiment:
            for checkout in checkouts.values():
                for _ in range(args.warmup):
                    one_run(checkout, experiment, Path(tmp))
            runs: dict[str, list[dict]] = {name: [] for name in checkouts}
            for _ in range(args.repeat):
                for name, checkout in checkouts.items():
                    runs[name].append(one_run(checkout, experiment, Path(tmp)))
                    print(f"{experiment} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
            entry = {name: {"runs": r, "median": _medians(r)} for name, r in runs.items()}
            if "other" in runs:
                ours, other = entry["ours"]["median"], entry["other"]["median"]
                entry["ratio_other_over_ours"] = {
                    "loop_wall_s": other["loop_wall_s"] / ours["loop_wall_s"],
                    "process_wall_s": other["process_wall_s"] / ours["process_wall_s"],
                    "process_cpu_s": other["process_cpu_s"] / ours["process_cpu_s"],
                }
            result["runs"][experiment] = entry
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
