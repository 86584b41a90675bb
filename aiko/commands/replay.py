"""``aiko replay LOG --out SIM.mcap [--set KEY=VALUE …]``: re-drive a simulator with a log's references."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import aiko.robots.aiko.mocap  # noqa: F401  (registers the [mocap] section before any experiment is read)
from aiko.analysis.replay import DEFAULT_REPLAY_BACKEND, replay
from aiko.commands import SUMMARIES
from aiko.core.config import parse_override
from aiko.core.errors import writing
from aiko.core.progress import Progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help=SUMMARIES["replay"],
        description="Re-drive a simulator with the references exactly as logged (same times and values), from the "
        "logged initial posture, with the logged experiment, robot and overrides plus any --set.",
    )
    p.add_argument("log", type=Path, help="experiment log (.mcap) to replay")
    p.add_argument("--out", type=Path, required=True, metavar="SIM.mcap", help="log of the replayed run")
    p.add_argument("--backend", default=None, help=f"simulator backend (default: {DEFAULT_REPLAY_BACKEND})")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the logged experiment, e.g. --set sim.mu_transversal=0.3 (repeatable)",
    )
    p.add_argument(
        "--initial-posture",
        choices=("commanded", "measured"),
        default="commanded",
        help="start from the logged start posture (default; exact for simulated runs) or from the joint feedback "
        "measured at t = 0 (a real robot laid down roughly)",
    )
    p.add_argument("--json", action="store_true", help="print the replay's JSON summary on stdout")
    p.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    overrides = dict(parse_override(item) for item in args.set)
    with writing(args.out):
        args.out.parent.mkdir(parents=True, exist_ok=True)
    with Progress(f"replay {args.log.name}") as progress:
        summary = replay(
            args.log,
            args.out,
            overrides,
            backend_name=args.backend,
            initial_posture=args.initial_posture,
            progress=progress,
        )
        progress.complete()
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"replay: {args.out}")
    return 0
