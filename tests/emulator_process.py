"""The joint-module emulator as its own process speaking slcan on a pseudo-terminal, for tests of the paths that
cross a real serial transport (the CAN backend, the e-stop command)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_emulator(*extra: str, modules: str = "python") -> tuple[subprocess.Popen, str]:
    """Start `python -m firmware_protocol.emulator` (slcan by default); returns the process and its pty path.
    ``modules="firmware"``: the firmware in the AVR simulator (``--firmware``) instead of the Python modules."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "firmware_protocol.emulator", *extra]
    if modules == "firmware":
        cmd.append("--firmware")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = proc.stdout.readline().strip()
    assert first.startswith("slcan: "), first
    return proc, first.split(": ", 1)[1]


def stop_emulator(proc: subprocess.Popen) -> dict:
    """SIGTERM, then the emulator's closing JSON line of counters."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    return json.loads(out.strip().splitlines()[-1])
