"""``aiko log info|export|recover``: inspect, export and repair experiment logs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.log import LogReader, export_csv, recover
from aiko.log.info import log_info


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("log", help=SUMMARIES["log"])
    sub = parser.add_subparsers(dest="log_command", metavar="{info,export,recover}")
    sub.required = True

    info = sub.add_parser("info", help="channels, message counts, duration and rates")
    info.add_argument("log", type=Path, help="experiment log (.mcap)")
    info.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    info.set_defaults(handler=run_info)

    export = sub.add_parser("export", help="write one CSV per channel")
    export.add_argument("log", type=Path)
    export.add_argument("--csv", type=Path, required=True, metavar="DIR", help="output directory")
    export.add_argument("--json", action="store_true")
    export.set_defaults(handler=run_export)

    rec = sub.add_parser(
        "recover", help="rewrite every intact record of a log cut short by a crash or damaged, as a new file"
    )
    rec.add_argument("log", type=Path)
    rec.add_argument("--out", type=Path, default=None, help="output file (default LOG.recovered.mcap)")
    rec.add_argument("--json", action="store_true")
    rec.set_defaults(handler=run_recover)


def run_info(args: argparse.Namespace) -> int:
    info = log_info(LogReader(args.log))
    if args.json:
        print(json.dumps(info))
        return 0
    out = sys.stdout
    out.write(f"{info['path']}: {info['messages']} messages over {info['duration_s']:.3f} s")
    out.write(f" from {info['start_utc']}" if info["start_utc"] else "")
    out.write(" (TRUNCATED: run `aiko log recover`)\n" if info["truncated"] else "\n")
    duplicates = info["duplicates"]
    if duplicates["messages"]:
        out.write(f"  found {duplicates['messages']} duplicate messages, counted once: ")
        out.write("; ".join(duplicates["overlapping_chunks"]) + " (`aiko log recover` writes them once)\n")
    width = max((len(t) for t in info["channels"]), default=7)
    for topic, c in info["channels"].items():
        out.write(f"  {topic:<{width}}  {c['messages']:>8} msgs  {c['rate_hz']:>9.2f} Hz  {c['schema']}\n")
    for event in info["events"]:
        out.write(f"  event {event['kind']} at t_ns={event['t_ns']}\n")
    return 0


def run_export(args: argparse.Namespace) -> int:
    written = export_csv(LogReader(args.log), args.csv)
    if args.json:
        print(json.dumps({"files": {topic: str(path) for topic, path in written.items()}}))
    else:
        for topic, path in written.items():
            print(f"{topic} -> {path}")
    return 0


def run_recover(args: argparse.Namespace) -> int:
    result = recover(args.log, args.out)
    summary = {
        "source": str(result.source),
        "output": str(result.output),
        "was_truncated": result.was_truncated,
        "messages": result.messages,
        "channels": result.channels,
        "bytes_dropped": result.bytes_dropped,
        "error": result.error,
        "records_dropped": result.dropped,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        state = "truncated or damaged" if result.was_truncated else "complete"
        print(f"{result.source} ({state}): {result.messages} messages written to {result.output}")
        if result.error:
            print(f"  dropped: {result.error} ({result.bytes_dropped} bytes skipped)")
    return 0
