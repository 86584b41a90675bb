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
