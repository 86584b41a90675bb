"""``aiko dashboard LOG``: scrub a recorded log in the dashboard (``--screenshot PNG`` renders it offscreen)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError
from aiko.log import LogReader


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help=SUMMARIES["dashboard"])
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


def _window_for(reader: LogReader, name: str):
    """Aiko's joint view, or the rod bench's view for a bench log; and the log's time span (ns) for ``--at``."""
    from aiko.dashboard.bench_window import BenchSeries, build_bench_window, is_bench_log
    from aiko.dashboard.model import DashboardModel
    from aiko.dashboard.window import build_window, log_messages, n_joints_of

    if is_bench_log(reader):
        series = BenchSeries(reader)
        return build_bench_window(series, title=f"aiko dashboard — {name}"), int(series.duration_s * 1e9)
    messages = log_messages(reader)
    window = build_window(
        DashboardModel(n_joints_of(reader)), None, title=f"aiko dashboard — {name}", messages=messages
    )
    return window, (max(messages[-1][1] - messages[0][1], 1) if messages else 0)


def run_dashboard(args: argparse.Namespace) -> int:
    from aiko.dashboard.window import application, dispose

    if args.at is not None and not (math.isfinite(args.at) and args.at >= 0):
        raise AikoError(f"--at must be a time in seconds >= 0, got {args.at}")
    if not args.screenshot:
        from aiko.dashboard.window import interactive_display_available

        if not interactive_display_available():
            raise AikoError(
                "the dashboard needs a display (no DISPLAY or WAYLAND_DISPLAY); --screenshot OUT.png renders offscreen"
            )
    reader = LogReader(args.log)
    if args.screenshot:
        import os

        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = application()
    window, span_ns = _window_for(reader, args.log.name)
    if args.screenshot:
        if args.at is not None and span_ns:
            window.slider.setValue(max(0, min(1000, round(args.at * 1e9 / span_ns * 1000))))
        out = window.screenshot(args.screenshot)
        dispose(window)
        print(json.dumps({"screenshot": str(out)}) if args.json else f"screenshot: {out}")
        return 0
    window.show()
    status = int(app.exec())
    dispose(window)
    return status
