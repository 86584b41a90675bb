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

# The tests' controllers run ahead of ordinary load (a real controller has its own CPU) at nice -20, not at
# SCHED_FIFO: a UR3 emulator's 500 Hz tick uses ~70 % of a core, and a real-time process that busy starves the
# kernel's normal-priority workers, among them the one that carries a pty's (or a USB serial adapter's) bytes, so
# an Aiko run streaming over slcan beside the suite went deaf for 0.4-0.9 s however high its own priority (issue
# 26; docs/can_hil.md: measured with the pty round trip). nice -20 wins against busy loops by weight and leaves
# those workers their share. Refused (not root, no CAP_SYS_NICE): the emulator runs at the default niceness.
CONTROLLER_NICE = -20


def _ahead_of_ordinary_load() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, CONTROLLER_NICE)
    except OSError:
        pass


def start(host: str, *extra: str) -> subprocess.Popen:
    """Start the emulator on ``host``; returns once its first line says the ports are bound."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host, *extra]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
        preexec_fn=_ahead_of_ordinary_load,  # os.setpriority only (no locks), between fork and exec
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
