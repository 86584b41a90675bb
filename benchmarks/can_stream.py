"""Reference streaming over CAN: period jitter, drift, lost frames and reference-to-feedback latency.

    python benchmarks/can_stream.py --transport virtual --rate 10 --duration 60 --json
    python benchmarks/can_stream.py --transport slcan --rate 100 --duration 60 --json

The stream is the real `aiko run` path: the sidewinding experiment, the control loop on the wall clock
(absolute deadlines k / rate), the CAN driver. `virtual`: the `hil` backend in real time (emulated modules in a
thread of this process, python-can virtual bus, Notifier). `slcan`: the `can` backend with python-can's slcan
interface talking through a pseudo-terminal to `python -m firmware_protocol.emulator` in its own process.
The modules answer every accepted reference at once (reply_to_references) so the latency is PC -> module -> PC.

Definitions: period jitter = |t_k - t_{k-1} - T| of the instants the driver starts sending reference k;
drift = cumulative: |median of (t_k - t_0) - k T over the last second - the same over the first second|;
max_schedule_error = max_k |(t_k - t_0) - k T| (single late sends included); frames_lost = reference frames sent
minus those the modules received intact (their own counters: accepted, or ignored because a watchdog trip had
disabled the module, reported separately with the number of trips); latency = send of reference k to the first
feedback frame echoing its sequence number.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiko.core.clock import WallClock  # noqa: E402
from aiko.core.recording import MemoryRecorder  # noqa: E402
from aiko.robots.aiko.backends.can import CanBackend  # noqa: E402
from aiko.robots.aiko.backends.hil import HilBackend  # noqa: E402
from aiko.robots.aiko.experiment import load_experiment  # noqa: E402
from aiko.robots.aiko.run import RunOptions, run_experiment  # noqa: E402


def _start_emulator_process(rate_hz: float, feedback_rate_hz: float, rt_priority: int) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        "-m",
        "firmware_protocol.emulator",
        "--reply-to-references",
        "--reference-period-ms",
        str(1000.0 / rate_hz),
        "--feedback-rate",
        str(feedback_rate_hz),
        "--rt-priority",
        str(rt_priority),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    first = proc.stdout.readline().strip()
    if not first.startswith("slcan: "):
        proc.kill()
        raise SystemExit(f"can_stream: emulator process did not start (first line {first!r})")
    return proc, first.split(": ", 1)[1]


def run(transport: str, rate_hz: float, duration_s: float, feedback_rate_hz: float, rt_priority: int) -> dict:
    overrides = {"run.reference_rate_hz": rate_hz, "run.feedback_rate_hz": max(rate_hz, 10.0)}
    proc = None
    if transport == "virtual":
        overrides |= {"hil.reply_to_references": True, "hil.feedback_rate_hz": feedback_rate_hz}
        backend = HilBackend()
        name = "hil"
    else:
        proc, pty = _start_emulator_process(rate_hz, feedback_rate_hz, rt_priority)
        backend = CanBackend()
        name = "can"
        overrides |= {"can.interface": "slcan", "can.channel": pty, "can.bitrate": 1_000_000}
    overrides["can.realtime_priority"] = rt_priority
    experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", overrides)
    clock = WallClock()
    try:
        _, summary = run_experiment(
            experiment,
            MemoryRecorder(),
            RunOptions(backend=name, duration_s=duration_s, realtime=True),
            backend=backend,
            clock=clock,
        )
    finally:
        if proc is not None:
            time.sleep(0.3)  # frames still in the pty when the run ends must reach the modules' counters
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=20)
    counters = json.loads(out.strip().splitlines()[-1]) if proc is not None else summary["emulator"]

    sends_ns = np.array(backend.driver.send_times_ns, dtype=np.int64)
    period_ns = 1e9 / rate_hz
    k = np.arange(len(sends_ns))
    jitter_ms = np.abs(np.diff(sends_ns) - period_ns) / 1e6
    error_ms = ((sends_ns - sends_ns[0]) - k * period_ns) / 1e6
    per_second = max(1, int(round(rate_hz)))  # cumulative drift: median error of the last vs the first second
    drift_ms = abs(np.median(error_ms[-per_second:]) - np.median(error_ms[:per_second]))
    lateness_ms = (sends_ns - (clock.start_ns + k * period_ns)) / 1e6
    n_modules = len(experiment.robot.can_node_ids)
    frames_sent = len(sends_ns) * n_modules
    latency = np.array(backend.driver.latencies_s) * 1e3
    return {
        "transport": transport,
        "rate_hz": rate_hz,
        "duration_s": duration_s,
        "feedback_rate_hz": feedback_rate_hz,
        "frames_sent": int(frames_sent),
        "frames_lost": int(
            frames_sent - sum(counters["accepted_references"]) - sum(counters["ignored_while_disabled"])
        ),
        "references_ignored_after_watchdog": int(sum(counters["ignored_while_disabled"])),
        "watchdog_trips": int(sum(counters["watchdog_trips"])),
        "period_jitter_p50_ms": float(np.percentile(jitter_ms, 50)),
        "period_jitter_p99_ms": float(np.percentile(jitter_ms, 99)),
        "period_jitter_max_ms": float(jitter_ms.max()),
        "max_drift_ms": float(drift_ms),
        "max_schedule_error_ms": float(np.abs(error_ms).max()),
        "deadline_lateness_p99_ms": float(np.percentile(lateness_ms, 99)),
        "ref_to_feedback_latency_p50_ms": float(np.percentile(latency, 50)) if latency.size else None,
        "ref_to_feedback_latency_p99_ms": float(np.percentile(latency, 99)) if latency.size else None,
        "latency_samples": int(latency.size),
        "can_send_errors": summary["can_send_errors"],
        "realtime_priority": summary["realtime_priority"],
        "emulator_rejected_total": counters["rejected_total"],
        "load_average_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=("virtual", "slcan"), default="virtual")
    p.add_argument("--rate", type=float, default=10.0, metavar="HZ", help="reference rate (default 10)")
    p.add_argument("--duration", type=float, default=10.0, metavar="S", help="stream length (default 10 s)")
    p.add_argument("--feedback-rate", type=float, default=100.0, metavar="HZ", help="module feedback rate")
    p.add_argument(
        "--rt-priority",
        type=int,
        default=20,
        metavar="P",
        help="SCHED_FIFO priority of the sender (default 20; 0: off)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (default: a readable table)")
    args = p.parse_args()
    if not (0 < args.rate <= 1000 and 0 < args.duration <= 3600):
        p.error("--rate must be in (0, 1000] Hz and --duration in (0, 3600] s")
    result = run(args.transport, args.rate, args.duration, args.feedback_rate, args.rt_priority)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:34s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
