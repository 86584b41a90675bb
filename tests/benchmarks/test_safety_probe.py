"""benchmarks/safety_probe.py: which side made the silence behind a stopped run (the probe's freezer, the PC, or
the pty between them), from the evidence a trial records: the freezes actually applied, the run's own log, and the
emulator reader's silences."""

import pytest

from benchmarks.safety_probe import silence_made_by

FREEZE_MS = (30.0, 70.0)


@pytest.mark.parametrize(
    ("evidence", "made_by"),
    [
        # the run's loop blocked in the tty worker's wait: its own log has the gap (2026-11-29, trial 8)
        (
            {
                "max_freeze_ms": 70.0,
                "pc_logged_max_reference_gap_ms": 461.6,
                "pty_read_gaps_before_trip_ms": [[508.3, 208.2]],
            },
            "pc",
        ),
        # the PC sent on time, the emulator's reader heard nothing for 382 ms (trial 45)
        (
            {
                "max_freeze_ms": 70.1,
                "pc_logged_max_reference_gap_ms": 164.0,
                "pty_read_gaps_before_trip_ms": [[382.4, 82.1]],
            },
            "transport",
        ),
        # the freezer's own thread was late: a 200 ms stop the probe was not asked for
        (
            {"max_freeze_ms": 199.9, "pc_logged_max_reference_gap_ms": 222.6, "pty_read_gaps_before_trip_ms": []},
            "probe",
        ),
        (
            {"max_freeze_ms": 70.0, "pc_logged_max_reference_gap_ms": 150.0, "pty_read_gaps_before_trip_ms": []},
            "unknown",
        ),
        ({}, "unknown"),
    ],
)
def test_the_silence_is_put_where_the_evidence_puts_it(evidence, made_by):
    assert silence_made_by(evidence, watchdog_ms=300.0, freeze_ms=FREEZE_MS) == made_by


def test_the_freezer_stops_and_resumes_a_process_and_leaves_it_running():
    """The freezer (a child process of the probe) stops the target about half the time, reports every freeze with
    the length it applied, and after the halt the target runs again (it is never left stopped)."""
    import subprocess
    import sys
    import time

    from benchmarks.safety_probe import Freezer

    target = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.001)"],
    )
    try:
        freezer = Freezer(target.pid, freeze_ms=(20.0, 30.0), thaw_ms=(20.0, 30.0), seed=3)
        freezer.start()
        time.sleep(1.0)
        freezer.halt.set()
        freezer.join()
        stats = freezer.stats()
        assert stats["freezes"] >= 5
        assert len(freezer.freezes) == stats["freezes"]
        # each freeze at least as long as asked (the last one the halt may cut short)
        assert all(length >= 0.019 for _, length in freezer.freezes[:-1])
        assert 0.2 < stats["frozen_fraction"] < 0.8
        with open(f"/proc/{target.pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        assert state in ("S", "R")  # running or sleeping: not left stopped (T)
    finally:
        target.kill()
        target.wait()
