"""SIGKILL of a real `aiko run --realtime` process (the control loop on the wall clock: 10 Hz references, 100 Hz
feedback): the log holds every channel up to less than 1.0 s before the kill and recovers into a complete MCAP.
With the `hil` backend (emulated joint controllers on a virtual CAN bus, issue 3) once it is installed."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcap.reader import make_reader

from aiko.backends import backend_names
from aiko.log import LogReader, recover
from aiko.log.reader import LogReadError
from tests.aiko.log._kill import sigkill_after

REPO = Path(__file__).resolve().parents[3]


def _wait_for_start(path: Path, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if path.exists():
            try:
                if LogReader(path).events("start"):
                    return True
            except LogReadError:
                pass
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("backend", ["kinematic", "hil"])
def test_sigkill_of_a_realtime_run(tmp_path, backend):
    if backend not in backend_names():
        pytest.skip(f"backend {backend!r} not installed")
    log_path = tmp_path / "killed.mcap"
    argv = [
        sys.executable,
        "-m",
        "aiko.cli",
        "run",
        str(REPO / "experiments" / "sidewinding.toml"),
        "--backend",
        backend,
        "--realtime",
        "--duration",
        "60",
        "--out",
        str(log_path),
        "--no-report",
    ]
    child = subprocess.Popen(
        argv, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if not _wait_for_start(log_path, 60.0):
        sigkill_after(child, 0.0)
        raise AssertionError("the run did not start")
    t_kill_ns = sigkill_after(child, 2.5)
    log = LogReader(log_path)
    assert log.truncated
    for topic in ("/references", "/joint_feedback"):
        last_ns = int(log.channel(topic).t_ns[-1])
        assert t_kill_ns - last_ns < 1_000_000_000, f"{topic}: lost {(t_kill_ns - last_ns) * 1e-9:.3f} s"
    result = recover(log_path)
    with open(result.output, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None and summary.statistics.message_count == result.messages
    fb = LogReader(result.output).channel("/joint_feedback")
    assert len(fb) >= 200  # ≥ 100 Hz over the ≥ 2.5 s before the kill
