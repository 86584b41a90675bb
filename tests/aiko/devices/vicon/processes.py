"""The emulated Vicon and the real SDK client, each in its own process (the client holds the GIL in get_frame)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[4]
# this checkout first; the rest of the caller's path kept (a client installed outside the venv, e.g. --target)
_PATH = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
ENV = dict(os.environ, PYTHONPATH=_PATH, OPENBLAS_NUM_THREADS="1")


def free_port(host: str) -> int:
    with socket.create_server((host, 0)) as s:
        return s.getsockname()[1]


def start_vicon(host: str, port: int, *args: str) -> tuple[subprocess.Popen, dict[str, Any]]:
    """`aiko emulate vicon --host HOST --port PORT ARGS…`; returns the process and its first JSON line."""
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "vicon", "--host", host, "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    first = proc.stdout.readline()
    if not first.strip():
        proc.kill()
        raise AssertionError(f"the emulator did not start: {proc.stderr.read()[-2000:]}")
    return proc, json.loads(first)


def stop_vicon(proc: subprocess.Popen) -> dict[str, Any]:
    """SIGTERM, then the emulator's closing JSON line of counters."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    lines = out.strip().splitlines()
    assert lines, err[-2000:]
    return json.loads(lines[-1])


def probe(address: str, mode: str = "ServerPush", duration_s: float = 1.5, bodies=(), markers=()) -> dict[str, Any]:
    """The real pyvicon_datastream client reading ``address`` for ``duration_s`` (aiko.devices.vicon.probe)."""
    cmd = [sys.executable, "-m", "aiko.devices.vicon.probe", "--host", address, "--mode", mode]
    cmd += ["--duration-s", str(duration_s)]
    for body in bodies:
        cmd += ["--body", body]
    for marker in markers:
        cmd += ["--marker", marker]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=duration_s + 60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
