"""The ``aiko`` command. Sub-commands live in :mod:`aiko.commands`, one module each, discovered on start-up.

Every problem a user can fix (a missing file, malformed TOML, an unknown key, a value out of range, an unknown
backend) ends as one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from collections.abc import Sequence

import aiko._blas_threads  # noqa: F401  (before numpy loads)
from aiko import __version__
from aiko.errors import AikoError

EXIT_USAGE = 2
EXIT_FAILURE = 1


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the project's rule for every bad input)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"aiko: {self.prog}: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aiko",
        description="Drive snake robots, record experiments, and compare them with simulation.",
    )
    parser.add_argument("--version", action="version", version=f"aiko {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import aiko.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"aiko.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(handler(args) or 0)
    except AikoError as exc:
        sys.stderr.write(f"aiko: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("aiko: interrupted\n")
        return 130
    except BrokenPipeError:  # `aiko log info LOG | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - a failed run ends with one line; -v shows the traceback
        if args.verbose:
            raise
        sys.stderr.write(f"aiko: failed: {type(exc).__name__}: {exc} (run with -v for the traceback)\n")
        return EXIT_FAILURE


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
