"""``aiko emulate DEVICE …``: run a device's protocol emulator, for our clients, the vendors' and yours.

Each emulator speaks its device's own wire protocol on a loopback address given on the command line (any
127.0.0.N, so several run side by side) with a simulator as the plant behind it. The devices are plug-ins: every
module in :mod:`aiko.commands.emulators` with a ``register(subparsers)`` adds one ``aiko emulate NAME``; only the
one named on the command line is imported (the vendor libraries and simulators behind them are slow to load).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import aiko.commands.emulators as emulators
from aiko.commands import SUMMARIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("emulate", help=SUMMARIES["emulate"])
    devices = p.add_subparsers(dest="device", metavar="DEVICE", parser_class=type(p))
    named = _device_named(sys.argv[1:])
    infos = sorted(
        (info for info in pkgutil.iter_modules(emulators.__path__) if not info.name.startswith("_")),
        key=lambda i: i.name,
    )
    if named is not None and any(_cli_name(info.name) == named for info in infos):
        infos = [info for info in infos if _cli_name(info.name) == named]
    for info in infos:
        module = importlib.import_module(f"aiko.commands.emulators.{info.name}")
        module.register(devices)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


def _cli_name(module_name: str) -> str:
    """``ft_sensor`` → ``ft-sensor``: module names are identifiers, command names are words."""
    return module_name.replace("_", "-")


def _device_named(argv: list[str]) -> str | None:
    words = [word for word in argv if not word.startswith("-")]
    if len(words) >= 2 and words[0] == "emulate":
        return words[1]
    return None
