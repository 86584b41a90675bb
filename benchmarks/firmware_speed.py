"""Speed of the joint modules' firmware in the AVR simulator harness, and the firmware's own cycle budget.

    python benchmarks/firmware_speed.py --modules 10 --duration 5 --mode lockstep --json
    python benchmarks/firmware_speed.py --modules 1 --duration 5 --mode wallclock --json
    python benchmarks/firmware_speed.py --modules 10 --duration 5 --mode lockstep --stress --json

The modules are enabled and follow a sidewinding-like sine (30 deg, 0.8 Hz on both axes, 10 Hz references with
their rates) on the independent-inertia plant, the PC's side on a python-can virtual bus, as `aiko emulate can
--firmware` and `[hil] modules = "firmware"` run them:
- ``lockstep``: the transport steps the modules on a simulated clock as fast as they go (1 ms per step, as a HIL
  run's driver polls); prints simulated seconds per wall second and per CPU second (this process and the
  harness's together);
- ``wallclock``: the transport's real-time thread paces them by the monotonic clock for ``--duration`` wall
  seconds; prints the module time reached per wall second (1.0: real time kept) and the CPU used.
``--stress`` is the firmware's worst case for its cycle budget: 1 kHz feedback on every module (parameter 9),
200 Hz references and 50 stray frames per second on the modules' own ids (rejected).

Also prints what the harness measured of the firmware: the fraction of cycles the cores were awake (not asleep
in the idle loop) and the most cycles awake in any one millisecond (a 16 MHz core has 16 000), after power-up.
Reports the load average beside every number: the machine is shared.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import can  # noqa: E402

from firmware_protocol.codec import default_codec  # noqa: E402
from firmware_protocol.dbc import Command, MessageKind, Parameter  # noqa: E402
from firmware_protocol.emulator import EmulatorConfig  # noqa: E402
from firmware_protocol.emulator.firmware import FirmwareModules  # noqa: E402
from firmware_protocol.emulator.harness_client import HarnessError  # noqa: E402
from firmware_protocol.emulator.transport import BusTransport  # noqa: E402

CODEC = default_codec()
_channels = itertools.count()


def cpu_s() -> float:
    """This process's CPU time (the harness's is counted apart: a running child is not in RUSAGE_CHILDREN)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def process_cpu_s(pid: int) -> float:
    """CPU time of a running process (utime + stime, /proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(n_modules: int, duration_s: float, mode: str, stress: bool) -> dict:
    channel = f"firmware-speed-{os.getpid()}-{next(_channels)}"
    pc = can.Bus(interface="virtual", channel=channel)
    bus = can.Bus(interface="virtual", channel=channel)
    nodes = tuple(range(1, n_modules + 1))
    config = EmulatorConfig(node_ids=nodes, limit_h_rad=math.radians(45), limit_v_rad=math.radians(45))
    transport = BusTransport(bus, FirmwareModules(config))
    modules = transport.modules
    rng = random.Random(7)

    def send(kind: MessageKind, node: int, values: dict) -> None:
        frame_id, data = CODEC.encode(kind, node, values)
        pc.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))

    reference_rate = 200.0 if stress else 10.0
    if stress:
        for node in nodes:
            send(
                MessageKind.PARAMETER_REQUEST,
                node,
                {"Index": int(Parameter.FEEDBACK_RATE_HZ), "Write": 1, "Value": 1000.0},
            )
            send(
                MessageKind.PARAMETER_REQUEST,
                node,
                {"Index": int(Parameter.REFERENCE_PERIOD_MS), "Write": 1, "Value": 5.0},
            )
    send(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
    sequence = 0

    def references(t_s: float) -> None:
        nonlocal sequence
        for node in nodes:
            phase = 2 * math.pi * 0.8 * t_s + node * 0.9
            rate_deg_s = 30 * 2 * math.pi * 0.8 * math.cos(phase)  # 151 deg/s at most
            values = dict(AngleH=30 * math.sin(phase), AngleV=10 * math.sin(phase + 1.5), RateH=rate_deg_s,
                          RateV=0.0, Sequence=sequence % 256)  # fmt: skip
            send(MessageKind.REFERENCE, node, values)
        sequence += 1
        if stress:  # stray frames on the modules' ids: wrong length, jumps (rejected)
            for _ in range(max(1, round(50 / reference_rate))):
                node = rng.choice(nodes)
                pc.send(can.Message(arbitration_id=0x100 + node, data=bytes(rng.randrange(8)), is_extended_id=False))

    harness_pid = modules.harness._process.pid
    cpu0, harness_cpu0, load = cpu_s(), process_cpu_s(harness_pid), os.getloadavg()[0]
    modules.harness.stats(restart=True)
    wall0 = time.perf_counter()
    if mode == "lockstep":
        period_ticks = round(1000 / reference_rate)
        for tick in range(round(duration_s * 1000)):
            if tick % period_ticks == 0:
                references(tick / 1000)
            transport.step_to((tick + 1) / 1000)
            while pc.recv(timeout=0) is not None:
                pass
        reached_s = modules.time_s
    else:
        transport.start()
        next_s = 0.0
        while (elapsed := time.perf_counter() - wall0) < duration_s:
            if elapsed >= next_s:
                references(elapsed)
                next_s += 1 / reference_rate
            while pc.recv(timeout=0.001) is not None:
                pass
        transport.stop()
        reached_s = modules.time_s
    wall = time.perf_counter() - wall0
    python_cpu = cpu_s() - cpu0
    harness_cpu = process_cpu_s(harness_pid) - harness_cpu0
    cpu = python_cpu + harness_cpu
    counters = transport.counters()
    transport.close()
    pc.shutdown()
    bus.shutdown()
    firmware = counters["firmware"]
    out = {
        "modules": n_modules,
        "mode": mode,
        "stress": stress,
        "load_average_1min": round(load, 2),
        "wall_s": round(wall, 3),
        "simulated_s": round(reached_s, 3),
        "simulated_s_per_wall_s": round(reached_s / wall, 3),
        "cpu_s": round(cpu, 3),  # both processes
        "cpu_s_python": round(python_cpu, 3),
        "cpu_s_harness": round(harness_cpu, 3),
        "simulated_s_per_cpu_s": round(reached_s / cpu, 3),
        "awake_fraction_mean": round(sum(firmware["awake_fraction"]) / n_modules, 4),
        "max_awake_cycles_per_ms": max(firmware["max_awake_cycles_per_ms"]),
        "tick_overruns": sum(b["tick_overruns"] for b in firmware["boards"]),
        "rx_dropped": sum(b["rx_dropped"] for b in firmware["boards"]),
        "tx_dropped": sum(b["tx_dropped"] for b in firmware["boards"]),
        "rx_overflows": sum(b["rx_overflows"] for b in firmware["boards"]),
        "bus_load": round(firmware["bus_load"], 3),
        "accepted_references": counters["accepted_references"],
        "rejected_total": counters["rejected_total"],
        "state": counters["state"],
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--mode", choices=("lockstep", "wallclock"), default="lockstep")
    parser.add_argument("--stress", action="store_true")
    parser.add_argument("--json", action="store_true", help="(the output is always one JSON object)")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(measure(args.modules, args.duration, args.mode, args.stress)))
    except HarnessError as exc:  # not built, or the harness failed: one line
        sys.stderr.write(f"firmware_speed: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
