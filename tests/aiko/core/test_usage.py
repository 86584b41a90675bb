"""What the process did while a task waited (aiko.core.usage), as a ``deadline_missed`` event reports it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from aiko.core.loop import PeriodicTask, TaskLoop
from aiko.core.recording import MemoryRecorder
from aiko.core.usage import Usage

from .test_deadline_rule import LateClock, NullBackend


def _spin_cpu(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_cpu_used_and_blocking_are_counted_between_two_instants():
    before = Usage.take()
    _spin_cpu(0.03)
    time.sleep(0.01)  # blocks: a voluntary switch of this thread
    grown = Usage.take().since(before)
    assert grown["process_cpu_s"] >= 0.025
    assert grown["major_faults"] >= 0
    if sys.platform.startswith("linux"):
        assert grown["voluntary_switches"] >= 1 and grown["involuntary_switches"] >= 0
    else:  # pragma: no cover - no per-thread counters
        assert grown["voluntary_switches"] == -1


class BusyLateClock(LateClock):
    """Wakes 0.35 s late once (sleep 5), having spent ``busy_s`` of CPU in the process meanwhile: a collector
    pause or another thread holding the interpreter looks so from the loop."""

    def __init__(self, busy_s: float) -> None:
        super().__init__(lambda i: 0.35 if i == 5 else 0.0)
        self.busy_s = busy_s

    def sleep_until(self, t_s: float) -> None:
        if self.sleeps == 5:
            _spin_cpu(self.busy_s)
        super().sleep_until(t_s)


@pytest.mark.parametrize("busy_s", [0.0, 0.05])
def test_a_missed_deadline_says_what_the_process_did_while_it_waited(busy_s):
    clock = BusyLateClock(busy_s)
    recorder = MemoryRecorder()
    TaskLoop(NullBackend(), recorder, clock, [PeriodicTask("references", 10.0, lambda t: None)]).run(1.0)
    (missed,) = [f for _, kind, f in recorder.events if kind == "deadline_missed"]
    assert missed["count"] == 3
    assert set(missed) >= {
        "slept_s", "process_cpu_s", "voluntary_switches", "involuntary_switches", "major_faults", "thread_cpu_s",
        "runqueue_wait_s",
    }  # fmt: skip
    assert missed["slept_s"] == pytest.approx(missed["gap_s"] - 0.0, abs=0.1 + 1e-9)  # the lateness was the sleep's
    if busy_s:
        assert missed["process_cpu_s"] >= 0.8 * busy_s
    else:
        assert missed["process_cpu_s"] < 0.04  # nothing ran: a stopped or unscheduled process looks so


def test_a_task_that_blocks_shows_as_time_outside_the_sleep():
    """A task's action that blocks (a write to a throttled disk or a full pipe) silences every task of the loop
    without any sleep being long: the next task's ``gap_s`` holds the block, ``slept_s`` does not."""
    clock = LateClock(lambda i: 0.0)

    def references(t_s: float) -> None:
        if abs(t_s - 0.3) < 1e-9:
            clock.t_s += 0.45  # the action itself took 0.45 s of the run's clock

    tasks = [
        PeriodicTask("feedback", 100.0, lambda t: None, priority=0),
        PeriodicTask("references", 10.0, references, priority=1),
    ]
    recorder = MemoryRecorder()
    TaskLoop(NullBackend(), recorder, clock, tasks).run(1.0)
    missed = [f for _, kind, f in recorder.events if kind == "deadline_missed" and f["task"] == "feedback"]
    assert len(missed) == 1
    assert missed[0]["gap_s"] == pytest.approx(0.45, abs=1e-9)
    assert missed[0]["slept_s"] == pytest.approx(0.0, abs=1e-9)  # due at once: the time went in the action


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="no scheduler statistics here")
def test_waiting_for_a_cpu_is_told_from_running_and_from_sleeping():
    """A thread that is runnable but gets no CPU (outranked, the CPUs taken) shows as run-queue wait, not as CPU
    time of its own; a sleep is neither. Here a busy process pinned to this thread's one CPU takes turns with it:
    while this thread spins it is always either running or waiting for the CPU, so the two add up to the spin's
    wall time whatever else loads the machine, and the rival makes the wait a good part of it."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    original = os.sched_getaffinity(0)
    rival = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.2)  # the rival is pinned and spinning
        before = Usage.take()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.4:
            pass
        spin_wall_s = time.perf_counter() - t0
        grown = Usage.take().since(before)
        slept = Usage.take()
        time.sleep(0.1)
        asleep = Usage.take().since(slept)
    finally:
        rival.kill()
        rival.wait()
        os.sched_setaffinity(0, original)
    assert grown["thread_cpu_s"] + grown["runqueue_wait_s"] == pytest.approx(spin_wall_s, rel=0.1, abs=0.02)
    assert grown["runqueue_wait_s"] > 0.1 * spin_wall_s  # the rival had the CPU for part of it
    assert asleep["thread_cpu_s"] + asleep["runqueue_wait_s"] < 0.05  # asleep: neither running nor waiting


def test_without_scheduler_statistics_the_fields_are_minus_one(monkeypatch):
    import aiko.core.usage as usage

    monkeypatch.setattr(usage, "_SCHEDSTAT", "/nonexistent/schedstat")
    result: dict = {}

    def in_a_new_thread() -> None:  # a new thread opens its own file: the patched path
        before = Usage.take()
        result.update(Usage.take().since(before))

    worker = threading.Thread(target=in_a_new_thread)
    worker.start()
    worker.join()
    assert result["thread_cpu_s"] == -1 and result["runqueue_wait_s"] == -1
