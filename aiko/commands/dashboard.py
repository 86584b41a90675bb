"""``aiko dashboard LOG``: scrub a recorded log in the dashboard (``--screenshot PNG`` renders it offscreen)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from aiko.core.errors import AikoError
from aiko.log import LogReader


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="open a recorded log in the dashboard (slider to scrub through time)")
    p.add_argument("log", type=Path, help="experiment log (.mcap)")
    p.add_argument(
        "--screenshot",
        type=Path,
        metavar="OUT.png",
        help="render the whole run offscreen to a PNG and exit (no window)",
    )
    p.add_argument(
        "--at",
        type=float,
        default=None,
        metavar="S",
        help="with --screenshot: show the run up to S seconds after its first message",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    from aiko.dashboard.model import DashboardModel
    from aiko.dashboard.window import application, build_window, dispose, log_messages, n_joints_of

    if args.at is not None and not (math.isfinite(args.at) and args.at >= 0):
        raise AikoError(f"--at must be a time in seconds >= 0, got {args.at}")
    if not args.screenshot:
        from aiko.dashboard.window import interactive_display_available

        if not interactive_display_available():
            raise AikoError(
                "the dashboard needs a display (no DISPLAY or WAYLAND_DISPLAY); --screenshot OUT.png renders offscreen"
            )
    reader = LogReader(args.log)
    messages = log_messages(reader)
    if args.screenshot:
        import os

        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = application()
    window = build_window(
        DashboardModel(n_joints_of(reader)), None, title=f"aiko dashboard — {args.log.name}", messages=messages
    )
    if args.screenshot:
        if args.at is not None and messages:
            span = max(messages[-1][1] - messages[0][1], 1)
            window.slider.setValue(max(0, min(1000, round(args.at * 1e9 / span * 1000))))
        out = window.screenshot(args.screenshot)
        dispose(window)
        print(json.dumps({"screenshot": str(out)}) if args.json else f"screenshot: {out}")
        return 0
    window.show()
    status = int(app.exec())
    dispose(window)
    return status
