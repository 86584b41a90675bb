"""``aiko emulate can …``: Aiko's joint modules on a CAN bus (the same program as ``aiko-emulator``)."""

from __future__ import annotations

import argparse


def register(devices: argparse._SubParsersAction) -> None:
    from firmware_protocol.emulator.cli import DESCRIPTION, add_arguments

    p = devices.add_parser("can", help="Aiko's joint modules on slcan over a pty or a python-can bus")
    p.description = DESCRIPTION
    add_arguments(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from firmware_protocol.emulator.cli import run

    return run(args)
