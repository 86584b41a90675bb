"""`aiko emulate ft-sensor` in its own process, for the readers' tests and the benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


def start_ft_emulator(*args: str) -> tuple[subprocess.Popen, str]:
    """Start the emulator; returns the process and its first stdout line (``udp: HOST:PORT`` / ``pty: DEV LINK``)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ft-sensor", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    first = proc.stdout.readline().strip()
    if not first.startswith(("udp: ", "pty: ")):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"emulator did not start: {first!r} {err!r}")
    return proc, first


def stop_ft_emulator(proc: subprocess.Popen) -> dict:
    """SIGTERM, then the emulator's closing JSON line of counters."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def faulty(n: int, every: int) -> set[int]:
    """Sample numbers 1..n hit by a fault injected every `every`-th sample (0 = never)."""
    return set(range(every, n + 1, every)) if every else set()


def close(a, b, tol: float) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def wait_until(reader, predicate, timeout_s: float = 5.0):
    """Drain samples until one satisfies predicate; returns it (fails the test after timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for sample in reader.drain():
            if predicate(sample):
                return sample
        time.sleep(0.01)
    raise AssertionError("condition not reached")


def next_sample(reader):
    """The first sample delivered after now (the buffer may hold older ones)."""
    reader.drain()
    return reader.get(2.0)


def settle(reader, s: float = 0.3):
    """Wait for the samples in flight after a stop request, then take all."""
    time.sleep(s)
    return reader.drain()


def stream_with_faults(make_reader, emulator_args: list[str], drop_every: int, corrupt_every: int):
    """Stream ≥ 1500 samples from an emulator injecting drops and corruptions; returns (delivered sequence numbers,
    the reader's stats, the emulator's counters, the dropped and the corrupted sequence numbers)."""
    proc, _ = start_ft_emulator(*emulator_args, "--drop-every", str(drop_every), "--corrupt-every", str(corrupt_every))
    try:
        reader = make_reader().start()
        try:
            assert reader.wait_for_samples(1500, 10.0)
            delivered = [s.sequence for s in reader.drain()]
            reader.stop_streaming()
            delivered += [s.sequence for s in settle(reader)]
            stats = reader.stats
        finally:
            reader.stop()
    finally:
        counters = stop_ft_emulator(proc)
    n = counters["samples"]
    drops = faulty(n, drop_every)
    corrupt = faulty(n, corrupt_every) - drops
    return delivered, stats, counters, drops, corrupt
