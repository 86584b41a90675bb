"""The bench's sensors in HIL: ``aiko bench run EXPERIMENT --backend hil`` with the file's ``[ft_sensor]`` and
``[camera]``, its replay, and the paper's quantities compared with each source (docs/bench.md, "Sensors").

Prints one JSON object per experiment: the run (real-time factor, late ticks, missed deadlines), the F/T reader's
counters, the camera's offline cost, and four comparisons, each ``100 * mean_t |a - b| / max_t |b|``:

* ``hil_vs_replay_arm``: HIL (arm's flange force, plant strains) vs its replay — what the loop adds;
* ``hil_vs_replay_ft``: the same with HIL's normal force from the F/T sensor;
* ``hil_vs_replay_sensors``: HIL measured as a real bench would (F/T force, camera strains) vs the replay;
* ``pipeline``: HIL's camera strains vs HIL's own plant strains (and F/T vs arm force) — what the camera + observer
  pipeline alone adds.

Usage: ``python benchmarks/bench_sensors.py [--host 127.0.0.87] [--out-dir runs/bench-sensors] [EXPERIMENT ...]``
(default: experiments/rod/bench_stick.toml and bench_slide.toml, which carry both sensor tables).
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
KEYS = (
    "strain_error_percent",
    "normal_force_error_percent",
    "tip_slide_error_percent",
    "strain_error_percent_by_point",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", type=Path, default=DEFAULT, help="bench experiment files")
    parser.add_argument("--host", default="127.0.0.87", help="loopback address for the emulators")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/bench-sensors"), help="where the logs go")
    parser.add_argument("--duration", type=float, default=None, help="shorten each run (s)")
    args = parser.parse_args()

    from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
    from aiko.robots.rod_bench.bench_run import record_bench_run
    from aiko.robots.rod_bench.compare import compare_logs
    from aiko.robots.rod_bench.replay import replay_bench_log

    args.out_dir.mkdir(parents=True, exist_ok=True)
    for path in args.experiments:
        experiment = load_bench_experiment(path)
        hil, replay = args.out_dir / f"{experiment.name}-hil.mcap", args.out_dir / f"{experiment.name}-replay.mcap"
        t0 = time.perf_counter()
        run = record_bench_run(experiment, hil, "hil", host=args.host, duration_s=args.duration)
        run_wall_s = time.perf_counter() - t0
        replay_bench_log(hil, replay)

        def pick(summary: dict) -> dict:
            return {k: summary.get(k) for k in KEYS}

        print(
            json.dumps(
                {
                    "experiment": experiment.name,
                    "load_average": os.getloadavg()[0],
                    "hil_duration_s": run["duration_s"],
                    "hil_loop_wall_s": run["loop_wall_time_s"],
                    "hil_wall_s_with_camera": run_wall_s,
                    "hil_realtime_factor": run["realtime_factor"],
                    "emulator_late_ticks": run["emulator"].get("late_ticks"),
                    "emulator_ticks": run["emulator"].get("ticks"),
                    "deadlines_missed": run["deadlines_missed"],
                    "sensors": run.get("sensors"),
                    "hil_vs_replay_arm": pick(compare_logs(hil, replay).summary),
                    "hil_vs_replay_ft": pick(compare_logs(hil, replay, force_a="ft").summary),
                    "hil_vs_replay_sensors": pick(compare_logs(hil, replay, force_a="ft", strain_a="camera").summary),
                    "pipeline": pick(compare_logs(hil, hil, force_a="ft", strain_a="camera").summary),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
