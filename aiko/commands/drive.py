"""``aiko drive``: drive Aiko live — steer, change speed and switch gaits while it moves — on any backend.

The run is ``aiko run``'s (the same backend lifecycle, e-stop, module watchdog and safety stops, log, report,
``--replay``), on the wall clock, with the experiment's gait made steerable (``aiko.robots.aiko.gaits.steerable``)
and the operator's commands recorded on ``/drive/commands``. At the end the driven run is also written as an
experiment file (``LOG-driven.toml``) that ``aiko run`` replays command for command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from aiko.commands import SUMMARIES
from aiko.commands._can_options import add_can_arguments
from aiko.commands.run import (
    _after_run,
    _live_views,
    _load,
    _log_path,
    _print_summary,
    failed_log_note,
)
from aiko.core.errors import AikoError
from aiko.core.recording import FanOutRecorder
from aiko.robots.aiko.plugins import backend_help, backend_names

INPUTS = ("keyboard", "gamepad", "foxglove")
DEFAULT_DURATION_S = 3600.0


def register(sub: argparse._SubParsersAction) -> None:
    backends = "; ".join(f"{name}: {text}" for name, text in backend_help().items())
    p = sub.add_parser(
        "drive",
        help=SUMMARIES["drive"],
        description=(
            "Drive the robot live with the steerable gait: turn, change speed and switch gaits while it moves, "
            "every change inside what the joint modules can follow. The run is aiko run's (e-stop, watchdog, safety "
            "stops, log, report), on the wall clock; every operator command is logged on /drive/commands and the "
            f"run is written as an experiment file that aiko run replays. Backends — {backends}."
        ),
        epilog=(
            "Keys: up/down speed, left/right turn, c straight on, space pause/resume, 1 lateral undulation, "
            "2 sidewinding, 3 obstacle-aided, 0 rest, q stop (Ctrl-C: at once). A lost input pauses the gait; "
            "after 2 s the references stop and the modules' watchdog stops the robot. See docs/drive.md."
        ),
    )
    p.add_argument("experiment", help="experiment TOML file: its robot, backend settings and start gait")
    p.add_argument("--backend", metavar="NAME", help=f"one of: {', '.join(backend_names())}")
    p.add_argument(
        "--input",
        choices=INPUTS,
        default="keyboard",
        help="keyboard (this terminal), gamepad (evdev; --gamepad DEVICE or --gamepad-replay FILE) or foxglove "
        "(the Teleop panel publishing to the live server; implies --foxglove)",
    )
    p.add_argument("--gamepad", metavar="DEVICE", help="evdev device of the gamepad (default: the first one found)")
    p.add_argument("--gamepad-record", metavar="FILE.jsonl", help="also record the gamepad's events for replay")
    p.add_argument("--gamepad-replay", metavar="FILE.jsonl", help="replay a recorded gamepad stream (tests, demos)")
    p.add_argument(
        "--duration",
        type=float,
        metavar="S",
        help=f"end the run after S seconds at the latest (default {DEFAULT_DURATION_S:g}; the stop key ends it)",
    )
    p.add_argument("--out", metavar="PATH", help="log file (.mcap); default runs/<experiment>-<time>.mcap")
    p.add_argument(
        "--save-experiment", metavar="OUT.toml", help="the driven run as an experiment (default LOG-driven.toml)"
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout at the end")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting of the experiment file"
    )
    p.add_argument("--live", action="store_true", help="show the live dashboard while driving (gui extra)")
    p.add_argument("--live-screenshot", metavar="OUT.png", help="with --live: save the dashboard when the run ends")
    p.add_argument("--foxglove", nargs="?", const=8765, type=int, metavar="PORT", help="serve the run live to Foxglove")
    p.add_argument("--foxglove-host", default="127.0.0.1", metavar="HOST", help="address of the --foxglove server")
    p.add_argument("--report", metavar="PATH", help="run report, .html or .png (default: the log's name, .html)")
    p.add_argument("--no-report", action="store_true", help="do not write the run report")
    p.add_argument("--replay", nargs="?", const="sim", metavar="BACKEND", help="then replay the log and compare")
    add_can_arguments(p)
    p.set_defaults(handler=drive_command, realtime=True)


def drive_command(args: argparse.Namespace) -> int:
    if args.input == "foxglove" and args.foxglove is None:
        args.foxglove = 8765
    if args.duration is None:
        args.duration = DEFAULT_DURATION_S
    experiment, backend = _load(args)
    out = _log_path(args, experiment)
    device = make_input(args)
    if args.input == "keyboard":
        _log_lines_above_the_status_line()
        # the dashboard's process shares this terminal: Qt's uncategorised warnings (the offscreen plugin's
        # "does not support propagateSizeHints()") would break the status line
        os.environ.setdefault("QT_LOGGING_RULES", "default.warning=false")
    if args.input == "foxglove":
        port, args.foxglove = args.foxglove, None
        dashboard, _ = _live_views(args, experiment, backend, 6)
        foxglove = _teleop_server(args, experiment, backend, port, device)
    else:
        dashboard, foxglove = _live_views(args, experiment, backend, 6)
    summary = _drive(args, experiment, backend, out, device, dashboard, foxglove)
    saved = Path(args.save_experiment) if args.save_experiment else out.with_name(f"{out.stem}-driven.toml")
    from aiko.robots.aiko.drive.export import write_driven_experiment

    summary["driven_experiment_path"] = str(write_driven_experiment(out, saved))
    _after_run(args, out, summary, dashboard)
    _print_summary(args, out, summary)
    if not args.json:
        print(f"driven experiment: {saved} (aiko run {saved} sends the same references)")
    return 0


def _teleop_server(args: argparse.Namespace, experiment: Any, backend: str, port: int, device: Any) -> Any:
    """The live Foxglove server, taking what clients publish (the Teleop panel) as the drive's input."""
    from aiko.log.live_foxglove import FoxgloveLiveServer
    from aiko.robots.aiko.run import SIM_POSES
    from aiko.robots.aiko.shape import body_drawing

    server = FoxgloveLiveServer(
        body_drawing(experiment.robot),
        6,
        host=args.foxglove_host,
        port=port,
        body_from_joints=backend not in SIM_POSES,
        client_publish=device.listener(),
    )
    print(
        f"Foxglove live view and Teleop input: open a connection to {server.url}; in a Teleop panel set the topic "
        "(e.g. /aiko/teleop) and hold a button",
        file=sys.stderr,
        flush=True,
    )
    return server


def _log_lines_above_the_status_line() -> None:
    """A log line (a warning of the run) first clears the status line it would otherwise run into; the loop's
    late-tick warnings are counted on the status line instead (the log keeps each as an event)."""
    if not sys.stderr.isatty():
        return
    from aiko.robots.aiko.drive.session import LateTicks

    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setFormatter(logging.Formatter("\r\x1b[2K%(levelname)s %(name)s: %(message)s"))
            handler.addFilter(LateTicks())


def make_input(args: argparse.Namespace) -> Any:
    if args.input == "keyboard":
        from aiko.robots.aiko.drive.keyboard import KeyboardInput

        return KeyboardInput()
    if args.input == "gamepad":
        from aiko.robots.aiko.drive.gamepad import GamepadInput

        return GamepadInput(device=args.gamepad, record=args.gamepad_record, replay=args.gamepad_replay)
    from aiko.robots.aiko.drive.teleop import FoxgloveTeleopInput

    return FoxgloveTeleopInput()


def _drive(
    args: argparse.Namespace, experiment: Any, backend: str, out: Path, device: Any, dashboard: Any, foxglove: Any
) -> dict[str, Any]:
    from aiko.robots.aiko.drive.run import record_drive

    live_recorders = [r for r in (dashboard.recorder if dashboard else None, foxglove) if r is not None]
    try:
        summary = record_drive(
            experiment,
            out,
            device,
            backend_name=backend,
            duration_s=args.duration,
            live=None if not live_recorders else FanOutRecorder(*live_recorders),
        )
    except AikoError as exc:
        note = failed_log_note(out)
        raise AikoError(f"{exc}; {note}" if note else str(exc)) from exc
    except BaseException as exc:
        note = failed_log_note(out)
        if note:
            exc.add_note(note)
        raise
    finally:
        if dashboard is not None:
            dashboard.finish()
        if foxglove is not None:
            foxglove.close()
    sys.stderr.flush()
    return summary
