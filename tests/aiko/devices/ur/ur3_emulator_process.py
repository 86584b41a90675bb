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

# The tests' controllers run ahead of ordinary load (a real controller has its own CPU) at SCHED_FIFO 10: below an
# Aiko run's 20/21. Tried this session instead: nice -20, so as not to starve the kernel's normal-priority workers
# (a pty's bytes pass through one; docs/can_hil.md); beside two busy loops the vendor's realtime_control and
# record_data examples then did not end within 120 s of their Ctrl-C (6 failures in tests/aiko/devices/ur, against
# 0 at SCHED_FIFO 10 beside the same two loops), so the tests keep the real-time controller. Refused (not root, no
# CAP_SYS_NICE): the emulator says so and runs without.
CONTROLLER_RT_PRIORITY = "10"


def start(host: str, *extra: str) -> subprocess.Popen:
    """Start the emulator on ``host``; returns once its first line says the ports are bound."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host, "--rt-priority", CONTROLLER_RT_PRIORITY]
    cmd += extra
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
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
