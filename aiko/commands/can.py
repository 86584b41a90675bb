"""``aiko can``: tools around the joint-module CAN bus.

- ``aiko can decode LOG``: every frame of a python-can log (.asc .blf .log .csv .trc) decoded with the DBC.
- ``aiko can estop --interface I --channel C``: send the emergency-stop frame (id 0) on a bus, from any shell.
- ``aiko can bus-load``: the worst-case load of the protocol at given rates.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import can

from aiko.can_driver.frame_log import SUPPORTED_LOG_SUFFIXES
from aiko.errors import AikoError, HardwareError
from firmware_protocol.bus_load import protocol_bus_load
from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import ESTOP_KEY, MessageKind, id_scheme
from firmware_protocol.errors import ProtocolError


def register(sub: argparse._SubParsersAction) -> None:
    can_parser = sub.add_parser("can", help="CAN bus tools: decode logs, emergency stop, bus load")
    can_sub = can_parser.add_subparsers(dest="can_command", metavar="ACTION", parser_class=type(can_parser))

    decode = can_sub.add_parser("decode", help="decode a CAN frame log with aiko_joint.dbc")
    decode.add_argument("log", help=f"python-can log ({', '.join(SUPPORTED_LOG_SUFFIXES)})")
    decode.add_argument("--kind", choices=[k.value for k in MessageKind], help="only this message family")
    decode.add_argument("--node", type=int, help="only this module (node id)")
    decode.add_argument("--json", action="store_true", help="one JSON object per frame")
    decode.set_defaults(handler=decode_command)

    estop = can_sub.add_parser("estop", help="send the emergency stop (id 0x000) to every module")
    estop.add_argument("--interface", required=True, help="python-can interface (socketcan, slcan, pcan, ...)")
    estop.add_argument("--channel", required=True, help="channel (can0, /dev/ttyACM0, ...)")
    estop.add_argument("--bitrate", type=int, default=1_000_000)
    estop.add_argument("--repeat", type=int, default=3, help="frames to send, 10 ms apart (default 3)")
    estop.set_defaults(handler=estop_command)

    load = can_sub.add_parser("bus-load", help="worst-case bus load of the protocol")
    load.add_argument("--reference-rate", type=float, default=10.0, metavar="HZ")
    load.add_argument("--feedback-rate", type=float, default=100.0, metavar="HZ")
    load.add_argument("--modules", type=int, default=10)
    load.add_argument("--bitrate", type=int, default=1_000_000)
    load.add_argument("--json", action="store_true")
    load.set_defaults(handler=bus_load_command)
    can_parser.set_defaults(handler=lambda args: can_parser.print_help() or 2)


def decode_command(args: argparse.Namespace) -> int:
    path = Path(args.log)
    if not path.is_file():
        raise AikoError(f"CAN log not found: {path}")
    if path.suffix.lower() not in SUPPORTED_LOG_SUFFIXES:
        raise AikoError(f"{path}: unsupported extension; use one of {', '.join(SUPPORTED_LOG_SUFFIXES)}")
    nodes = id_scheme().node_ids
    if args.node is not None and args.node not in nodes:
        raise AikoError(f"--node {args.node}: the protocol defines nodes {min(nodes)}..{max(nodes)}")
    codec = default_codec()
    start = None
    try:
        for msg in can.LogReader(str(path)):
            if msg.is_error_frame or msg.is_remote_frame:
                continue
            start = msg.timestamp if start is None else start
            try:
                frame = codec.decode(msg.arbitration_id, bytes(msg.data), check_range=False)
                kind, node, values = frame.kind.value, frame.node, frame.values
            except ProtocolError as exc:
                kind, node, values = "invalid", None, {"error": str(exc), "data": bytes(msg.data).hex()}
            if (args.kind and kind != args.kind) or (args.node is not None and node != args.node):
                continue
            t = msg.timestamp - start
            if args.json:
                record = {"t_s": t, "id": msg.arbitration_id, "kind": kind, "node": node, "values": values}
                print(json.dumps(record))
            else:
                fields = " ".join(f"{k}={_fmt(v)}" for k, v in values.items())
                print(f"{t:12.6f}  0x{msg.arbitration_id:03X}  {kind:17s} {node if node else '-':>2}  {fields}")
    except BrokenPipeError:  # `aiko can decode LOG | head`: the reader is done, so are we
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
    except (OSError, ValueError) as exc:
        raise AikoError(f"cannot read {path}: {exc}") from None
    return 0


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def estop_command(args: argparse.Namespace) -> int:
    codec = default_codec()
    frame_id, data = codec.encode(MessageKind.EMERGENCY_STOP, 0, {"Key": ESTOP_KEY})
    try:
        bus = can.Bus(interface=args.interface, channel=args.channel, bitrate=args.bitrate)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        raise HardwareError(f"cannot open CAN bus {args.interface}:{args.channel}: {exc}") from None
    try:
        for i in range(max(1, args.repeat)):
            bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False), timeout=0.1)
            if i + 1 < args.repeat:
                time.sleep(0.01)
    except can.CanError as exc:
        raise HardwareError(f"emergency stop NOT sent on {args.interface}:{args.channel}: {exc}") from None
    finally:
        bus.shutdown()
    print(f"emergency stop sent on {args.interface}:{args.channel}")
    return 0


def bus_load_command(args: argparse.Namespace) -> int:
    if not (0 < args.reference_rate <= 10_000 and 0 <= args.feedback_rate <= 10_000 and args.modules >= 1):
        raise AikoError("rates must be in (0, 10000] Hz (feedback may be 0) and --modules >= 1")
    if not 10_000 <= args.bitrate <= 1_000_000:
        raise AikoError(f"--bitrate must be a classic CAN bit rate in 10000..1000000 bit/s, got {args.bitrate}")
    load = protocol_bus_load(args.reference_rate, args.feedback_rate, args.modules, args.bitrate)
    result = {
        "reference_rate_hz": args.reference_rate,
        "feedback_rate_hz": args.feedback_rate,
        "modules": args.modules,
        "bitrate_bps": args.bitrate,
        "frames_per_s": load.frames_per_s,
        "bits_per_s": load.bits_per_s,
        "load_percent": 100 * load.load_fraction,
    }
    if args.json:
        print(json.dumps(result))
    else:
        percent = 100 * load.load_fraction
        print(f"{load.frames_per_s:.0f} frames/s, {load.bits_per_s:.0f} bit/s worst case: {percent:.1f} %")
    return 0
