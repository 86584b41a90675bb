"""The soft-rod bench in the loop: ``aiko bench run EXPERIMENT --backend hil``, then its replay through the Cosserat
simulator and the paper's quantities of the two (``aiko bench replay`` + ``aiko bench compare``).

Prints one JSON object per experiment: the HIL run's real-time factor (run seconds / loop wall seconds; the run's
clock is the emulated controller's, which slows when the rod plant inside its tick runs slower than real time),
the emulator's late ticks, the deadlines the loop skipped, and the errors HIL vs replay
(``100 * mean_t |hil - replay| / max_t |replay|``, docs/bench.md).

Usage: ``python benchmarks/bench_hil.py [--host 127.0.0.48] [--out-dir runs/bench-hil] [EXPERIMENT ...]``
(default: experiments/rod/bench_stick.toml and bench_slide.toml).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's aiko, not another installed one
DEFAULT = [REPO / "experiments" / "rod" / "bench_stick.toml", REPO / "experiments" / "rod" / "bench_slide.toml"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", type=Path, default=DEFAULT, help="bench experiment files")
    parser.add_argument("--host", default="127.0.0.48", help="loopback address for the emulator")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/bench-hil"), help="where the logs go")
    args = parser.parse_args()

    from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
    from aiko.robots.rod_bench.bench_run import record_bench_run
    from aiko.robots.rod_bench.compare import compare_logs
    from aiko.robots.rod_bench.replay import replay_bench_log

    args.out_dir.mkdir(parents=True, exist_ok=True)
    for path in args.experiments:
        experiment = load_bench_experiment(path)
        hil_log = args.out_dir / f"{experiment.name}-hil.mcap"
        replay_log = args.out_dir / f"{experiment.name}-hil-replay.mcap"
        run = record_bench_run(experiment, hil_log, "hil", host=args.host)
        t0 = time.perf_counter()
        replay = replay_bench_log(hil_log, replay_log)
        replay_wall_s = time.perf_counter() - t0
        cmp = compare_logs(hil_log, replay_log).summary
        print(
            json.dumps(
                {
                    "experiment": experiment.name,
                    "load_average": os.getloadavg()[0],
                    "hil_duration_s": run["duration_s"],
                    "hil_loop_wall_s": run["loop_wall_time_s"],
                    "hil_realtime_factor": run["realtime_factor"],
                    "emulator_ticks": run["emulator"].get("ticks"),
                    "emulator_late_ticks": run["emulator"].get("late_ticks"),
                    "deadlines_missed": run["deadlines_missed"],
                    "replay_realtime_factor": replay["realtime_factor"],
                    "replay_wall_s": replay_wall_s,
                    "strain_error_percent": cmp["strain_error_percent"],
                    "normal_force_error_percent": cmp["normal_force_error_percent"],
                    "contact_normal_force_error_percent": cmp.get("contact_normal_force_error_percent"),
                    "tip_slide_error_percent": cmp["tip_slide_error_percent"],
                    "tip_slide_end_m": cmp["tip_slide_end_m"],
                    "normal_force_end_n": cmp["normal_force_end_n"],
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
