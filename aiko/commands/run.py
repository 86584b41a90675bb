"""``aiko run``: run an experiment on a backend, record the log, print where it went (and a JSON summary)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from aiko.commands import SUMMARIES
from aiko.commands._can_options import add_can_arguments, can_overrides, check_can_flags
from aiko.commands._live_options import check_live_outputs
from aiko.core.config import parse_override
from aiko.core.errors import AikoError
from aiko.core.progress import Progress
from aiko.core.recording import FanOutRecorder
from aiko.robots.aiko.experiment import Experiment, check_duration, load_experiment
from aiko.robots.aiko.plugins import backend_help, backend_info, backend_names
from aiko.robots.aiko.run import RunOptions


def register(sub: argparse._SubParsersAction) -> None:
    backends = "; ".join(f"{name}: {text}" for name, text in backend_help().items())
    run = sub.add_parser(
        "run",
        help=SUMMARIES["run"],
        description=f"Run an experiment and record its log. Backends — {backends}.",
    )
    run.add_argument("experiment", help="experiment TOML file (see experiments/)")
    run.add_argument("--backend", metavar="NAME", help=f"one of: {', '.join(backend_names())}")
    run.add_argument("--duration", type=float, metavar="S", help="run length in seconds (default: the file's)")
    run.add_argument("--out", metavar="PATH", help="log file (.mcap); default runs/<experiment>-<time>.mcap")
    run.add_argument("--json", action="store_true", help="print a JSON summary on stdout at the end")
    run.add_argument("--realtime", action="store_true", help="pace simulated backends at wall-clock speed")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the experiment file, e.g. --set sim.mu_transversal=0.3 (repeatable)",
    )
    run.add_argument("--live", action="store_true", help="show the live dashboard while the run goes (gui extra)")
    run.add_argument(
        "--live-screenshot",
        metavar="OUT.png",
        help="with --live: save the dashboard to a PNG when the run ends and close it (for CI and docs)",
    )
    run.add_argument(
        "--foxglove",
        nargs="?",
        const=8765,
        type=int,
        metavar="PORT",
        help="serve the run live to Foxglove over its WebSocket protocol, subprotocol foxglove.sdk.v1 (Foxglove 2.x, "
        "Lichtblick >= 1.22; default port 8765; 0 picks a free one)",
    )
    run.add_argument(
        "--foxglove-legacy",
        nargs="?",
        const=8766,
        type=int,
        metavar="PORT",
        help="also serve the older foxglove.websocket.v1 subprotocol on PORT (default 8766), for Foxglove Studio 1.x, "
        "Lichtblick before 1.22 and @foxglove/ws-protocol clients: a relay to the --foxglove server (implies it)",
    )
    run.add_argument(
        "--foxglove-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the --foxglove server binds to (default 127.0.0.1: this machine only)",
    )
    run.add_argument("--report", metavar="PATH", help="run report, .html or .png (default: the log's name, .html)")
    run.add_argument("--no-report", action="store_true", help="do not write the run report")
    run.add_argument(
        "--replay",
        nargs="?",
        const="sim",
        metavar="BACKEND",
        help="then replay the log on a simulator (default: sim) and compare: LOG-replay.mcap, LOG-vs-replay.png",
    )
    add_can_arguments(run)
    run.set_defaults(handler=run_command)


def default_log_path(experiment: Experiment) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(experiment.log.directory) / f"{experiment.name}-{stamp}.mcap"


def run_command(args: argparse.Namespace) -> int:
    experiment, backend = _load(args)
    out = _log_path(args, experiment)
    options = RunOptions(backend=backend, duration_s=args.duration, realtime=args.realtime)
    dashboard, foxglove = _live_views(args, experiment, backend, options.tracked_link)
    summary = _record(args, experiment, out, options, dashboard, foxglove)
    _after_run(args, out, summary, dashboard)
    _print_summary(args, out, summary)
    return 0


def _load(args: argparse.Namespace) -> tuple[Experiment, str]:
    """The experiment (``--set`` and the CAN flags applied as overrides) and the backend's name; refuses flags
    the chosen backend would ignore, before anything runs."""
    if args.duration is not None and not (0 < args.duration < 86400):
        raise AikoError(f"--duration must be in (0, 86400) seconds, got {args.duration}")
    overrides = dict(parse_override(item) for item in args.set)
    overrides.update(can_overrides(args))
    experiment = load_experiment(args.experiment, overrides)
    if args.duration is not None:
        check_duration(args.duration, experiment.run.reference_rate_hz, "--duration")
    backend = args.backend or experiment.default_backend
    if backend not in backend_names():
        raise AikoError(f"unknown backend {backend!r}; known backends: {', '.join(backend_names())}")
    check_can_flags(args, backend, backend_info(backend).capabilities)
    return experiment, backend


def _log_path(args: argparse.Namespace, experiment: Experiment) -> Path:
    """Where the log goes, its folder created; and the live-view outputs checked, before the run and not after."""
    out = Path(args.out) if args.out else default_log_path(experiment)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AikoError(f"cannot create the log directory {out.parent}: {exc.strerror}") from None
    check_live_outputs(args.live, args.live_screenshot)
    legacy = getattr(args, "foxglove_legacy", None)  # aiko drive shares these helpers and has no such option
    if legacy is not None and args.foxglove is None:
        args.foxglove = 8765  # the relay needs the SDK server behind it
    for option, port in (("--foxglove", args.foxglove), ("--foxglove-legacy", legacy)):
        if port is not None and not 0 <= port <= 65535:
            raise AikoError(f"{option} PORT must be in 0..65535, got {port}")
    return out


def _live_views(args: argparse.Namespace, experiment: Experiment, backend: str, tracked_link: int) -> tuple[Any, Any]:
    """The Qt dashboard (``--live``) and the Foxglove WebSocket server (``--foxglove``), each None if not asked."""
    dashboard = None
    if args.live or args.live_screenshot:
        from aiko.dashboard.live import LiveDashboard

        dashboard = LiveDashboard(
            experiment.robot.n_joints,
            f"aiko run --live: {experiment.name}",
            screenshot=args.live_screenshot,
            close_when_done=bool(args.live_screenshot),
        )
    foxglove = None
    if args.foxglove is not None:
        from aiko.log.live_foxglove import FoxgloveLiveServer
        from aiko.robots.aiko.run import SIM_POSES
        from aiko.robots.aiko.shape import body_drawing

        foxglove = FoxgloveLiveServer(
            body_drawing(experiment.robot),
            tracked_link,
            host=args.foxglove_host,
            port=args.foxglove,
            body_from_joints=backend not in SIM_POSES,
            legacy_port=getattr(args, "foxglove_legacy", None),
        )
        print(f"Foxglove live view: open a connection to {foxglove.url}", file=sys.stderr, flush=True)
        if foxglove.legacy_url is not None:
            print(f"Foxglove live view, foxglove.websocket.v1 (Foxglove Studio 1.x, Lichtblick < 1.22): open a "
                  f"connection to {foxglove.legacy_url}", file=sys.stderr, flush=True)  # fmt: skip
    return dashboard, foxglove


def _record(
    args: argparse.Namespace, experiment: Experiment, out: Path, options: RunOptions, dashboard: Any, foxglove: Any
) -> dict[str, Any]:
    """The run itself, with progress; a failure says what became of the log."""
    from aiko.robots.aiko.run import record_run

    live_recorders = [r for r in (dashboard.recorder if dashboard else None, foxglove) if r is not None]
    progress = Progress(f"run {experiment.name}")
    try:
        summary = record_run(
            experiment,
            out,
            options,
            progress=progress,
            live=None if not live_recorders else FanOutRecorder(*live_recorders),
        )
        progress.complete()
    except AikoError as exc:  # bad input found once the log was open: one line, saying what became of the log
        note = failed_log_note(out)
        raise AikoError(f"{exc}; {note}" if note else str(exc)) from exc
    except BaseException as exc:
        note = failed_log_note(out)
        if note:
            exc.add_note(note)  # the CLI's one line about the failure ends with it
        raise
    finally:
        progress.close()
        if dashboard is not None:
            dashboard.finish()
        if foxglove is not None:
            foxglove.close()
    if foxglove is not None:
        summary["foxglove_url"] = foxglove.url
        summary["foxglove_sent_messages"] = foxglove.sent
        summary["foxglove_dropped_records"] = foxglove.dropped
    return summary


def _after_run(args: argparse.Namespace, out: Path, summary: dict[str, Any], dashboard: Any) -> None:
    """``--replay`` and compare, the report (after the replay: it says what the replay found), the dashboard."""
    if args.replay:
        from aiko.analysis.replay_and_compare import replay_and_compare

        summary.update(replay_and_compare(out, backend_name=args.replay))
    if not args.no_report:
        from aiko.analysis.report import write_report

        summary["report_path"] = str(write_report(out, args.report, summary.get("comparison")))
    if dashboard is not None:
        summary["live_dropped_records"] = dashboard.recorder.dropped
        if not args.json:
            print("close the dashboard window to finish", file=sys.stderr)
        summary["live_exit_code"] = dashboard.wait()


def _print_summary(args: argparse.Namespace, out: Path, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary))
        return
    print(f"log: {out}")
    if "report_path" in summary:
        print(f"report: {summary['report_path']}")
    if "comparison" in summary:
        c = summary["comparison"]
        print(
            f"replay: {summary['replay_log_path']}: RMS {c['rms_position_error_m'] * 1e3:.2f} mm, "
            f"distance ratio {_ratio_text(c['distance_ratio'])}, plot {summary['comparison_plot']}"
        )


def failed_log_note(out: Path) -> str | None:
    """After a failed run: a log of a run that never started (no ``start`` event) is removed, a started one kept;
    either way the user is told which."""
    from aiko.log import LogReader

    if not out.is_file():
        return None
    try:
        started = bool(LogReader(out).events("start"))
    except AikoError:
        started = True  # unreadable: keep it for `aiko log recover`
    if started:
        return f"the log up to the failure is kept: {out}"
    try:
        out.unlink()
    except OSError:
        return f"nothing ran; the log {out} holds only the run's metadata"
    return f"nothing ran, so no log was kept ({out} removed)"


def _ratio_text(ratio: float | None) -> str:
    return "n/a (the run did not move)" if ratio is None else f"{ratio:.3f}"
