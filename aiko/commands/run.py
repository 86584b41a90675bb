"""``aiko run``: run an experiment on a backend, record the log, print where it went (and a JSON summary)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from aiko.backends import backend_help, backend_names
from aiko.backends.can_bus import add_can_arguments, can_context_options
from aiko.errors import AikoError, writing
from aiko.experiment import Experiment, load_experiment, parse_override
from aiko.progress import Progress
from aiko.recording import FanOutRecorder
from aiko.runner import RunOptions, choose_clock


def register(sub: argparse._SubParsersAction) -> None:
    backends = "; ".join(f"{name}: {text}" for name, text in backend_help().items())
    run = sub.add_parser(
        "run",
        help="run an experiment and record its log",
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
        help="serve the run live to Foxglove over its WebSocket protocol (default port 8765; 0 picks a free one)",
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
    overrides = dict(parse_override(item) for item in args.set)
    experiment = load_experiment(args.experiment, overrides)
    backend = args.backend or experiment.default_backend
    if backend not in backend_names():
        raise AikoError(f"unknown backend {backend!r}; known backends: {', '.join(backend_names())}")
    if args.duration is not None and not (0 < args.duration < 86400):
        raise AikoError(f"--duration must be in (0, 86400) seconds, got {args.duration}")
    bus_flags = [
        flag
        for flag, value in (("--interface", args.interface), ("--channel", args.channel), ("--bitrate", args.bitrate))
        if value is not None
    ]
    if bus_flags and backend != "can":
        raise AikoError(
            f"{', '.join(bus_flags)} select the real bus of --backend can; --backend {backend} does not use it "
            "(hil runs the emulated modules on its own virtual bus)"
        )
    can_flags = [flag for flag, value in (("--can-log", args.can_log), ("--rt-priority", args.rt_priority)) if value]
    if can_flags and backend not in ("can", "hil"):
        raise AikoError(
            f"{', '.join(can_flags)} apply to the CAN bus of --backend can or hil; --backend {backend} has no CAN bus"
        )
    out = Path(args.out) if args.out else default_log_path(experiment)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AikoError(f"cannot create the log directory {out.parent}: {exc.strerror}") from None
    if args.live and not args.live_screenshot:
        from aiko.dashboard.window import interactive_display_available

        if not interactive_display_available():
            raise AikoError(
                "--live needs a display (no DISPLAY or WAYLAND_DISPLAY); --live-screenshot OUT.png renders offscreen"
            )
    if args.live_screenshot:  # found out before the run, not by the dashboard process after it
        shot = Path(args.live_screenshot)
        with writing(shot):
            shot.parent.mkdir(parents=True, exist_ok=True)
            shot.touch()

    from aiko.session import record_run

    options = RunOptions(backend=backend, duration_s=args.duration, realtime=args.realtime)
    clock = choose_clock(backend, args.realtime)
    progress = Progress(f"run {experiment.name}")
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
        from aiko.live_foxglove import FoxgloveLiveServer

        if not 0 <= args.foxglove <= 65535:
            raise AikoError(f"--foxglove PORT must be in 0..65535, got {args.foxglove}")
        from aiko.session import SIM_POSES

        foxglove = FoxgloveLiveServer(
            experiment.robot,
            options.tracked_link,
            host=args.foxglove_host,
            port=args.foxglove,
            body_from_joints=backend not in SIM_POSES,
        )
        print(f"Foxglove live view: open a connection to {foxglove.url}", file=sys.stderr, flush=True)
    live_recorders = [r for r in (dashboard.recorder if dashboard else None, foxglove) if r is not None]
    try:
        summary = record_run(
            experiment,
            out,
            options,
            clock=clock,
            progress=progress,
            live=None if not live_recorders else FanOutRecorder(*live_recorders),
            context_options=can_context_options(args),
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
    if args.replay:
        from aiko.session import replay_and_compare

        summary.update(replay_and_compare(out, backend_name=args.replay))
    if not args.no_report:  # after the replay: the report says what the replay found
        from aiko.report import write_report

        summary["report_path"] = str(write_report(out, args.report, summary.get("comparison")))
    if dashboard is not None:
        summary["live_dropped_records"] = dashboard.recorder.dropped
        if not args.json:
            print("close the dashboard window to finish", file=sys.stderr)
        summary["live_exit_code"] = dashboard.wait()
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"log: {out}")
        if "report_path" in summary:
            print(f"report: {summary['report_path']}")
        if "comparison" in summary:
            c = summary["comparison"]
            print(
                f"replay: {summary['replay_log_path']}: RMS {c['rms_position_error_m'] * 1e3:.2f} mm, "
                f"distance ratio {_ratio_text(c['distance_ratio'])}, plot {summary['comparison_plot']}"
            )
    return 0


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
