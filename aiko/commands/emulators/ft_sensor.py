"""``aiko emulate ft-sensor …``: a six-axis F/T sensor (OnRobot HEX / EtherDAQ / Net F/T over UDP, or the USB DAQ
on a pty), streaming at a fixed rate from a wrench source, with settable noise, bias, saturation and faults."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = (
    "Emulated six-axis force/torque sensor: RDT over UDP (OnRobot HEX Compute Box, OptoForce EtherDAQ, ATI Net F/T) "
    "with --udp, or the OptoForce/OnRobot USB DAQ on a pseudo-terminal with --pty. The first stdout line says where "
    "it listens; on exit (SIGINT, SIGTERM, --duration) the counters are printed as one JSON line."
)


def register(devices: argparse._SubParsersAction) -> None:
    p = devices.add_parser("ft-sensor", help="six-axis force/torque sensor over UDP (RDT) or a serial pty")
    p.description = DESCRIPTION
    add_arguments(p)
    p.set_defaults(handler=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--udp",
        dest="udp_address",
        metavar="HOST:PORT",
        help="serve RDT on this loopback address, e.g. 127.0.0.7:49152",
    )
    where.add_argument(
        "--pty", dest="pty_link", metavar="PATH", help="serve the USB DAQ on a new pty and symlink PATH to it"
    )
    p.add_argument(
        "--flavour", choices=("onrobot", "ati"), default="onrobot", help="UDP dialect: OnRobot/EtherDAQ or ATI"
    )
    p.add_argument(
        "--rate", dest="rate_hz", type=float, default=1000.0, metavar="HZ", help="sample rate (default 1000)"
    )
    p.add_argument(
        "--counts-per-n", type=float, metavar="COUNTS", help="counts per newton (default: the flavour's or DAQ's)"
    )
    p.add_argument("--counts-per-nm", type=float, metavar="COUNTS", help="counts per newton-metre (default: as above)")
    p.add_argument(
        "--wrench", metavar="WRENCH", default="0,0,0,0,0,0", help="constant wrench FX,FY,FZ,TX,TY,TZ in N and N·m"
    )
    p.add_argument(
        "--wrench-file", metavar="FILE", help="CSV (t_s,fx_n,…,tz_nm) or NPZ (t_s, wrench) table to play back"
    )
    p.add_argument("--wrench-hook", metavar="MODULE:FUNCTION", help="Python callable t_s -> six values (N, N·m)")
    p.add_argument("--bias", dest="bias_wrench", metavar="WRENCH", default="0,0,0,0,0,0", help="sensor offset added")
    p.add_argument("--noise-n", type=float, default=0.0, metavar="SIGMA", help="force noise standard deviation (N)")
    p.add_argument("--noise-nm", type=float, default=0.0, metavar="SIGMA", help="torque noise standard deviation (N·m)")
    p.add_argument(
        "--saturation-n", type=float, default=float("inf"), metavar="LIMIT", help="rated force range (N), clipped there"
    )
    p.add_argument(
        "--saturation-nm", type=float, default=float("inf"), metavar="LIMIT", help="rated torque range (N·m)"
    )
    p.add_argument("--drop-every", type=int, default=0, metavar="K", help="fault: drop every K-th sample")
    p.add_argument("--drop-fraction", type=float, default=0.0, metavar="P", help="fault: drop a random fraction P")
    p.add_argument("--corrupt-every", type=int, default=0, metavar="K", help="fault: corrupt every K-th sample")
    p.add_argument("--corrupt-fraction", type=float, default=0.0, metavar="P", help="fault: corrupt a fraction P")
    p.add_argument("--fault-seed", type=int, default=0, metavar="SEED", help="seed of the random faults and noise")
    p.add_argument(
        "--buffer-records", type=int, default=10, metavar="K", help="records per datagram in buffered mode (1-40)"
    )
    p.add_argument(
        "--stopped", action="store_true", help="serial: do not stream until configured (the DAQ was left at speed 0)"
    )
    p.add_argument("--duration", type=float, metavar="S", help="exit after S seconds (default: run until signalled)")


def _build(args: argparse.Namespace):
    from aiko.devices.force_sensor import daq_serial, sources
    from aiko.devices.force_sensor.emulator import FaultConfig, PtyFtServer, SensorModel, UdpFtServer
    from aiko.devices.force_sensor.udp_reader import parse_address
    from aiko.devices.force_sensor.wrench import ATI_NETFT_DEFAULT, ONROBOT_HEX_DEFAULT, CountsScale

    if args.udp_address:
        default = ONROBOT_HEX_DEFAULT if args.flavour == "onrobot" else ATI_NETFT_DEFAULT
    else:
        default = daq_serial.DAQ_PLACEHOLDER_SCALE
    scale = CountsScale(args.counts_per_n or default.counts_per_n, args.counts_per_nm or default.counts_per_nm)
    if args.wrench_hook:
        source = sources.from_hook(args.wrench_hook)
    elif args.wrench_file:
        source = sources.from_file(args.wrench_file)
    else:
        source = sources.constant(sources.parse_wrench(args.wrench))
    model = SensorModel(
        scale=scale,
        source=source,
        bias=sources.parse_wrench(args.bias_wrench),
        noise_n=args.noise_n,
        noise_nm=args.noise_nm,
        saturation_n=args.saturation_n,
        saturation_nm=args.saturation_nm,
    )
    faults = FaultConfig(
        drop_every=args.drop_every,
        drop_fraction=args.drop_fraction,
        corrupt_every=args.corrupt_every,
        corrupt_fraction=args.corrupt_fraction,
        seed=args.fault_seed,
    )
    if args.udp_address:
        server = UdpFtServer(
            parse_address(args.udp_address),
            model,
            faults=faults,
            rate_hz=args.rate_hz,
            flavour=args.flavour,
            buffer_records=args.buffer_records,
        )
        return server, f"udp: {server.address[0]}:{server.address[1]}"
    if not args.rate_hz > 0:
        from aiko.core.errors import ConfigError

        raise ConfigError(f"rate must be positive, got {args.rate_hz:g}")
    server = PtyFtServer(model, faults=faults, rate_hz=args.rate_hz, link_path=args.pty_link, stopped=args.stopped)
    return server, f"pty: {server.slave_path} {args.pty_link}"


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from aiko.commands.emulators._serve import serve_until_stopped

    server, where = _build(args)  # ConfigError -> one line from the CLI, exit 2
    server.start()
    print(where, flush=True)
    try:
        serve_until_stopped(args.duration)
    finally:
        server.shutdown()
        print(json.dumps(asdict(server.counters)), flush=True)
        sys.stdout.flush()
    return 0
