"""``aiko can``: tools around the joint-module CAN bus.

- ``aiko can decode LOG``: every frame of a python-can log (.asc .blf .log .csv .trc) decoded with the DBC.
- ``aiko can estop --interface I --channel C``: send the emergency-stop frame (id 0) on a bus, from any shell, and
  confirm that every module reports ESTOP (exit 0), else name the silent ones (exit 1). See ``aiko.devices.can.estop``.
- ``aiko can params NODE... --interface I --channel C [--read | --write K=V ...]``: read the modules' parameters, or
  write some and read them back (an enabled module refuses: Locked). See ``aiko.devices.can.parameters``.
- ``aiko can bus-load``: the worst-case load of the protocol at given rates.
- ``aiko can scan --interface I --channel C``: the modules that answer (state, firmware, uptime, parameters,
  rejected frames) and the missing or duplicated node ids (exit 1 names them). See ``aiko.devices.can.scan``.

Heavy imports (python-can, numpy, cantools) happen inside the handlers: ``aiko can estop`` must not wait for them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError, HardwareError

# the DBC's message families, for --kind (restated so that registering the parser does not load cantools;
# tests/aiko/devices/can/test_estop.py checks the list against firmware_protocol.dbc.MessageKind)
MESSAGE_KINDS = (
    "EmergencyStop",
    "Command",
    "JointReference",
    "JointFeedback",
    "JointRates",
    "ParameterReply",
    "ParameterRequest",
    "Heartbeat",
)
LOG_SUFFIXES = (".asc", ".blf", ".log", ".csv", ".trc")  # checked against frame_log.SUPPORTED_LOG_SUFFIXES


def register(sub: argparse._SubParsersAction) -> None:
    can_parser = sub.add_parser("can", help=SUMMARIES["can"])
    can_sub = can_parser.add_subparsers(dest="can_command", metavar="ACTION", parser_class=type(can_parser))

    decode = can_sub.add_parser("decode", help="decode a CAN frame log with aiko_joint.dbc")
    decode.add_argument("frames", help=f"CAN frame log, python-can format ({', '.join(LOG_SUFFIXES)})")
    decode.add_argument("--kind", choices=MESSAGE_KINDS, help="only this message family")
    decode.add_argument("--node", type=int, help="only this module (node id)")
    decode.add_argument("--json", action="store_true", help="one JSON object per frame")
    decode.set_defaults(handler=decode_command)

    estop = can_sub.add_parser(
        "estop", help="send the emergency stop (id 0x000) and confirm that every module reports ESTOP"
    )
    estop.add_argument("--interface", required=True, help="python-can interface (socketcan, slcan, pcan, ...)")
    estop.add_argument("--channel", required=True, help="channel (can0, /dev/ttyACM0, ...)")
    estop.add_argument("--bitrate", type=int, default=1_000_000)
    estop.add_argument(
        "--repeat", type=int, default=3, help="frames to send, 10 ms apart while unconfirmed (default 3)"
    )
    estop.add_argument("--nodes", default="1-10", help="modules that must confirm, e.g. 1-10 or 1,2,5 (default 1-10)")
    estop.add_argument(
        "--timeout", type=float, default=0.2, metavar="S", help="wait this long for every ESTOP (default 0.2 s)"
    )
    estop.add_argument("--json", action="store_true", help="one JSON object: confirmed, silent, timings")
    estop.set_defaults(handler=estop_command)

    scan = can_sub.add_parser(
        "scan",
        help="list the modules that answer on the bus and name the missing or duplicated node ids",
        description=(
            "Listen to the bus (heartbeats, feedback, rejected-frame counters), then read every parameter of every "
            "node id; print what each module reports and name the expected node ids that are missing, duplicated "
            "(two modules on one id: two replies to one read, heartbeat uptimes that do not follow one clock) or "
            "unexpected. Nothing is written or enabled. Exit 0 when exactly the expected modules answer, 1 otherwise."
        ),
    )
    scan.add_argument("--interface", required=True, help="python-can interface (socketcan, slcan, pcan, ...)")
    scan.add_argument("--channel", required=True, help="channel (can0, /dev/ttyACM0, ...)")
    scan.add_argument("--bitrate", type=int, default=1_000_000)
    scan.add_argument(
        "--nodes", default="1-10", help="the node ids that should answer, e.g. 1-10 or 1,2,5 (default 1-10)"
    )
    scan.add_argument(
        "--listen", type=float, default=2.5, metavar="S", help="listen this long first (default 2.5 s: two heartbeats)"
    )
    scan.add_argument("--json", action="store_true", help="one JSON object: found, missing, duplicated, modules")
    scan.set_defaults(handler=scan_command)

    params = can_sub.add_parser(
        "params",
        help="read or write the joint modules' parameters (gains, limits, watchdog, rates)",
        description="Read every parameter of the named modules (default), or write some and read them back. A "
        "module that is enabled refuses writes (Locked), as the firmware does: disable it first. Exit 0 when every "
        "module answered (and took every write), 1 otherwise (each problem on a line), 2 for bad input.",
    )
    params.add_argument("nodes", nargs="+", metavar="NODE", help="modules by node id: 3, 1-10 or 1,2,5")
    params.add_argument("--interface", required=True, help="python-can interface (socketcan, slcan, pcan, ...)")
    params.add_argument("--channel", required=True, help="channel (can0, /dev/ttyACM0, ...)")
    params.add_argument("--bitrate", type=int, default=1_000_000)
    action = params.add_mutually_exclusive_group()
    action.add_argument("--read", action="store_true", help="read every parameter (the default)")
    action.add_argument(
        "--write",
        action="append",
        metavar="K=V",
        help="write parameter K (KpH, KdH, KpV, KdV, LimitHDeg, LimitVDeg, WatchdogPeriods, ReferencePeriodMs, "
        "FeedbackRateHz, or an index) = V, then read it back; repeatable",
    )
    params.add_argument("--timeout", type=float, default=1.0, metavar="S", help="wait this long for replies")
    params.add_argument("--json", action="store_true", help="one JSON object: every module's answers")
    params.set_defaults(handler=params_command)

    load = can_sub.add_parser("bus-load", help="worst-case bus load of the protocol")
    load.add_argument("--reference-rate", type=float, default=10.0, metavar="HZ")
    load.add_argument("--feedback-rate", type=float, default=100.0, metavar="HZ")
    load.add_argument("--modules", type=int, default=10)
    load.add_argument("--bitrate", type=int, default=1_000_000)
    load.add_argument("--json", action="store_true")
    load.set_defaults(handler=bus_load_command)
    can_parser.set_defaults(handler=lambda args: can_parser.print_help() or 2)


def decode_command(args: argparse.Namespace) -> int:
    import can

    from aiko.devices.can.frame_log import SUPPORTED_LOG_SUFFIXES
    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import id_scheme, load_database
    from firmware_protocol.errors import ProtocolError

    path = Path(args.frames)
    if not path.is_file():
        raise AikoError(f"CAN log not found: {path}")
    if path.suffix.lower() not in SUPPORTED_LOG_SUFFIXES:
        raise AikoError(f"{path}: unsupported extension; use one of {', '.join(SUPPORTED_LOG_SUFFIXES)}")
    nodes = id_scheme().node_ids
    if args.node is not None and args.node not in nodes:
        raise AikoError(f"--node {args.node}: the protocol defines nodes {min(nodes)}..{max(nodes)}")
    codec = default_codec()
    names = value_names(load_database())
    start = None
    try:
        for msg in can.LogReader(str(path)):
            if msg.is_error_frame or msg.is_remote_frame:
                continue
            start = msg.timestamp if start is None else start
            try:
                frame = codec.decode(msg.arbitration_id, bytes(msg.data), check_range=False)
                kind, node, values = frame.kind.value, frame.node, frame.values
                choices = names.get(msg.arbitration_id, {})
                values = {k: choices.get(k, {}).get(v, v) for k, v in values.items()}  # Command=ClearFaults
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


def value_names(database) -> dict[int, dict[str, dict[float, str]]]:
    """The DBC's value names (VAL_): frame id → signal → raw value → name, e.g. Command 3 → "ClearFaults"."""
    return {
        message.frame_id: {
            signal.name: {float(raw): str(name) for raw, name in signal.choices.items()}
            for signal in message.signals
            if signal.choices
        }
        for message in database.messages
    }


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _parse_nodes(text: str) -> tuple[int, ...]:
    from aiko.devices.can.estop import NODES

    nodes: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            nodes.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise AikoError(f"--nodes {text!r}: expected e.g. 1-10 or 1,2,5") from None
    bad = [n for n in nodes if n not in NODES]
    if not nodes or bad:
        raise AikoError(f"--nodes {text!r}: the protocol defines nodes {NODES[0]}..{NODES[-1]}")
    return tuple(sorted(set(nodes)))


def estop_command(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    from aiko.devices.can.estop import EstopError, EstopRefused, emergency_stop

    if not 0 < args.timeout <= 60:
        raise AikoError(f"--timeout {args.timeout}: must be in (0, 60] s")
    nodes = _parse_nodes(args.nodes)
    where = f"{args.interface}:{args.channel}"
    try:
        result = emergency_stop(
            args.interface,
            args.channel,
            nodes,
            bitrate=args.bitrate,
            timeout_s=args.timeout,
            repeat=args.repeat,
            t0=t0,
        )
    except EstopRefused as exc:
        raise AikoError(f"emergency stop refused: {exc}") from None
    except EstopError as exc:
        raise HardwareError(str(exc)) from None
    silent = result.silent
    if args.json:
        print(
            json.dumps(
                {
                    "channel": where,
                    "frames_sent": result.frames_sent,
                    "sent_after_s": result.sent_after_s,
                    "sent_monotonic_s": result.sent_monotonic_s,
                    "confirmed_s": {str(n): t for n, t in sorted(result.confirmed.items())},
                    "all_confirmed_s": max(result.confirmed.values()) if not silent else None,
                    "silent": silent,
                }
            )
        )
    if silent:
        sys.stderr.write(
            f"aiko: emergency stop sent on {where}, but modules {silent} did not report ESTOP within "
            f"{args.timeout:g} s: check them by hand (power, wiring, the hardware stop)\n"
        )
        return 1
    if not args.json:
        last = max(result.confirmed.values())
        print(f"emergency stop confirmed on {where}: all {len(nodes)} modules in ESTOP {last * 1e3:.0f} ms after send")
    return 0


def scan_command(args: argparse.Namespace) -> int:
    from aiko.devices.can.scan import format_scan, open_scan_bus, scan_bus

    if not 1.0 <= args.listen <= 60:
        raise AikoError(f"--listen {args.listen}: must be in [1, 60] s (a heartbeat comes every second)")
    if args.interface == "virtual":
        raise AikoError("--interface virtual exists inside one process only: nobody else is on it to scan")
    nodes = _parse_nodes(args.nodes)
    bus = open_scan_bus(args.interface, args.channel, args.bitrate)
    try:
        result = scan_bus(bus, nodes, listen_s=args.listen)
    finally:
        bus.shutdown()
    if args.json:
        print(json.dumps({"channel": f"{args.interface}:{args.channel}", **result.as_dict()}))
    else:
        print(format_scan(result))
    return 0 if result.ok else 1


def _parse_writes(items: list[str]) -> dict:
    import math

    from aiko.devices.can.parameters import parse_parameter

    values = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise AikoError(f"--write {item!r}: expected K=V, e.g. KdH=6")
        try:
            parameter = parse_parameter(key)
        except ValueError as exc:
            raise AikoError(f"--write {item!r}: {exc}") from None
        try:
            value = float(text)
        except ValueError:
            raise AikoError(f"--write {item!r}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise AikoError(f"--write {item!r}: the value must be a finite number")
        values[parameter] = value
    return values


def _open_tool_bus(interface: str, channel: str, bitrate: int):
    """A bus for a tool that may share the line with a run: slcan never closes the adapter's channel (see
    ``aiko.devices.can.slcan_bus.SharedSlcanBus``); other interfaces are joined with python-can."""
    import can

    from aiko.devices.can.slcan_bus import SharedSlcanBus

    try:
        if interface == "slcan":
            return SharedSlcanBus(channel=channel, bitrate=bitrate, sleep_after_open=0.0)
        if interface == "virtual":
            raise AikoError("--interface virtual is a bus inside one process: no module can hear it from here")
        if interface == "socketcan":  # the kernel's interface holds the bitrate
            return can.Bus(interface=interface, channel=channel)
        return can.Bus(interface=interface, channel=channel, bitrate=bitrate)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        raise HardwareError(f"cannot open CAN bus {interface}:{channel}: {exc}") from None


def params_command(args: argparse.Namespace) -> int:
    from aiko.devices.can.parameters import (
        PARAMETER_NAMES,
        BusParameterLink,
        parameter_name,
        read_parameters,
        write_parameters,
    )

    nodes = list(_parse_nodes(",".join(args.nodes)))
    if not 0 < args.timeout <= 60:
        raise AikoError(f"--timeout {args.timeout}: must be in (0, 60] s")
    writes = _parse_writes(args.write or [])
    bus = _open_tool_bus(args.interface, args.channel, args.bitrate)
    try:
        link = BusParameterLink(bus, nodes)
        if writes:
            outcomes = write_parameters(link, nodes, writes, args.timeout)
        else:
            outcomes = read_parameters(link, nodes, list(PARAMETER_NAMES), args.timeout)
    finally:
        bus.shutdown()
    silent = [n for n in nodes if all(o.result is None for o in outcomes if o.node == n)]
    problems = [f"joint module {n}: no reply (check its power, the wiring, the node id)" for n in silent]
    problems += [o.describe() for o in outcomes if not o.ok and o.node not in silent]
    if args.json:
        table: dict[str, dict] = {str(n): {} for n in nodes}
        for o in outcomes:
            answer = {"result": o.result, "value": o.value}
            if o.written is not None:
                answer["written"] = o.written
            table[str(o.node)][parameter_name(o.parameter)] = answer
        print(json.dumps({"channel": f"{args.interface}:{args.channel}", "modules": table, "problems": problems}))
    elif writes:
        for o in outcomes:
            if o.ok:
                print(f"joint module {o.node}: {parameter_name(o.parameter)} = {o.value:g} (written, read back)")
    else:
        _print_parameter_table(nodes, outcomes)
    for line in problems:
        sys.stderr.write(f"aiko: {line}\n")
    return 1 if problems else 0


def _print_parameter_table(nodes: list[int], outcomes) -> None:
    from aiko.devices.can.parameters import parameter_name

    cells = {(o.node, o.parameter): ("-" if o.value is None or o.result != 0 else f"{o.value:g}") for o in outcomes}
    parameters = list(dict.fromkeys(o.parameter for o in outcomes))
    print(f"{'parameter':18s}" + "".join(f"{'module ' + str(n):>11s}" for n in nodes))
    for p in parameters:
        print(f"{parameter_name(p):18s}" + "".join(f"{cells[(n, p)]:>11s}" for n in nodes))


def bus_load_command(args: argparse.Namespace) -> int:
    from firmware_protocol.bus_load import protocol_bus_load

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
