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

# The tests' controllers run at normal priority, like every other process of the suite. They ran at SCHED_FIFO 10
# while a tick cost ~1.6 ms of CPU (85 % of a core under ur_rtde's realtime example): a suite running them starved the
# kernel's normal-priority workers, which carry a pty's bytes, and a CAN run beside the suite stopped on its modules'
# watchdog (docs/can_hil.md). With the compiled kinematics a tick costs ~0.5 ms (27 % of a core, same example, load
# 5), and the vendor-example tests pass at normal priority beside two busy loops and the suite.


def start(host: str, *extra: str) -> subprocess.Popen:
    """Start the emulator on ``host``; returns once its first line says the ports are bound."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host]
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
