"""The spine's deadline rule (aiko.core.loop), on a fake clock that wakes late by any amount: steady lag, jitter, one
long stall, and hypothesis's choice of lateness. What the rule promises, for every task:

* a deadline passed by any amount is run late, once, with the newest deadline that has passed (never replayed);
* the deadlines it supersedes are counted in ``deadline_missed`` events (every k is either run or counted);
* two runs are never closer than half a period; two runs are never further apart than one period plus how late the
  clock woke for the second (the stall);
* after the clock stops being late, the runs are back on the grid within two runs.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.core.clock import Clock
from aiko.core.loop import PeriodicTask, TaskLoop
from aiko.core.recording import MemoryRecorder

EPS = 1e-9
HALF_PERIOD = 0.5  # the promise, restated (not imported: a test of the constant against itself cannot fail)


class LateClock(Clock):
    """Simulated time that overshoots every sleep by ``lateness(i)`` seconds (i: the sleep's number), as a loaded
    or frozen process wakes late. ``last_overshoot_s`` is the overshoot of the most recent sleep."""

    def __init__(self, lateness) -> None:
        super().__init__()
        self.t_s = 0.0
        self.lateness = lateness
        self.sleeps = 0
        self.last_overshoot_s = 0.0

    def now_s(self) -> float:
        return self.t_s

    def sleep_until(self, t_s: float) -> None:
        self.last_overshoot_s = max(0.0, self.lateness(self.sleeps))
        self.sleeps += 1
        self.t_s = max(self.t_s, t_s) + self.last_overshoot_s


class NullBackend:
    def __init__(self) -> None:
        self.advanced: list[float] = []

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def advance_to(self, t_s: float) -> None:
        self.advanced.append(t_s)


def run_tasks(lateness, rates_hz=(10.0,), duration_s=3.0):
    """Run one task per rate on a LateClock; per task the (run start, grid time, overshoot of that wake) list."""
    clock = LateClock(lateness)
    recorder = MemoryRecorder()
    runs: dict[str, list[tuple[float, float, float]]] = {}
    tasks = []
    for i, rate in enumerate(rates_hz):
        name = f"task{i}"
        runs[name] = []
        action = lambda t_s, name=name: runs[name].append((clock.now_s(), t_s, clock.last_overshoot_s))  # noqa: E731
        tasks.append(PeriodicTask(name, rate, action, priority=i))
    backend = NullBackend()
    result = TaskLoop(backend, recorder, clock, tasks).run(duration_s)
    return runs, recorder, backend, result, {t.name: t for t in tasks}


def missed_events(recorder, task):
    return [f for _, kind, f in recorder.events if kind == "deadline_missed" and f["task"] == task]


def assert_rule(runs, recorder, task, max_overshoot_s, duration_s):
    """The rule's promises for one task's runs."""
    rate = task.rate_hz
    period = 1.0 / rate
    started = [r for r, _, _ in runs]
    grid = [t for _, t, _ in runs]
    ks = [round(t * rate) for t in grid]
    assert ks[0] == 0 and all(b > a for a, b in zip(ks, ks[1:], strict=False)), "in order, never replayed"
    for (run_s, t_s, _), k in zip(runs, ks, strict=True):
        assert t_s == k / rate
        assert run_s >= t_s - EPS, "never early"
        if k:  # the newest passed deadline (or the run's last one)
            assert k == min(math.floor(run_s * rate + 1e-9), math.floor(duration_s * rate + 1e-9))
    for a, b in zip(runs, runs[1:], strict=False):
        gap = b[0] - a[0]
        assert gap >= HALF_PERIOD * period - EPS, "never two runs closer than half a period"
        assert gap <= period + max_overshoot_s + EPS, "never a gap longer than the stall plus one period"
    events = missed_events(recorder, task.name)
    assert sum(e["count"] for e in events) == ks[-1] + 1 - len(ks), "every deadline is run or counted"
    jumps = [(b - a - 1, b) for a, b in zip(ks, ks[1:], strict=False) if b - a > 1]
    assert [(e["count"], round(e["run_t_s"] * rate)) for e in events] == jumps
    assert ks[-1] == math.floor(duration_s * rate + 1e-9), "the run's last deadline runs"
    assert started == sorted(started)


def test_on_time_every_deadline_runs_on_its_grid():
    runs, recorder, backend, result, tasks = run_tasks(lambda i: 0.0, (10.0, 100.0), 2.0)
    assert [t for _, t, _ in runs["task0"]] == [k / 10 for k in range(21)]
    assert [r for r, _, _ in runs["task1"]] == [k / 100 for k in range(201)]
    assert result.deadlines_missed == 0 and recorder.event_kinds() == []  # start, stop: the run owner's
    assert backend.advanced == sorted(backend.advanced)


@pytest.mark.parametrize("lag_s", [1e-6, 0.011, 0.049, 0.05, 0.07, 0.099, 0.25])
def test_a_steady_lag_is_run_late_never_skipped_into_silence(lag_s):
    runs, recorder, _, _, tasks = run_tasks(lambda i: lag_s)
    assert_rule(runs["task0"], recorder, tasks["task0"], lag_s, 3.0)
    if lag_s < HALF_PERIOD * 0.1:  # a lag shorter than half a period only shifts the runs
        assert [t for _, t, _ in runs["task0"]] == [k / 10 for k in range(31)]
        assert [r for r, _, _ in runs["task0"]] == pytest.approx([k / 10 + lag_s for k in range(31)])
        assert not missed_events(recorder, "task0")


def test_one_long_stall_sends_the_newest_reference_once_then_the_grid():
    """Frozen from just before t = 0.5 to t = 2.03 (1.53 s): t = 2.0 goes out at 2.03, then 2.1, 2.2, ... on time."""
    stall = {5: 1.53}  # the sixth sleep (for t = 0.5) overshoots by the stall
    runs, recorder, _, _, tasks = run_tasks(lambda i: stall.get(i, 0.0))
    started = [round(r, 9) for r, _, _ in runs["task0"]]
    grid = [t for _, t, _ in runs["task0"]]
    assert grid == [0.0, 0.1, 0.2, 0.3, 0.4, 2.0, *[k / 10 for k in range(21, 31)]]
    assert started == [0.0, 0.1, 0.2, 0.3, 0.4, 2.03, *[round(k / 10, 9) for k in range(21, 31)]]
    (event,) = missed_events(recorder, "task0")
    assert event["count"] == 15 and event["gap_s"] == pytest.approx(1.63) and event["late_s"] == pytest.approx(1.53)
    assert event["run_t_s"] == 2.0 and event["resume_t_s"] == pytest.approx(2.1)
    assert_rule(runs["task0"], recorder, tasks["task0"], 1.53, 3.0)
    assert tasks["task0"].timing.max_gap_s == pytest.approx(1.63)


def test_a_stall_ending_just_before_a_deadline_spaces_the_next_run_by_half_a_period():
    stall = {5: 1.58}  # wakes at 2.08: t = 2.0 now; t = 2.1 is 20 ms away, so it waits until 2.13
    runs, recorder, _, _, tasks = run_tasks(lambda i: stall.get(i, 0.0))
    after = [(round(r, 9), t) for r, t, _ in runs["task0"] if r > 1.0]
    assert after[:3] == [(2.08, 2.0), (2.13, 2.1), (2.2, 2.2)]
    assert tasks["task0"].timing.min_spacing_s == pytest.approx(0.05)
    assert_rule(runs["task0"], recorder, tasks["task0"], 1.58, 3.0)


def test_a_late_start_runs_t0_then_the_newest_deadline():
    """The loop starts 0.35 s after its clock: t = 0 (the gait's start) goes out, then t = 0.4 (0.1-0.3 counted)."""
    runs, recorder, _, _, tasks = run_tasks(lambda i: 0.35 if i == 0 else 0.0, duration_s=1.0)
    assert [(round(r, 9), t) for r, t, _ in runs["task0"][:3]] == [(0.35, 0.0), (0.4, 0.4), (0.5, 0.5)]
    (event,) = missed_events(recorder, "task0")
    assert event["count"] == 3 and event["run_t_s"] == 0.4


def test_a_stall_past_the_end_runs_the_last_deadline_once():
    stall = {5: 10.0}
    runs, recorder, _, _, tasks = run_tasks(lambda i: stall.get(i, 0.0), duration_s=1.0)
    assert [t for _, t, _ in runs["task0"]] == [0.0, 0.1, 0.2, 0.3, 0.4, 1.0]
    assert_rule(runs["task0"], recorder, tasks["task0"], 10.0, 1.0)


def test_a_run_shorter_than_a_period_runs_its_first_deadline_only():
    runs, *_ = run_tasks(lambda i: 0.0, duration_s=1e-300)
    assert [t for _, t, _ in runs["task0"]] == [0.0]


@settings(max_examples=300, deadline=None)
@given(
    lateness=st.lists(st.floats(0.0, 0.35, allow_nan=False), min_size=1, max_size=60),
    rate_hz=st.sampled_from([10.0, 7.0, 20.0, 100.0]),
)
def test_any_lateness_keeps_the_rule_for_one_task(lateness, rate_hz):
    """Jitter of any size (up to 3.5 reference periods per wake-up), cycled over the run."""
    draw = lambda i: lateness[i % len(lateness)]  # noqa: E731
    runs, recorder, _, _, tasks = run_tasks(draw, (rate_hz,), 2.0)
    task_runs = runs["task0"]
    assert_rule(task_runs, recorder, tasks["task0"], max(lateness), 2.0)
    period = 1.0 / rate_hz
    for a, b in zip(task_runs, task_runs[1:], strict=False):  # the gap is bounded by *this* wake's lateness
        assert b[0] - a[0] <= period + b[2] + EPS


@settings(max_examples=150, deadline=None)
@given(
    lateness=st.lists(st.floats(0.0, 0.2, allow_nan=False), min_size=1, max_size=40),
    stall=st.tuples(st.integers(0, 200), st.floats(0.0, 2.0, allow_nan=False)),
)
def test_any_lateness_keeps_the_rule_for_every_task_of_a_run(lateness, stall):
    """Aiko's two tasks (feedback 100 Hz, references 10 Hz) and motion capture (20 Hz), jitter plus one stall."""
    at, length = stall

    def draw(i):
        return lateness[i % len(lateness)] + (length if i == at else 0.0)

    runs, recorder, backend, result, tasks = run_tasks(draw, (100.0, 10.0, 20.0), 2.0)
    worst = max(lateness) + length
    for name, task in tasks.items():
        assert_rule(runs[name], recorder, task, worst, 2.0)
    assert backend.advanced == sorted(backend.advanced), "the backend is never advanced backwards"
    assert result.deadlines_missed == sum(t.missed for t in tasks.values())


def test_after_the_clock_is_on_time_again_the_runs_are_back_on_the_grid_within_two_runs():
    lateness = [0.0] * 8 + [0.037, 0.29, 0.081] + [0.0] * 1000
    runs, *_ = run_tasks(lambda i: lateness[i], duration_s=3.0)
    started = [r for r, _, _ in runs["task0"]]
    late_until = max(i for i, (r, t, _) in enumerate(runs["task0"]) if abs(r - t) > EPS)
    assert started[late_until + 1 :] == pytest.approx([t for _, t, _ in runs["task0"][late_until + 1 :]], abs=EPS)
    assert late_until <= 8 + 3 + 1


@settings(max_examples=200, deadline=None)
@given(
    lateness=st.lists(st.floats(0.0, 0.1, allow_nan=False), min_size=1, max_size=30),
    frozen=st.lists(st.floats(0.0, 0.07, allow_nan=False), min_size=1, max_size=30),
)
def test_a_process_frozen_in_the_middle_of_sending_does_not_crowd_its_receivers(lateness, frozen):
    """The clock also jumps *inside* the action (SIGSTOP between computing a reference and writing it): what the
    receivers get — the ends of the actions — is still never closer than half a period, and never further apart
    than a period plus the freezes."""
    clock = LateClock(lambda i: lateness[i % len(lateness)])
    sent: list[float] = []
    count = [0]

    def send(t_s: float) -> None:
        clock.t_s += frozen[count[0] % len(frozen)]  # frozen between the start of the run and its write
        count[0] += 1
        sent.append(clock.now_s())

    task = PeriodicTask("references", 10.0, send)
    TaskLoop(NullBackend(), MemoryRecorder(), clock, [task]).run(3.0)
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert min(gaps) >= HALF_PERIOD * 0.1 - EPS
    assert max(gaps) <= 0.1 + max(lateness) + max(frozen) + EPS
    assert task.timing.min_spacing_s == pytest.approx(min(gaps)) and task.timing.max_gap_s == pytest.approx(max(gaps))


def test_the_usage_evidence_is_taken_on_a_clock_that_can_wake_late_and_only_there(monkeypatch):
    """A missed deadline's event carries what the process did while it waited (`aiko.core.usage`), taken at every
    wake-up of a clock that can wake late; simulated time jumps to each deadline, never misses one, and its loop
    (a bench simulation: ~1 200 wake-ups in 4 s) does not pay for it."""
    import aiko.core.loop as loop_module
    from aiko.core.clock import SimulatedClock
    from aiko.core.usage import Usage

    taken = []

    def counting_take() -> Usage:
        taken.append(1)
        return Usage(0.0, 0, 0, 0)

    monkeypatch.setattr(loop_module.Usage, "take", staticmethod(counting_take))
    task = PeriodicTask("task", 10.0, lambda t_s: None)
    TaskLoop(NullBackend(), MemoryRecorder(), SimulatedClock(), [task]).run(1.0)
    assert taken == [] and task.missed == 0

    runs, recorder, _, _, _ = run_tasks(lambda i: 0.25 if i == 3 else 0.0, duration_s=1.0)
    assert len(taken) == sum(len(r) for r in runs.values())  # one per wake-up: each wake-up ran the one task
    (event,) = missed_events(recorder, "task0")
    assert event["process_cpu_s"] == 0.0 and event["major_faults"] == 0  # the evidence is in the event
