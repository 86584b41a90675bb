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


def _may_set_kernel_threads_policy() -> str | None:
    """None if this process may change a kernel worker's scheduling (root, and the system allows it); else why not."""
    import os

    from benchmarks.safety_probe import TtyWorkers

    if not hasattr(os, "sched_setscheduler") or os.geteuid() != 0:
        return "needs root on Linux"
    workers = TtyWorkers._unbound_workers()
    if not workers:
        return "no unbound kernel workers visible (/proc/2/task/2/children)"
    try:
        os.sched_setscheduler(workers[0], os.SCHED_OTHER, os.sched_param(0))  # what it already is: a no-op
    except OSError as exc:
        return f"the system refuses: {exc}"
    return None


def test_only_the_unbound_kernel_workers_are_listed():
    import os
    from pathlib import Path

    from benchmarks.safety_probe import TtyWorkers

    if not Path("/proc/2/task/2/children").exists():
        pytest.skip("no /proc/2/task/2/children (not Linux, or a kernel without it)")
    pids = TtyWorkers._unbound_workers()
    assert os.getpid() not in pids
    assert all(
        Path(f"/proc/{pid}/comm").read_text().startswith("kworker/u") for pid in pids if Path(f"/proc/{pid}").exists()
    )


def test_the_tty_workers_are_raised_while_it_runs_and_set_back_after():
    """--tty-workers-fifo: every unbound kernel worker at SCHED_FIFO P while it runs (new ones within its 20 ms look),
    and each one it raised back at SCHED_OTHER when it stops: the probe leaves the machine as it found it."""
    import os

    from benchmarks.safety_probe import TtyWorkers

    reason = _may_set_kernel_threads_policy()
    if reason is not None:
        pytest.skip(f"cannot change kernel workers' scheduling here: {reason}")
    workers = TtyWorkers(priority=1)
    try:
        # one look of its own, not a sleep: a loaded machine may not have run its thread yet (and a worker born
        # after a look is raised by the next one, 20 ms later)
        alive = [pid for pid in workers.raise_new() if os.path.exists(f"/proc/{pid}")]
        assert alive
        for pid in alive:  # raised by it (or already real-time: another probe's, which it leaves alone)
            assert os.sched_getscheduler(pid) == os.SCHED_FIFO
            assert os.sched_getparam(pid).sched_priority >= 1
        raised = set(workers.raised)
    finally:
        workers.stop()
    for pid in raised:
        if os.path.exists(f"/proc/{pid}"):
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER


@pytest.mark.parametrize("priority", ["-1", "100"])
def test_a_priority_out_of_range_is_refused_before_anything_starts(priority):
    import subprocess
    import sys
    from pathlib import Path

    probe = Path(__file__).resolve().parents[2] / "benchmarks" / "safety_probe.py"
    done = subprocess.run(
        [sys.executable, str(probe), "--probe", "load", "--tty-workers-fifo", priority],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--tty-workers-fifo takes a SCHED_FIFO priority 1..99" in done.stderr
    assert done.stdout == ""
