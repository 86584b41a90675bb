"""`aiko-emulator` / `python -m firmware_protocol.emulator`: the ten emulated joint modules as a process.

Default: serve slcan on a new pseudo-terminal and print its path on the first stdout line
(``slcan: /dev/pts/N``), so the PC opens it with python-can's ``slcan`` interface. With ``--interface`` the
modules join that python-can bus directly instead (e.g. ``--interface socketcan --channel vcan0``).
On exit (SIGINT, SIGTERM, --duration) the traffic counters are printed as one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import threading
import time

import can

from firmware_protocol.emulator.drive import DriveParams
from firmware_protocol.emulator.emulator import EmulatorConfig, EmulatorConfigError, JointControllerEmulator
from firmware_protocol.emulator.slcan_server import SlcanPtyServer

DESCRIPTION = "Emulated Aiko joint modules (ATmega128 firmware) on slcan over a pty, or on a python-can bus."


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aiko-emulator", description=DESCRIPTION)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The emulator's options, on its own parser or on ``aiko emulate can``'s."""
    p.add_argument("--interface", help="join this python-can interface instead of serving slcan (e.g. socketcan)")
    p.add_argument("--channel", help="channel for --interface (e.g. vcan0)")
    p.add_argument(
        "--link", dest="link_path", metavar="PATH", help="also create a symlink PATH -> the pty (stable device name)"
    )
    p.add_argument("--nodes", default="1-10", help="node ids, e.g. 1-10 or 1,2,5 (default 1-10)")
    p.add_argument("--feedback-rate", type=float, default=100.0, metavar="HZ", help="feedback rate (default 100)")
    p.add_argument("--reference-period-ms", type=float, default=100.0, help="expected reference period (default 100)")
    p.add_argument("--watchdog-periods", type=float, default=3.0, help="watchdog timeout in periods (default 3)")
    p.add_argument("--free-play-deg", type=float, default=4.0, help="joint free play (default 4)")
    p.add_argument("--limit-deg", type=float, default=45.0, help="joint limit of both axes (default 45)")
    p.add_argument("--reply-to-references", action="store_true", help="answer each accepted reference at once")
    p.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="P",
        help="SCHED_FIFO priority of every thread on the frame path (Linux; 0 = off)",
    )
    p.add_argument("--duration", type=float, metavar="S", help="exit after S seconds (default: run until signalled)")
    p.add_argument(
        "--duplicate",
        default="",
        metavar="N,N,...",
        help="also run a second module on each of these node ids, on the same bus (a wiring fault: two modules "
        "set to one id), powered up --duplicate-delay seconds after the others",
    )
    p.add_argument(
        "--duplicate-delay", type=float, default=2.5, metavar="S", help="power-up delay of the duplicates (default 2.5)"
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")


def _start_duplicates(
    args: argparse.Namespace,
    config: EmulatorConfig,
    nodes: tuple[int, ...],
    bus: can.BusABC,
    opened: list[can.BusABC],
) -> tuple[list[JointControllerEmulator], threading.Timer]:
    """``--duplicate``: a second emulator with those node ids on the same bus, started after ``--duplicate-delay``
    (so its heartbeat uptime trails the first module's, as a module powered up later would), answering everything
    sent to its id as the first one does: for ``aiko can scan`` to find."""
    import dataclasses

    duplicates = []
    if nodes:
        if args.interface:
            twin_bus = can.Bus(interface=args.interface, channel=args.channel)
        else:  # the in-process virtual channel the slcan server bridges to the pty
            twin_bus = can.Bus(interface="virtual", channel=bus.channel_id, preserve_timestamps=False)
        opened.append(twin_bus)
        duplicates.append(JointControllerEmulator(twin_bus, dataclasses.replace(config, node_ids=nodes)))
    timer = threading.Timer(args.duplicate_delay, lambda: [d.start() for d in duplicates])
    timer.daemon = True
    timer.start()
    return duplicates, timer


def parse_nodes(text: str) -> tuple[int, ...]:
    nodes: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-"))
                nodes.extend(range(lo, hi + 1))
            else:
                nodes.append(int(part))
    except ValueError:
        raise EmulatorConfigError(f"--nodes {text!r}: expected e.g. 1-10 or 1,2,5") from None
    return tuple(nodes)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="aiko-emulator %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = EmulatorConfig(
            node_ids=parse_nodes(args.nodes),
            feedback_rate_hz=args.feedback_rate,
            reference_period_s=args.reference_period_ms / 1000.0,
            watchdog_periods=args.watchdog_periods,
            reply_to_references=args.reply_to_references,
            limit_h_rad=math.radians(args.limit_deg),
            limit_v_rad=math.radians(args.limit_deg),
            drive=DriveParams(free_play_rad=math.radians(args.free_play_deg)),
        )
        duplicate_nodes = parse_nodes(args.duplicate) if args.duplicate else ()
        if any(n not in config.node_ids for n in duplicate_nodes) or args.duplicate_delay < 0:
            raise EmulatorConfigError(f"--duplicate {args.duplicate}: node ids among --nodes {args.nodes}, delay >= 0")
    except (EmulatorConfigError, ValueError) as exc:
        sys.stderr.write(f"aiko-emulator: {exc}\n")
        return 2

    # Before any thread starts (the slcan reader, the Notifier that writes frames to the pty, the modules' thread):
    # each inherits the policy of the thread that starts it. Set after them, as it once was, only this main thread
    # (which just waits for a signal) ran at SCHED_FIFO, and the PC's frames reached the modules up to 40 ms late
    # on a loaded machine (issue 26).
    if not 0 <= args.rt_priority <= 99:
        sys.stderr.write(f"aiko-emulator: --rt-priority {args.rt_priority}: allowed 0 (off) .. 99\n")
        return 2
    if args.rt_priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
        except (AttributeError, OSError) as exc:
            sys.stderr.write(f"aiko-emulator: real-time priority refused ({exc}); running without\n")
    server = None
    opened: list[can.BusABC] = []  # shut down again if the start fails half-way
    problem: str | None = None
    try:
        if args.interface:
            bus = can.Bus(interface=args.interface, channel=args.channel)
            opened.append(bus)
            emulator = JointControllerEmulator(bus, config)
            print(f"{args.interface}: {args.channel}", flush=True)
        else:
            channel = f"aiko-emulator-{os.getpid()}"
            bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=False)
            bridge = can.Bus(interface="virtual", channel=channel, preserve_timestamps=False)
            opened += [bus, bridge]
            emulator = JointControllerEmulator(bus, config)
            server = SlcanPtyServer(bridge, on_garbage=emulator.count_serial_garbage)
            if args.link_path:
                try:
                    if os.path.lexists(args.link_path):
                        os.unlink(args.link_path)
                    os.symlink(server.slave_path, args.link_path)
                except OSError as exc:
                    problem = f"cannot create --link {args.link_path}: {exc.strerror}"
            if problem is None:
                server.start()
                print(f"slcan: {server.slave_path}", flush=True)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        problem = f"cannot open the bus: {exc}"
    if problem is not None:
        if server is not None:
            server.shutdown()
        for opened_bus in opened:
            opened_bus.shutdown()
        sys.stderr.write(f"aiko-emulator: {problem}\n")
        return 2

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    emulator.start()
    duplicates, power_up = _start_duplicates(args, config, duplicate_nodes, bus, opened)
    started = time.monotonic()
    try:
        while not stop.wait(0.1):
            if args.duration is not None and time.monotonic() - started >= args.duration:
                break
    finally:
        if server is not None:
            server.shutdown()  # stop reading the pty first ...
            if args.link_path and os.path.islink(args.link_path):
                os.unlink(args.link_path)
        power_up.cancel()
        for duplicate in duplicates:
            if duplicate._thread is not None:
                duplicate.stop()
        emulator.stop()
        emulator.poll_bus()  # ... then handle what was already received, so the counters are complete
        counters = emulator.counters()
        if server is not None:
            counters["slcan_frames_from_pc"] = server.frames_from_pc
            counters["slcan_frames_to_pc"] = server.frames_to_pc
            counters["slcan_frames_dropped_to_pc"] = server.frames_dropped_to_pc
        print(json.dumps(counters), flush=True)
        for opened_bus in opened[1:] if server is None else opened[2:]:
            opened_bus.shutdown()  # the duplicates' bus ends
        bus.shutdown()
        if server is not None:
            server.bus.shutdown()
    return 0
