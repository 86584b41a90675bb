"""F/T sensor streaming at 1 kHz: samples received, lost, corrupt (injected vs counted), rate, inter-sample jitter.

    python benchmarks/ft_stream.py --transport udp --duration 60 --json
    python benchmarks/ft_stream.py --transport serial --duration 60 --json

The emulator (`aiko emulate ft-sensor`) runs in its own process, the reader (UdpReader / SerialReader) in this one,
a consumer drains the buffer every 100 ms. Faults are injected on a fixed pattern (--drop-every, --corrupt-every),
so the expected counts are known exactly: ``expected_lost`` = injected drops + corruptions among the sequence
numbers up to the last delivered one; ``expected_corrupt`` = every injected corruption (each is still received and
rejected). ``unexplained_lost`` = counted - expected: losses the link itself caused (should be 0).

Definitions: rate_hz = delivered samples / (t_last - t_first) x (1 + lost / delivered), the device rate as seen;
inter-sample interval = difference of the reader's receive timestamps (time.monotonic_ns) of consecutive sequence
numbers (pairs across a gap are skipped); jitter = |interval - 1 / rate|; drift_ms = (t_last - t_first) -
(seq_last - seq_first) / rate: how far the emulator's schedule wandered from the nominal clock over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiko.devices.force_sensor.serial_reader import SerialReader  # noqa: E402
from aiko.devices.force_sensor.udp_reader import UdpReader  # noqa: E402


def _start(args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ft-sensor", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    first = proc.stdout.readline().strip()
    if not first.startswith(("udp: ", "pty: ")):
        proc.kill()
        raise SystemExit(f"emulator did not start: {first!r} {proc.stderr.read()!r}")
    return proc


def _stop(proc: subprocess.Popen) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def run(transport: str, duration_s: float, rate_hz: float, drop_every: int, corrupt_every: int, address: str) -> dict:
    faults = ["--drop-every", str(drop_every), "--corrupt-every", str(corrupt_every)]
    common = ["--rate", str(rate_hz), "--noise-n", "0.05", "--noise-nm", "0.001", "--wrench", "1,2,3,0.1,0.2,0.3"]
    with tempfile.TemporaryDirectory() as tmp:
        if transport == "udp":
            proc = _start(["--udp", address, *common, *faults])
            reader = UdpReader(address, rate_hz=rate_hz)
        else:
            link = str(Path(tmp) / "ttyFT")
            proc = _start(["--pty", link, "--stopped", *common, *faults])
            reader = SerialReader(link, rate_hz=rate_hz)
        samples = []
        try:
            reader.start()
            t_end = time.monotonic() + duration_s
            while time.monotonic() < t_end:
                time.sleep(0.1)
                samples += reader.drain()
            reader.stop_streaming()
            time.sleep(0.5)
            samples += reader.drain()
            stats = reader.stats.as_payload()
        finally:
            reader.stop()
            counters = _stop(proc)
    seq = np.array([s.sequence for s in samples], dtype=np.int64)
    t_ns = np.array([s.t_ns for s in samples], dtype=np.int64)
    n = counters["samples"]
    drops = set(range(drop_every, n + 1, drop_every)) if drop_every else set()
    corrupt = (set(range(corrupt_every, n + 1, corrupt_every)) if corrupt_every else set()) - drops
    last = int(seq[-1])
    expected_lost = len({k for k in drops | corrupt if k < last})
    counted_corrupt = stats["checksum_failures"] if transport == "serial" else stats["malformed"]
    consecutive = np.diff(seq) == 1
    intervals_s = np.diff(t_ns)[consecutive] / 1e9
    period_s = 1.0 / rate_hz
    jitter_s = np.abs(intervals_s - period_s)
    span_s = (t_ns[-1] - t_ns[0]) / 1e9
    seen = len(samples) + stats["lost"]
    return {
        "transport": transport,
        "duration_s": duration_s,
        "rate_hz_requested": rate_hz,
        "emulator": counters,
        "reader": stats,
        "received": len(samples),
        "lost_counted": stats["lost"],
        "lost_expected": expected_lost,
        "unexplained_lost": stats["lost"] - expected_lost,
        "corrupt_injected": counters["corrupted"],
        "corrupt_counted": counted_corrupt,
        "dropped_injected": counters["dropped"],
        "never_delivered_faulty": not (set(seq.tolist()) & (drops | corrupt)),
        "rate_hz_achieved": (seen - 1) / span_s,
        "interval_ms": {
            "mean": float(np.mean(intervals_s) * 1e3),
            "p50": float(np.median(intervals_s) * 1e3),
            "p99": float(np.percentile(intervals_s, 99) * 1e3),
            "max": float(np.max(intervals_s) * 1e3),
        },
        "jitter_ms": {
            "mean": float(np.mean(jitter_s) * 1e3),
            "p99": float(np.percentile(jitter_s, 99) * 1e3),
            "max": float(np.max(jitter_s) * 1e3),
        },
        "drift_ms": float((span_s - (seq[-1] - seq[0]) * period_s) * 1e3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=("udp", "serial"), default="udp", help="which reader and emulator")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of streaming (default 60)")
    p.add_argument("--rate", type=float, default=1000.0, help="sample rate in Hz (default 1000)")
    p.add_argument("--drop-every", type=int, default=997, help="inject a drop every K samples (0 = none)")
    p.add_argument("--corrupt-every", type=int, default=1499, help="inject a corruption every K samples (0 = none)")
    p.add_argument("--address", default="127.0.16.30:49152", help="UDP loopback address of the emulator")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    args = p.parse_args()
    result = run(args.transport, args.duration, args.rate, args.drop_every, args.corrupt_every, args.address)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
