"""``aiko run``'s CAN flags (``--interface --channel --bitrate --can-log --rt-priority``): the command line's side
of the experiment's ``[can]`` table, which the ``can`` backend reads (the backend takes no argparse flags).

Each flag given becomes an override of its ``[can]`` key, so it is range-checked once more by the table's own
parser when the experiment loads; here, before that, it is checked under its own name (the message names the flag,
not the key) and refused for a backend that would ignore it.
"""

from __future__ import annotations

import argparse
from typing import Any

from aiko.core.errors import AikoError, ConfigError

CAN_FLAG_KEYS = {
    "interface": "can.interface",
    "channel": "can.channel",
    "bitrate": "can.bitrate",
    "can_log": "can.log",
    "rt_priority": "can.realtime_priority",
}
"""argparse attribute -> the ``[can]`` key the flag overrides."""


def add_can_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for ``aiko run``: they override the experiment's [can] table (see :func:`can_overrides`)."""
    parser.add_argument(
        "--interface", metavar="NAME", help="python-can interface for --backend can (socketcan, slcan, ...)"
    )
    parser.add_argument("--channel", metavar="CH", help="CAN channel, e.g. can0, vcan0, /dev/ttyACM0")
    parser.add_argument("--bitrate", type=int, metavar="BPS", help="CAN bitrate (default 1000000)")
    parser.add_argument("--can-log", metavar="PATH", help="write every CAN frame (.asc .blf .log .csv .trc)")
    parser.add_argument("--rt-priority", type=int, metavar="P", help="SCHED_FIFO priority of the streaming thread")


def can_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags above (only those given) as experiment overrides of [can], range-checked under their own names."""
    for attr, flag, low, high in (("bitrate", "--bitrate", 10_000, 1_000_000), ("rt_priority", "--rt-priority", 0, 99)):
        value = getattr(args, attr, None)
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{flag} {value} is out of range [{low}, {high}]")
    return {key: getattr(args, attr) for attr, key in CAN_FLAG_KEYS.items() if getattr(args, attr, None) is not None}


def check_can_flags(args: argparse.Namespace, backend: str, capabilities: frozenset[str]) -> None:
    """Refuse, before anything runs, CAN flags the chosen backend would ignore: the bus flags select the real bus
    (capability ``hardware_can_bus``), the frame log and the priority need a CAN bus at all (``can_bus``)."""
    bus_flags = [
        flag
        for flag, value in (("--interface", args.interface), ("--channel", args.channel), ("--bitrate", args.bitrate))
        if value is not None
    ]
    if bus_flags and "hardware_can_bus" not in capabilities:
        raise AikoError(
            f"{', '.join(bus_flags)} select the real bus of --backend can; --backend {backend} does not use it "
            "(hil runs the emulated modules on its own virtual bus)"
        )
    can_flags = [flag for flag, value in (("--can-log", args.can_log), ("--rt-priority", args.rt_priority)) if value]
    if can_flags and "can_bus" not in capabilities:
        raise AikoError(
            f"{', '.join(can_flags)} apply to the CAN bus of --backend can or hil; --backend {backend} has no CAN bus"
        )
