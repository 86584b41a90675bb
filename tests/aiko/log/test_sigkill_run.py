"""SIGKILL of a real `aiko run --realtime` process (the control loop on the wall clock: 10 Hz references, 100 Hz
feedback), with the `kinematic` and the `hil` backend (emulated joint controllers on a virtual CAN bus): whatever
reached the disk before the kill is in the log, the log is a clean prefix of the run, and it recovers into a complete
MCAP.

Only what the code guarantees on any machine is asserted. A loaded 2-core machine can starve the child (or its
writer thread) for seconds, so "less than 1 s lost" or "≥ 200 feedback messages in 2.5 s" are properties of a quiet
machine, not of the code. What the code does guarantee:

* pages the writer handed to the OS survive a SIGKILL, so every message the parent read from the file before the
  kill is still there afterwards (``recover`` keeps the readable prefix);
* the control loop fires deadlines k / rate in order, never early and never twice, so the references carry
  t_s = k / 10 from 0 on, without repeats; after a stall the newest deadline runs late, once, and the older ones
  it supersedes are never run and are counted in a ``deadline_missed`` event, so every gap in k is counted; the
  k-th message of a channel is stamped no earlier than clock start + k / rate — which also bounds the count from
  above by the time the run had;
* no stamp is later than the kill (run stamps and the kill instant are both CLOCK_MONOTONIC).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from aiko.log import LogReader, recover
from aiko.log.reader import LogReadError
from aiko.robots.aiko.plugins import backend_names
from tests.aiko.log._kill import sigkill_after

REPO = Path(__file__).resolve().parents[3]
REFERENCE_RATE_HZ, FEEDBACK_RATE_HZ = 10.0, 100.0  # experiments/sidewinding.toml
DEADLINE_SLACK_NS = 1_000  # float rounding of k / rate in the clock's comparison, far below one period
LIVENESS_TIMEOUT_S = 120.0  # only to end a hung run; never a speed requirement


def _on_disk(path: Path) -> LogReader | None:
    try:
        return LogReader(path) if path.exists() else None
    except LogReadError:
        return None


def _wait_for_references(path: Path, count: int, timeout_s: float) -> LogReader | None:
    """The log as on disk once it holds ``count`` references (the run has progressed on its own clock)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        log = _on_disk(path)
        if log is not None and log.has("/references") and len(log.channel("/references")) >= count:
            return log
        time.sleep(0.05)
    return None


def _assert_deadline_ordered(stamps_ns: np.ndarray, clock_start_ns: int, rate_hz: float, t_kill_ns: int, topic):
    """Message k of a periodic channel is stamped after its deadline k / rate and before the kill."""
    assert np.all(np.diff(stamps_ns) >= 0), f"{topic}: stamps go backwards"
    deadlines_ns = clock_start_ns + np.round(np.arange(len(stamps_ns)) / rate_hz * 1e9).astype(np.int64)
    early = stamps_ns < deadlines_ns - DEADLINE_SLACK_NS
    assert not early.any(), f"{topic}: message {np.flatnonzero(early)[:3]} stamped before its deadline"
    assert stamps_ns[-1] <= t_kill_ns, f"{topic}: a message stamped after the kill"
    most = int((t_kill_ns - clock_start_ns) * 1e-9 * rate_hz) + 1
    assert len(stamps_ns) <= most, f"{topic}: {len(stamps_ns)} messages, the run had time for {most}"


@pytest.mark.parametrize("backend", ["kinematic", "hil"])
def test_sigkill_of_a_realtime_run(tmp_path, backend):
    assert backend in backend_names(), "both backends are part of the repository"
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
    if backend == "hil":  # far beyond any stall of a loaded machine: the run must still be streaming at the kill
        argv += ["--set", "can.watchdog_periods=20", "--set", "can.feedback_timeout_s=10"]
    child = subprocess.Popen(
        argv, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    # Kill once 1 s of run time (11 references at 10 Hz) is on disk: progress measured on the run's clock.
    seen = _wait_for_references(log_path, 11, LIVENESS_TIMEOUT_S)
    if seen is None:
        sigkill_after(child, 0.0)
        raise AssertionError("the run never got 11 references onto the disk")
    seen_counts = {topic: len(seen.channel(topic)) for topic in ("/references", "/joint_feedback")}
    t_kill_ns = sigkill_after(child, 0.0)

    log = LogReader(log_path)
    assert log.truncated, "a killed run has no summary section"
    assert log.run_metadata["clock"] == "WallClock"
    clock_start_ns = int(log.run_metadata["clock_start_ns"])  # ≤ the run's t = 0 (hil restarts it after enabling)
    for topic, rate_hz in (("/references", REFERENCE_RATE_HZ), ("/joint_feedback", FEEDBACK_RATE_HZ)):
        channel = log.channel(topic)
        assert len(channel) >= seen_counts[topic], f"{topic}: data that had reached the disk were lost"
        _assert_deadline_ordered(channel.t_ns, clock_start_ns, rate_hz, t_kill_ns, topic)
    references_t_s = log.channel("/references")["t_s"]
    k = np.round(references_t_s * REFERENCE_RATE_HZ).astype(int)
    np.testing.assert_array_equal(references_t_s, k / REFERENCE_RATE_HZ)  # on the deadlines k / rate
    assert k[0] == 0 and np.all(np.diff(k) >= 1), "references start at t = 0, in order, never repeated"
    # deadlines a stall superseded are never replayed (issue 14, 26), and each is counted in the log: every gap
    skipped = sum(e.fields["count"] for e in log.events("deadline_missed") if e.fields.get("task") == "references")
    assert k[-1] + 1 - len(k) == skipped, "every missing reference is a skipped deadline with its event"

    result = recover(log_path)
    with open(result.output, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None and summary.statistics.message_count == result.messages
    recovered = LogReader(result.output)
    assert not recovered.truncated
    for topic in ("/references", "/joint_feedback"):
        np.testing.assert_array_equal(recovered.channel(topic).t_ns, log.channel(topic).t_ns)
