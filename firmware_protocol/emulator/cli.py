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
from pathlib import Path

import can

from firmware_protocol.emulator.config import EmulatorConfig, EmulatorConfigError
from firmware_protocol.emulator.drive import DriveParams
from firmware_protocol.emulator.emulator import JointControllerEmulator
from firmware_protocol.emulator.harness_client import DEFAULT_FIRMWARE, HarnessError
from firmware_protocol.emulator.slcan_server import SlcanPtyServer
from firmware_protocol.emulator.transport import BusTransport

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

DESCRIPTION = (
    "Emulated Aiko joint modules (ATmega128 firmware) on slcan over a pty, or on a python-can bus: the Python model "
    "of the firmware, or with --firmware the firmware itself in the AVR simulator."
)


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
        "--firmware",
        nargs="?",
        const=str(DEFAULT_FIRMWARE),
        metavar="ELF",
        help="run the modules' real firmware (default ELF: firmware_protocol/firmware/build/, `make firmware`) on "
        "simulated ATmega128 boards (the GPL harness firmware_sim/, $AIKO_AVR_HARNESS) instead of the Python model",
    )
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

    def power_up() -> None:
        for duplicate in duplicates:
            duplicate.start()

    timer = threading.Timer(args.duplicate_delay, power_up)
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

    # The handler only records the signal and takes no lock: an Event.set() there (as before) deadlocks when the
    # signal is handled while the main thread holds that Event's own lock on its way out of wait(), which became
    # likely once the firmware's thread kept the GIL busy (`aiko emulate can --firmware` then ignored SIGTERM). The
    # run's loop notices within 0.1 s. Installed before the modules start, so that a signal during a slow start
    # (the AVR simulator's) also ends the process cleanly.
    signalled: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: signalled.append(signum)) for sig in STOP_SIGNALS}
    try:
        return serve(args, config, signalled)
    finally:
        for sig, handler in previous.items():  # as they were (main() is also called in-process)
            signal.signal(sig, handler)


def serve(args: argparse.Namespace, config: EmulatorConfig, signalled: list[int]) -> int:
    """Run the modules until ``signalled`` holds a signal, ``--duration`` has passed or the modules fail."""
    duplicate_nodes = parse_nodes(args.duplicate) if args.duplicate else ()  # checked by run()

    # Before any thread starts (the slcan reader, the Notifier that writes frames to the pty, the modules' thread,
    # the AVR simulator's process): each inherits the policy of the thread that starts it. Set after them, as it
    # once was, only this main thread (which just waits for a signal) ran at SCHED_FIFO, and the PC's frames reached
    # the modules up to 40 ms late on a loaded machine (issue 26).
    if not 0 <= args.rt_priority <= 99:
        sys.stderr.write(f"aiko-emulator: --rt-priority {args.rt_priority}: allowed 0 (off) .. 99\n")
        return 2
    if args.rt_priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
        except (AttributeError, OSError) as exc:
            sys.stderr.write(f"aiko-emulator: real-time priority refused ({exc}); running without\n")

    def modules_on(bus: can.BusABC) -> BusTransport:
        """The Python modules, or the firmware in the AVR simulator, on ``bus``."""
        if args.firmware is None:
            return JointControllerEmulator(bus, config)
        from firmware_protocol.emulator.firmware import FirmwareModules  # the harness process starts here

        return BusTransport(bus, FirmwareModules(config, firmware=Path(args.firmware)))

    server = None
    emulator: BusTransport | None = None
    opened: list[can.BusABC] = []  # shut down again if the start fails half-way
    problem: str | None = None
    try:
        if args.interface:
            bus = can.Bus(interface=args.interface, channel=args.channel)
            opened.append(bus)
            emulator = modules_on(bus)
            print(f"{args.interface}: {args.channel}", flush=True)
        else:
            channel = f"aiko-emulator-{os.getpid()}"
            bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=False)
            bridge = can.Bus(interface="virtual", channel=channel, preserve_timestamps=False)
            opened += [bus, bridge]
            emulator = modules_on(bus)
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
    except (HarnessError, EmulatorConfigError) as exc:
        problem = str(exc)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        problem = f"cannot open the bus: {exc}"
    if problem is not None:
        if server is not None:
            server.shutdown()
        if emulator is not None:
            emulator.close()  # the AVR simulator's process too
        for opened_bus in opened:
            opened_bus.shutdown()
        sys.stderr.write(f"aiko-emulator: {problem}\n")
        return 2
    assert emulator is not None  # set whenever there was no problem

    emulator.start()
    duplicates, power_up = _start_duplicates(args, config, duplicate_nodes, bus, opened)
    started = time.monotonic()
    status = 0
    try:
        while not signalled and emulator.failure is None:
            time.sleep(0.1)
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
        try:
            if emulator.failure is not None:
                raise emulator.failure
            emulator.poll_bus()  # ... then handle what was already received, so the counters are complete
            if args.firmware is not None:  # the firmware hears a frame only from the bus: 3 ms for the last ones
                emulator.modules.run_ticks(emulator.tick + 3)
            counters = emulator.counters()
            if server is not None:
                counters["slcan_frames_from_pc"] = server.frames_from_pc
                counters["slcan_frames_to_pc"] = server.frames_to_pc
                counters["slcan_frames_dropped_to_pc"] = server.frames_dropped_to_pc
                counters["slcan_long_read_gaps_s"] = server.long_read_gaps_s
            print(json.dumps(counters), flush=True)
        except HarnessError as exc:
            sys.stderr.write(f"aiko-emulator: {exc}\n")
            status = 1
        finally:
            try:
                emulator.close()  # ends the harness process and reaps it, whatever it answered
            except HarnessError:
                status = 1
            for opened_bus in opened[1:] if server is None else opened[2:]:
                opened_bus.shutdown()  # the duplicates' bus ends
            bus.shutdown()
            if server is not None:
                server.bus.shutdown()
    return status
