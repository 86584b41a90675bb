"""``aiko bench``: the soft-rod bench (paper 004, section X) — run it on the simulator, the emulated arm (HIL) or the
real UR3; replay a log through the simulator; compare two logs with the paper's quantities."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from aiko.commands import SUMMARIES
from aiko.commands._live_options import check_live_outputs
from aiko.core.errors import AikoError, writing
from aiko.core.progress import Progress

BACKENDS = ("sim", "hil", "real")


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help=SUMMARIES["bench"])
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="ACTION", parser_class=type(bench))

    run = bench_sub.add_parser("run", help="run a bench experiment (experiments/rod/bench_*.toml) and log it")
    run.add_argument("experiment", help="rod experiment TOML with a [base_motion] table")
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        default="sim",
        help="sim: the Cosserat simulator; hil: ur_rtde against `aiko emulate ur3` with the rod as plant; "
        "real: the UR3 at [ur3] host (default sim)",
    )
    run.add_argument(
        "--out", metavar="LOG.mcap", help="experiment log (default runs/bench-<name>-<backend>-<time>.mcap)"
    )
    run.add_argument(
        "--duration", type=float, metavar="S", help="run for S seconds (default: the file's run.duration_s)"
    )
    run.add_argument(
        "--realtime",
        action="store_true",
        help="sim: run on the wall clock (the arm backends run on the controller's clock)",
    )
    run.add_argument(
        "--host",
        metavar="ADDRESS",
        help="controller address: hil starts the emulator on this loopback address (default 127.0.0.41); "
        "real overrides [ur3] host",
    )
    run.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="P",
        help="hil: run the emulated controller, whose ticks step the rod, at SCHED_FIFO priority P (1-99) where the "
        "system grants it (root or CAP_SYS_NICE), so a busy PC does not stretch its ticks; the summary's "
        "emulator.rt_priority says whether it did (default 0: normal priority)",
    )
    run.add_argument(
        "--live", action="store_true", help="show the bench's live dashboard while the run goes (gui extra)"
    )
    run.add_argument(
        "--live-screenshot",
        metavar="OUT.png",
        help="with --live: save the dashboard to a PNG when the run ends and close it (for CI and docs)",
    )
    run.add_argument("--json", action="store_true", help="print the run's JSON summary on stdout")
    run.set_defaults(handler=run_command)

    rep = bench_sub.add_parser("replay", help="re-drive the Cosserat simulator with a bench log's flange poses")
    rep.add_argument("log", type=Path, help="bench log (.mcap) to replay")
    rep.add_argument("--out", type=Path, metavar="REPLAY.mcap", help="replay log (default: LOG stem + -replay.mcap)")
    rep.add_argument("--json", action="store_true", help="print the replay's JSON summary on stdout")
    rep.set_defaults(handler=replay_command)

    cmp_ = bench_sub.add_parser("compare", help="the paper's bench quantities of two logs and their errors")
    cmp_.add_argument("log_a", type=Path, help="bench log A (e.g. the experiment or HIL run)")
    cmp_.add_argument("log_b", type=Path, help="bench log B, the reference errors are normalised by")
    cmp_.add_argument("--plot", metavar="OUT.png", help="plot strains, normal force and tip slide of both logs")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    for side in ("a", "b"):
        cmp_.add_argument(
            f"--force-{side}",
            choices=("arm", "ft"),
            default="arm",
            help=f"log {side.upper()}'s normal force from the arm's flange force (arm) or the F/T sensor (ft)",
        )
        cmp_.add_argument(
            f"--strain-{side}",
            choices=("plant", "camera"),
            default="plant",
            help=f"log {side.upper()}'s strains from the simulator (plant) or the camera's observer (camera)",
        )
        cmp_.add_argument(
            f"--slide-{side}",
            choices=("plant", "camera"),
            default="plant",
            help=f"log {side.upper()}'s tip slide from the simulated rod (plant) or the camera's last marker (camera; "
            "the other log's plant slide is then taken at that marker)",
        )
    cmp_.set_defaults(handler=compare_command)
    bench.set_defaults(handler=lambda args: bench.print_help() or 2)


def _progress(label: str) -> Progress | None:
    return Progress(label) if sys.stderr.isatty() else None


def run_command(args: argparse.Namespace) -> int:
    from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
    from aiko.robots.rod_bench.bench_run import check_emulator_rt_priority, record_bench_run

    experiment = load_bench_experiment(args.experiment)
    if args.duration is not None and not args.duration > 0:
        raise AikoError(f"--duration must be > 0, got {args.duration}")
    check_emulator_rt_priority(args.rt_priority, args.backend)
    out = Path(args.out or f"runs/bench-{experiment.name}-{args.backend}-{time.strftime('%Y%m%d-%H%M%S')}.mcap")
    dashboard = _live_dashboard(args, f"aiko bench run --live: {experiment.name} ({args.backend})")
    try:
        with writing(out):
            summary = record_bench_run(
                experiment,
                out,
                args.backend,
                duration_s=args.duration,
                realtime=args.realtime,
                host=args.host,
                emulator_rt_priority=args.rt_priority,
                progress=_progress(f"bench {experiment.name} ({args.backend})"),
                live=dashboard.recorder if dashboard else None,
            )
    finally:
        if dashboard is not None:
            dashboard.finish()
    if dashboard is not None:
        summary["live_dropped_records"] = dashboard.recorder.dropped
        if not args.json:
            print("close the dashboard window to finish", file=sys.stderr)
        summary["live_exit_code"] = dashboard.wait()
    _print(summary, args.json)
    return 0


def _live_dashboard(args: argparse.Namespace, title: str) -> Any:
    """The bench's live view in its own process (``--live``, ``--live-screenshot``), or None; checked before the run:
    no display and no screenshot is one line, not a window that cannot open after the arm has moved."""
    if not (args.live or args.live_screenshot):
        return None
    check_live_outputs(args.live, args.live_screenshot)
    from aiko.dashboard.live import LiveDashboard

    return LiveDashboard(
        0, title, screenshot=args.live_screenshot, close_when_done=bool(args.live_screenshot), view="bench"
    )


def replay_command(args: argparse.Namespace) -> int:
    from aiko.robots.rod_bench.replay import replay_bench_log

    out = args.out or args.log.with_name(args.log.stem + "-replay.mcap")
    with writing(out):
        summary = replay_bench_log(args.log, out, progress=_progress(f"bench replay {args.log.name}"))
    _print(summary, args.json)
    return 0


def compare_command(args: argparse.Namespace) -> int:
    from aiko.robots.rod_bench.compare import compare_logs, plot_comparison

    result = compare_logs(
        args.log_a,
        args.log_b,
        force_a=args.force_a,
        force_b=args.force_b,
        strain_a=args.strain_a,
        strain_b=args.strain_b,
        slide_a=args.slide_a,
        slide_b=args.slide_b,
    )
    if args.plot:
        plot_comparison(result, args.plot)
        result.summary["plot"] = args.plot
    _print(result.summary, args.json)
    return 0


def _print(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary))
        return
    for key, value in summary.items():
        if isinstance(value, dict | list) and len(json.dumps(value)) > 100:
            continue
        print(f"{key}: {value}")
