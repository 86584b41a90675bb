"""``aiko emulate ur3 …``: a UR3 controller (RTDE, dashboard, script ports) for the ur_rtde client."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import threading

from aiko.core.errors import ConfigError

DESCRIPTION = (
    "A UR3 controller on a loopback address: RTDE on 30004, the dashboard on 29999, the script ports "
    "30001-30003, for the unmodified ur_rtde client (rtde_control, rtde_receive). The arm is a kinematic "
    "model; ur_rtde's uploaded control script is recognised and its register protocol executed. "
    "The first stdout line names the address; on exit the counters are printed as one JSON line."
)


def register(devices: argparse._SubParsersAction) -> None:
    p = devices.add_parser("ur3", help="a UR3 arm's controller over RTDE for the ur_rtde client")
    p.description = DESCRIPTION
    p.add_argument("--host", required=True, metavar="ADDRESS", help="loopback address to bind, e.g. 127.0.0.5")
    p.add_argument(
        "--rate-hz",
        type=float,
        default=None,
        help="controller tick and top RTDE output rate (default: 125 for ur3 as on a CB3, 500 for ur3e)",
    )
    p.add_argument("--model", choices=("ur3", "ur3e"), default="ur3", help="arm geometry and controller version")
    p.add_argument("--duration", type=float, metavar="S", help="exit after S seconds (default: run until signalled)")
    p.add_argument(
        "--workspace",
        type=float,
        nargs=6,
        metavar="M",
        help="protective-stop box for the TCP: xmin ymin zmin xmax ymax zmax in metres (default +-0.6, z -0.2..0.8)",
    )
    p.add_argument(
        "--unlock-delay",
        dest="unlock_delay_s",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds after a protective stop before it may be unlocked (default 5, as PolyScope)",
    )
    p.add_argument(
        "--plant",
        metavar="MODULE:FACTORY",
        help="a plant hook: FACTORY() returns a callable(t_s, flange_pose, flange_speed) -> wrench or None",
    )
    p.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="P",
        help="run the controller at SCHED_FIFO priority P (1-99; needs root or CAP_SYS_NICE): a real controller is "
        "a real-time system, and a busy PC must not stretch its ticks (default 0: normal priority)",
    )
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import time

    from aiko.commands.emulators._serve import serve_until_stopped
    from aiko.devices.ur import arm_sim
    from aiko.devices.ur.emulator import DASHBOARD_PORT, RTDE_PORT, SCRIPT_PORTS, UR3Emulator
    from aiko.devices.ur.plants import load_plant

    try:
        address = ipaddress.ip_address(args.host)
    except ValueError:
        raise ConfigError(f"--host must be an IP address, got {args.host!r}") from None
    if not address.is_loopback:
        raise ConfigError(f"--host must be a loopback address (127.0.0.N), got {args.host}")
    rate = args.rate_hz if args.rate_hz is not None else (500.0 if args.model == "ur3e" else 125.0)
    if not 10.0 <= rate <= 1000.0:
        raise ConfigError(f"--rate-hz must lie in [10, 1000], got {rate:g}")
    safety = arm_sim.SafetyConfig(unlock_delay_s=args.unlock_delay_s)
    if args.workspace is not None:
        lo, hi = tuple(args.workspace[:3]), tuple(args.workspace[3:])
        if any(a >= b for a, b in zip(lo, hi, strict=True)):
            raise ConfigError(f"--workspace needs each minimum below its maximum, got {args.workspace}")
        safety.workspace_min_m, safety.workspace_max_m = lo, hi
    if not 0 <= args.rt_priority <= 99:
        raise ConfigError(f"--rt-priority must lie in 0..99, got {args.rt_priority}")
    plant = None
    started = time.monotonic()
    # The controller's compiled kinematics load from numba's cache in a second; on an empty cache (a fresh checkout
    # that skipped `python -m aiko.warmup --all`) they compile first, ~25 s of CPU: say so rather than sit silent.
    sys.stderr.write("ur3: loading the compiled kinematics (the first time: compiling them, ~30 s) ...\n")
    sys.stderr.flush()
    from aiko.devices.ur import kinematics_compiled

    kinematics_compiled.warm_up()
    if args.plant:
        sys.stderr.write(f"ur3: preparing the plant {args.plant} ...\n")
        sys.stderr.flush()
        plant = load_plant(args.plant)
    emulator = UR3Emulator(args.host, rate, args.model, safety, plant, log=_print_event)
    if plant is not None:
        # The plant is built and called once (its kernels compiled) before any port opens, so no client ever meets
        # a controller whose ticks stall on a compiler (issue 26, item 9).
        emulator.sim.prime_plant()
        sys.stderr.write(f"ur3: plant ready in {time.monotonic() - started:.1f} s\n")
        sys.stderr.flush()
    if args.rt_priority > 0:
        # After the plant is built and compiled, before the threads start (they inherit it): a plant's compile
        # (seconds, on an empty numba cache) at SCHED_FIFO would hold a CPU from every process at or below this
        # priority, e.g. an Aiko run at 20 beside it.
        import os

        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
        except (AttributeError, OSError) as exc:
            sys.stderr.write(f"ur3: real-time priority refused ({exc}); running without\n")
        else:
            emulator.rt_priority = args.rt_priority
    emulator.start()
    ports = f"rtde {RTDE_PORT} dashboard {DASHBOARD_PORT} script {SCRIPT_PORTS[0]}-{SCRIPT_PORTS[-1]}"
    with _PRINT_LOCK:
        print(f"ur3: {args.host} {ports} at {rate:g} Hz", flush=True)
    try:
        serve_until_stopped(args.duration, emulator.shutdown_requested)
    finally:
        emulator.stop()
    with _PRINT_LOCK:
        print(json.dumps(emulator.summary()), flush=True)
    return 0


_PRINT_LOCK = threading.Lock()


def _print_event(message: str) -> None:
    """One JSON line per event; events come from several threads (tick, connections), so one at a time."""
    with _PRINT_LOCK:
        sys.stdout.write(json.dumps({"event": message}) + "\n")
        sys.stdout.flush()
