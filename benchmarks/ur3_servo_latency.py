"""servoL at 500 Hz for 10 s through the unmodified ur_rtde client against the UR3 emulator in another process.

Prints one JSON object:

* ``latency_ms``: command-to-state latency. Every 100 ms the servo target steps by 1 mm along x (alternating
  sign); the time from just before that ``servoL`` call until ``getActualTCPPose`` first shows the TCP moved
  at least 1 um towards the new target. It spans the client's RTDE write, the emulator's next controller tick
  (the 500 Hz tick quantises it: up to 2 ms), the data package back and the client's receive thread. The loop
  spends its spare time in each period polling for the change, so the detection resolution is the poll's
  (tens of microseconds), not the loop period. servoL runs with lookahead 0.03 s and gain 1000 so the arm has
  settled before each step (a still-moving arm would first have to reverse, which would add to the number).
* ``period_ms``: the client loop's start-to-start period (target 2 ms), its percentiles and ``jitter_ms``
  (standard deviation), plus ``overruns`` (periods longer than 3 ms).

Usage: ``python benchmarks/ur3_servo_latency.py [--host 127.0.0.81] [--duration 10]``. Numbers depend on the
machine's load (the client, its receive thread and the emulator share the cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
PERIOD_S = 0.002
STEP_M = 0.001
STEP_EVERY = 50  # cycles: a target step every 100 ms
SEEN_M = 1e-6
# lookahead 0.03 s and gain 1000: the emulator's tracking time constant is 0.03 * 300 / 1000 = 9 ms, so the arm
# has settled (11 time constants) before each step and the first tick after a step moves it ~0.2 mm.
LOOKAHEAD_S = 0.03
GAIN = 1000.0


def _percentiles(values: list[float]) -> dict[str, float]:
    a = np.asarray(values) * 1e3
    return {
        "n": int(a.size),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }


def run(host: str, duration_s: float) -> dict:
    import rtde_control
    import rtde_receive

    env = dict(os.environ, PYTHONPATH=str(REPO))
    emulator = subprocess.Popen(
        [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host, "--rate-hz", "500"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        first = emulator.stdout.readline()
        assert first.startswith("ur3: "), first
        r = rtde_receive.RTDEReceiveInterface(host, 500.0)
        c = rtde_control.RTDEControlInterface(host, 500.0)
        base = np.asarray(r.getActualTCPPose(), dtype=float)
        target = base.copy()
        latencies: list[float] = []
        starts: list[float] = []
        pending: tuple[float, float, float] | None = None  # (t_cmd, x_before, direction)
        sign = 1.0
        n = round(duration_s / PERIOD_S)
        next_t = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter()
            starts.append(t0)
            if i % STEP_EVERY == 0 and i > 0:
                x_before = r.getActualTCPPose()[0]
                target[0] += sign * STEP_M
                pending = (time.perf_counter(), x_before, sign)
                sign = -sign
            c.servoL(target.tolist(), 0.5, 0.5, PERIOD_S, LOOKAHEAD_S, GAIN)
            next_t += PERIOD_S
            while True:
                now = time.perf_counter()
                if pending is not None:
                    t_cmd, x_before, direction = pending
                    if (r.getActualTCPPose()[0] - x_before) * direction >= SEEN_M:
                        latencies.append(time.perf_counter() - t_cmd)
                        pending = None
                    elif now - t_cmd > 0.05:
                        pending = None  # not seen in 50 ms: counted as missed
                if now >= next_t:
                    break
                if pending is None:
                    time.sleep(max(0.0, next_t - now - 0.0002))
            if time.perf_counter() - next_t > PERIOD_S:
                next_t = time.perf_counter()  # an overrun: do not try to catch up with a burst
        c.servoStop(2.0)
        c.stopScript()
        c.disconnect()
        r.disconnect()
    finally:
        emulator.send_signal(signal.SIGTERM)
        out, _ = emulator.communicate(timeout=20)
    periods = np.diff(starts)
    steps = n // STEP_EVERY - (1 if n % STEP_EVERY == 0 else 0)
    return {
        "benchmark": "ur3_servo_latency",
        "host": host,
        "duration_s": duration_s,
        "servo_rate_hz": 1 / PERIOD_S,
        "emulator_rate_hz": 500.0,
        "latency_ms": _percentiles(latencies),
        "latency_missed": steps - len(latencies),
        "period_ms": _percentiles(list(periods)),
        "jitter_ms": float(np.std(periods) * 1e3),
        "overruns": int(np.sum(periods > 0.003)),
        "emulator": json.loads(out.strip().splitlines()[-1]),
        "cpu_count": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.81", help="loopback address for the emulator")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of streaming")
    args = p.parse_args()
    print(json.dumps(run(args.host, args.duration), indent=2))


if __name__ == "__main__":
    main()
