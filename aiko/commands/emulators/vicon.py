"""``aiko emulate vicon …``: a Vicon DataStream server (Tracker's port 801) that the real SDK client reads.

Prints one JSON line when the port is open (address, start time, rate, subjects) and one with the server's
counters when it stops (SIGTERM, SIGINT or ``--duration``).
"""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = (
    "Serve Aiko (one segment and one marker per link) over Vicon's DataStream protocol, from a simulation of an "
    "experiment or a recorded log, for the real Vicon SDK client (pyvicon-datastream, the `vicon` extra) and "
    "`aiko run --set mocap.source=vicon`. Occlusion, dropped frames, latency and server restarts are injectable."
)


def register(devices: argparse._SubParsersAction) -> None:
    p = devices.add_parser("vicon", help="a Vicon DataStream server (Tracker / Nexus) on a loopback address")
    p.description = DESCRIPTION
    add_arguments(p)
    p.set_defaults(handler=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", required=True, metavar="ADDRESS", help="address to listen on, e.g. 127.0.0.5")
    p.add_argument("--port", type=int, default=801, metavar="PORT", help="TCP port (default: 801, Vicon's)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiment", metavar="EXPERIMENT", help="simulate this experiment file and serve it")
    source.add_argument("--log", metavar="LOG", help="replay the link poses of this log of `aiko run` (.mcap)")
    source.add_argument(
        "--synthetic",
        type=int,
        metavar="N",
        help="serve N made-up subjects (subject1…, segments seg1…) moving on circles (no robot; for tests)",
    )
    p.add_argument(
        "--backend",
        default="kinematic",
        metavar="NAME",
        help="with --experiment: the backend that runs it (default: kinematic; sim for the physics simulator)",
    )
    p.add_argument("--subject", default="aiko", metavar="NAME", help="the subject's name (default: aiko)")
    p.add_argument("--rate-hz", type=float, default=100.0, metavar="HZ", help="frame rate (default: 100)")
    p.add_argument(
        "--occlude",
        default="",
        metavar="SPEC",
        help="segments or markers left out of frames: [SUBJECT/]NAME[@START_S-END_S], comma-separated "
        "(e.g. link3 or link3@2-4; times from the server's start)",
    )
    p.add_argument(
        "--dropout-fraction", type=float, default=0.0, metavar="F", help="fraction of frames never sent (0..1)"
    )
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="send each frame this long after its capture and report it in LatencyInfo (default: 0)",
    )
    p.add_argument(
        "--restart-every-s",
        type=float,
        default=None,
        metavar="S",
        help="close the listening socket and every connection every S seconds (a Tracker restart)",
    )
    p.add_argument(
        "--restart-downtime-s",
        type=float,
        default=0.5,
        metavar="S",
        help="how long a restart keeps the port closed (default: 0.5)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the dropped frames (default: 0)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds (default: never)")


def run(args: argparse.Namespace) -> int:
    from aiko.commands.emulators._serve import serve_until_stopped
    from aiko.core.errors import ConfigError
    from aiko.devices.vicon.impairments import Impairments, parse_occlusions
    from aiko.devices.vicon.server import ViconServer

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be in 0..65535, got {args.port}")
    impairments = Impairments(
        occlusions=parse_occlusions(args.occlude),
        dropout_fraction=args.dropout_fraction,
        latency_s=args.latency_ms * 1e-3,
        restart_every_s=args.restart_every_s,
        restart_downtime_s=args.restart_downtime_s,
        seed=args.seed,
    )
    poses = None
    if args.synthetic is not None:
        from aiko.devices.vicon.synthetic import SyntheticSource

        if not 1 <= args.synthetic <= 100:
            raise ConfigError(f"--synthetic must be 1..100 subjects, got {args.synthetic}")
        source = SyntheticSource(args.synthetic)
    else:
        from aiko.robots.aiko.vicon_source import AikoFrameSource, ExperimentPoses, LogPoses

        if args.experiment:
            poses = ExperimentPoses(args.experiment, args.backend, args.rate_hz)
        else:
            poses = LogPoses(args.log)
        source = AikoFrameSource(poses.robot, poses, args.subject)
    server = ViconServer(source, args.host, args.port, rate_hz=args.rate_hz, impairments=impairments)
    try:
        server.start()
    except BaseException:
        if poses is not None:
            poses.close()
        raise
    try:
        print(
            json.dumps(
                {
                    "vicon": server.address,
                    "t0_unix_s": server.t0_unix_s,
                    "t0_monotonic_s": server.t0_mono_s,  # frame k is captured at t0 + k / rate (CLOCK_MONOTONIC)
                    "rate_hz": server.rate_hz,
                    "subjects": {s.name: [g.name for g in s.segments] for s in server.encoder.subjects},
                }
            ),
            flush=True,
        )
        serve_until_stopped(args.duration)
    finally:
        server.stop()
        if poses is not None:
            poses.close()
    counters = server.counters.as_dict()
    if poses is not None and getattr(poses, "error", None) is not None:
        counters["source_error"] = str(poses.error)
    print(json.dumps(counters), flush=True)
    sys.stdout.flush()
    return 0
