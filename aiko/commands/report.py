"""``aiko report LOG [--out REPORT.html|.png]``: the run report (summary, channels, events, figures)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiko.analysis.report import write_report
from aiko.commands import SUMMARIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help=SUMMARIES["report"])
    p.add_argument("log", type=Path, help="experiment log (.mcap)")
    p.add_argument("--out", type=Path, default=None, help="REPORT.html or REPORT.png (default: LOG.html)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    out = write_report(args.log, args.out)
    print(json.dumps({"report": str(out)}) if args.json else f"report: {out}")
    return 0
