"""Run the `aiko` CLI in-process (through aiko.cli.main once the lead's CLI is merged)."""

from __future__ import annotations

import argparse
import importlib


def run_cli(argv: list[str]) -> int:
    try:
        from aiko.cli import main
    except ImportError:  # before the lead's aiko/cli.py is merged: build the parser from the plug-ins we test
        parser = argparse.ArgumentParser(prog="aiko")
        sub = parser.add_subparsers(dest="command", required=True)
        for name in ("log", "replay", "compare", "dashboard", "report"):
            try:
                module = importlib.import_module(f"aiko.commands.{name}")
            except ImportError:
                continue
            module.register(sub)
        args = parser.parse_args(argv)
        from aiko.errors import AikoError

        try:
            return args.handler(args)
        except AikoError as exc:
            import sys

            print(f"aiko: {exc}", file=sys.stderr)
            return 2
    return main(argv)
