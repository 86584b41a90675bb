"""The soft-rod bench in the loop: ``aiko bench run EXPERIMENT --backend hil``, then its replay through the Cosserat
simulator and the paper's quantities of the two (``aiko bench replay`` + ``aiko bench compare``).

Prints one JSON object per experiment: the HIL run's real-time factor (run seconds / loop wall seconds; the run's
clock is the emulated controller's, which slows when the rod plant inside its tick runs slower than real time),
the emulator's late ticks, the deadlines the loop skipped, and the errors HIL vs replay
(``100 * mean_t |hil - replay| / max_t |replay|``, docs/bench.md).

``--repeats N`` runs each experiment N times (the paper repeats each bench test 5 times) and then prints, per
experiment, one more JSON object (``"repeats": N``) with the mean, sample standard deviation, minimum and maximum of
each metric over the N runs (a run that fails, e.g. the arm's driver refusing a servoL jump after the loaded
machine stalled the loop, prints its error and is counted in ``failed``). ``--no-camera`` leaves the experiment's
``[camera]`` out (the HIL camera films after the run, about 0.55 s a frame: minutes per run on this machine).

Usage: ``python benchmarks/bench_hil.py [--host 127.0.0.48] [--out-dir runs/bench-hil] [--repeats N] [--no-camera]
[EXPERIMENT ...]`` (default: experiments/rod/bench_stick.toml and bench_slide.toml).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's aiko, not another installed one
DEFAULT = [REPO / "experiments" / "rod" / "bench_stick.toml", REPO / "experiments" / "rod" / "bench_slide.toml"]
# the paper's quantities (HIL vs replay) and the loop's health: what the repeats summarise
METRICS = (
    "strain_error_percent",
    "normal_force_error_percent",
    "contact_normal_force_error_percent",
    "tip_slide_error_percent",
    "ft_normal_force_error_percent",
    "camera_strain_error_percent",
    "hil_realtime_factor",
    "emulator_late_ticks",
    "deadlines_missed",
)


def spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one run), min and max of each metric present in every row."""
    out: dict[str, Any] = {}
    for key in METRICS:
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        if len(values) == len(rows) and values:
            out[key] = {
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "min": min(values),
                "max": max(values),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", type=Path, default=DEFAULT, help="bench experiment files")
    parser.add_argument("--host", default="127.0.0.48", help="loopback address for the emulator")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/bench-hil"), help="where the logs go")
    parser.add_argument("--repeats", type=int, default=1, metavar="N", help="runs per experiment (paper: 5)")
    parser.add_argument("--no-camera", action="store_true", help="leave the experiments' [camera] out")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    from aiko.core.errors import AikoError
    from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
    from aiko.robots.rod_bench.bench_run import record_bench_run
    from aiko.robots.rod_bench.compare import compare_logs
    from aiko.robots.rod_bench.replay import replay_bench_log

    args.out_dir.mkdir(parents=True, exist_ok=True)
    for path in args.experiments:
        experiment = load_bench_experiment(path)
        if args.no_camera:
            experiment = replace(experiment, camera=None)
        rows: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for repeat in range(args.repeats):
            tag = f"-{repeat}" if args.repeats > 1 else ""
            hil_log = args.out_dir / f"{experiment.name}-hil{tag}.mcap"
            replay_log = args.out_dir / f"{experiment.name}-hil{tag}-replay.mcap"
            try:
                run = record_bench_run(experiment, hil_log, "hil", host=args.host)
            except AikoError as exc:  # e.g. UR3Arm refusing a servoL jump after the loaded machine stalled the loop
                failed.append({"experiment": experiment.name, "repeat": repeat, "error": str(exc)})
                print(json.dumps({**failed[-1], "load_average": os.getloadavg()[0]}), flush=True)
                continue
            t0 = time.perf_counter()
            replay = replay_bench_log(hil_log, replay_log)
            replay_wall_s = time.perf_counter() - t0
            cmp = compare_logs(hil_log, replay_log).summary
            row = {
                "experiment": experiment.name,
                "repeat": repeat,
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
            if experiment.ft_sensor is not None:  # as a real bench measures the force: the F/T sensor
                row["ft_normal_force_error_percent"] = compare_logs(hil_log, replay_log, force_a="ft").summary[
                    "normal_force_error_percent"
                ]
            if experiment.camera is not None:  # … and the strains: the camera's observer
                row["camera_strain_error_percent"] = compare_logs(hil_log, replay_log, strain_a="camera").summary[
                    "strain_error_percent"
                ]
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.repeats > 1:
            summary = {"experiment": experiment.name, "repeats": args.repeats, "camera": experiment.camera is not None}
            summary["failed"] = len(failed)  # the spread is over the runs that finished
            print(json.dumps({**summary, **spread(rows)}), flush=True)


if __name__ == "__main__":
    main()
