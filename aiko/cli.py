"""The ``aiko`` command. Sub-commands live in :mod:`aiko.commands`, one module each, discovered on start-up.

Every problem a user can fix (a missing file, malformed TOML, an unknown key, a value out of range, an unknown
backend) ends as one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import os
import sys

ESTOP_PRIORITY = 50
"""SCHED_FIFO priority of ``aiko can estop``: above a run's (20, its sender 21) and anything else of ours."""


def _stop_before_anything_else() -> None:
    """``aiko can estop`` takes SCHED_FIFO before it imports anything else, where the system grants it: on a loaded
    PC a stop then waits for no other process (at load 6-9 a stop started 0.37-2.15 s after launch, issue 26).
    The command sleeps between its reads and ends after its timeout, so it never holds a CPU. Nothing happens
    (and nothing is said) where real-time scheduling is not allowed."""
    words = [word for word in sys.argv[1:] if not word.startswith("-")]
    if words[:2] == ["can", "estop"] and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(ESTOP_PRIORITY))
        except OSError:
            pass


_stop_before_anything_else()

import argparse  # noqa: E402 - after the stop's priority (above)
import importlib  # noqa: E402
import logging  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import aiko._blas_threads  # noqa: E402, F401  (before numpy loads)
from aiko import __version__  # noqa: E402
from aiko.core.background_stream import stderr_in_background  # noqa: E402
from aiko.core.errors import AikoError, RunStopped  # noqa: E402

EXIT_USAGE = 2
EXIT_FAILURE = 1


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the project's rule for every bad input)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"aiko: {self.prog}: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def _command_name(argv: Sequence[str] | None) -> str | None:
    """The sub-command named on the command line (the first word that is not an option), if any."""
    for word in sys.argv[1:] if argv is None else argv:
        if not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None, *, only_named: bool = False) -> argparse.ArgumentParser:
    """The full parser; with ``only_named``, only the sub-command that ``argv`` names is imported (if it exists).

    Imports are what make the CLI slow to start (scipy, numba and every simulator: seconds). ``aiko can estop``
    must start in well under half a second, so ``main`` loads just the module of the command it runs; where none
    is named (``aiko``, ``aiko --help``, an unknown command) it lists the commands from their one-line summaries
    (`aiko.commands.SUMMARIES`, which each command's own parser takes its help from) and loads none of them.
    Without ``only_named`` every command is loaded (their whole parsers: the help-style tests walk them).
    """
    parser = _Parser(
        prog="aiko",
        description="Drive snake robots, record experiments, and compare them with simulation.",
    )
    parser.add_argument("--version", action="version", version=f"aiko {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    named = _command_name(argv) if only_named else None
    module = _command_module(named) if named is not None and named.isidentifier() else None
    if only_named and module is None:
        from aiko.commands import SUMMARIES

        for name in sorted(SUMMARIES):
            sub.add_parser(name, help=SUMMARIES[name])
        return parser
    modules = [module] if module is not None else [_command_module(name) for name in _command_names()]
    for module in modules:
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    apply_help_style(parser)
    return parser


def _command_module(name: str):
    """``aiko.commands.<name>``, or None if there is no such command (an import error inside it still raises)."""
    try:
        return importlib.import_module(f"aiko.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"aiko.commands.{name}":
            return None
        raise


def _command_names() -> list[str]:
    import pkgutil

    import aiko.commands as commands

    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__) if not info.name.startswith("_"))


# One style for every sub-command's --help: the same placeholder for the same thing, a help text for every flag,
# a description for every command (its one-line help, as a sentence, where it has none of its own).
METAVARS = {
    "log": "LOG",
    "experiment": "EXPERIMENT",
    "a": "LOG_A",
    "b": "LOG_B",
    "backend": "NAME",
    "interface": "NAME",
    "channel": "CH",
    "bitrate": "BPS",
    "node": "N",
    "nodes": "N,N,...",
    "modules": "N",
    "repeat": "N",
    "body": "N",
    "mu": "MU",
    "topic": "TOPIC",
    "rate_hz": "HZ",
    "angle_deg": "DEG",
    "theta_deg": "DEG",
    "can_log": "FRAMES.asc",
    "frames": "FRAMES",
}
OUT_METAVARS = {"run": "LOG.mcap", "rod run": "LOG.mcap", "log recover": "LOG.mcap", "report": "REPORT.html"}
HELPS = {
    "json": "print the result as JSON on stdout",
    "bitrate": "CAN bitrate in bit/s (default 1000000)",
    "log": "experiment log (.mcap)",
    "reference_rate": "joint reference stream rate (default: Aiko's 10 Hz)",
    "feedback_rate": "joint feedback rate per module (default: 100 Hz)",
    "modules": "number of joint modules on the bus (default: Aiko's 10)",
    "motion": "the chain's prescribed motion (default cobra)",
    "link_length": "link length in metres",
    "link_mass": "link mass in kilograms",
    "link_radius": "link radius in metres",
    "controller": "the self-righting controller (paper 003)",
    "smoothing": "contact smoothing (rod incline default: sigmoid; rod run: the file's contact.smoothing)",
}


def apply_help_style(parser: argparse.ArgumentParser, path: str = "") -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not sub.description and helps.get(name):
                    text = str(helps[name])
                    sub.description = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
                apply_help_style(sub, f"{path} {name}".strip())
            continue
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if not action.help and action.dest in HELPS:
            action.help = HELPS[action.dest]
        if action.nargs == 0 or action.choices is not None:
            continue  # flags and choices show themselves
        if action.dest == "out" and path in OUT_METAVARS:
            action.metavar = OUT_METAVARS[path]
        elif action.dest in METAVARS:
            action.metavar = METAVARS[action.dest]


def _asks_only_for_the_version(argv: Sequence[str] | None) -> bool:
    """``aiko --version`` (no command named): answered before any command module loads. Building the full parser
    imports every command's module (scipy, numba, every simulator), which took ``aiko --version`` 1.9 s."""
    words = list(sys.argv[1:] if argv is None else argv)
    return "--version" in words and _command_name(words) is None and not {"-h", "--help"} & set(words)


def main(argv: Sequence[str] | None = None) -> int:
    if _asks_only_for_the_version(argv):
        print(f"aiko {__version__}")
        return 0
    parser = build_parser(argv, only_named=True)
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    # no thread of a command waits for stderr: a run's loop logs (aiko.core.background_stream)
    with stderr_in_background():
        logging.basicConfig(
            level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
            format="%(levelname)s %(name)s: %(message)s",
        )
        return _handle(parser, args)


def _handle(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(handler(args) or 0)
    except AikoError as exc:
        sys.stderr.write(f"aiko: {exc}\n")
        return EXIT_USAGE
    except RunStopped as exc:
        sys.stderr.write(f"aiko: {exc}{_notes(exc)}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"aiko: interrupted{_notes(exc)}\n")
        return 130
    except BrokenPipeError:  # `aiko log info LOG | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - a failed run ends with one line; -v shows the traceback
        if args.verbose:
            raise
        sys.stderr.write(f"aiko: failed: {type(exc).__name__}: {exc} (run with -v for the traceback){_notes(exc)}\n")
        return EXIT_FAILURE


def _notes(exc: BaseException) -> str:
    """What was added to an error on its way up (e.g. what became of the run's log), on the same line."""
    return "".join(f"; {note}" for note in getattr(exc, "__notes__", []))


def entry_point() -> None:
    code = main()
    _spare_the_exit_its_collections()
    sys.exit(code)


def _spare_the_exit_its_collections() -> None:
    """Collect what is garbage now, then freeze every object left, so the interpreter's shutdown does not walk them.

    Why: shutting down runs the cycle collector over every tracked object several times while it clears the modules
    — 100 000+ objects once numba and the simulators are loaded (their type registries). Measured on a process that
    had stepped the rod (issue 28): 0.33 s from the last exit handler to the process's end, 0.05 s with the objects
    frozen (0.09 → 0.02 s with numba alone); an ``aiko bench run --backend hil`` pays it twice (the command and the
    UR3 emulator, whose exit the command waits for). The exit handlers (``atexit``, ``weakref.finalize``: temporary
    directories) still run, and objects are still freed by reference counting as the modules are cleared (a file a
    module holds open is flushed and closed). What is given up: objects still alive here *and* in a reference cycle
    are not finalized at exit — CPython promises no more (a buffered file in a collected cycle loses its buffer
    anyway, measured here), and every file of ours is closed by its ``with`` before the command returns.
    ``gc.collect()`` first finalizes what is garbage already, as the shutdown would have.
    Only the ``aiko`` program does this (``main``, which tests call in-process, does not)."""
    import gc

    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    entry_point()
