"""The UR3 emulator as its own process (``python -m aiko.cli emulate ur3``) for tests that use the real ur_rtde
client: the client's C++ calls hold the GIL, so an in-process emulator thread would starve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

# SCHED_FIFO for the tests' controllers, as a real controller has its own CPU: enough to stay on time beside busy
# loops, and below an Aiko run's default 20/21. A UR3 emulator's 500 Hz tick uses ~70 % of a core here; at the run's
# own priority it would share the run's CPUs as an equal, which a lab's UR controller (separate hardware) never does
# (issue 26: runs beside the suite stalled while its UR3 tests ran).
EMULATOR_RT_PRIORITY = "10"


def start(host: str, *extra: str) -> subprocess.Popen:
    """Start the emulator on ``host``; returns once its first line says the ports are bound."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    first = proc.stdout.readline().strip()
    if not first.startswith("ur3: "):
        proc.kill()
        raise AssertionError(f"emulator did not start: {first!r} {proc.stderr.read()}")
    return proc


def stop(proc: subprocess.Popen) -> tuple[dict, list[str]]:
    """SIGTERM; returns the closing JSON counters and the event lines printed before them."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    lines = out.strip().splitlines()
    events = [json.loads(line)["event"] for line in lines[:-1] if line.startswith('{"event"')]
    return json.loads(lines[-1]), events


@contextmanager
def running(host: str, *extra: str) -> Iterator[subprocess.Popen]:
    proc = start(host, *extra)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
