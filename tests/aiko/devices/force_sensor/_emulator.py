"""`aiko emulate ft-sensor` in its own process, for the readers' tests and the benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
