"""The task loop: periodic tasks on one clock, the same for every robot, the emulated buses and every simulator.

Each task is due at integer multiples of its period (k / rate from the run start), so deadlines are absolute and
nothing drifts. What happens when the process wakes late — a loaded PC, a SIGSTOP, a swapping machine — is one rule
for every task (issue 26; the rule before it, "skip a deadline more than 10 % late", turned lateness into silence:
two skips made a 0.3 s gap, the modules' watchdog, on a PC that was merely busy):

* **late is run late, once**: a task whose deadline has passed, by any amount, runs now with the newest deadline
  that has passed (a reference sampled at that grid time); the older ones it supersedes are never run, so a stall
  is never followed by a burst of stale references, and a ``deadline_missed`` event counts them (``count``), with
  the silence the task's receivers saw (``gap_s``: from its previous run to this one) and how late the oldest
  superseded deadline was (``late_s``), and what the process did while it waited (``process_cpu_s``, the loop
  thread's ``voluntary_switches`` / ``involuntary_switches``, ``major_faults``: `aiko.core.usage`), so a stop on a
  busy PC says whether the process was not scheduled, busy with something else, or waiting on memory;
* **back on the grid**: the next run is due at the next grid deadline ...
* **never crowded**: ... but never sooner than half a period after the previous run's action returned
  (``MIN_SPACING_PERIODS``; from its end, so that a process frozen in the middle of sending does not crowd what its
  receivers get).

So, for a clock that wakes ``l`` late: two runs are never closer than half a period, and never further apart than
one period plus ``l`` (the stall) plus how long a frozen action took; a steady lag shifts the runs, it does not
thin them. The first deadline always
runs with t = 0 however late the start (nothing came before it, and t = 0 is the gait's start).
Before the tasks due at an instant run, the backend is advanced to the newest of their deadlines (simulators
integrate; hardware ignores it). On a simulated clock nothing is ever late and every task runs exactly on its grid.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiko.core.clock import Clock
from aiko.core.interfaces import Backend, Recorder
from aiko.core.usage import Usage

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float], None]

MIN_SPACING_PERIODS = 0.5
"""Two runs of a task are never closer than this many periods (after a stall, the run on the next grid deadline
waits until then): a receiver never sees a burst."""

_EPS_S = 1e-12  # float rounding of k / rate against the clock's own arithmetic


@dataclass
class TaskTiming:
    """What the schedule did to one task, on the clock it ran on (wall time on hardware)."""

    runs: int = 0
    missed: int = 0  # deadlines superseded by a newer one after a late wake-up (never run)
    max_late_s: float = 0.0  # the latest a run started after its own deadline
    max_gap_s: float = 0.0  # the longest time between two consecutive runs
    min_spacing_s: float = math.inf  # the shortest time between two consecutive runs

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "runs": self.runs,
            "missed": self.missed,
            "max_late_s": self.max_late_s,
            "max_gap_s": self.max_gap_s,
            "min_spacing_s": self.min_spacing_s if math.isfinite(self.min_spacing_s) else None,
        }


@dataclass
class PeriodicTask:
    """``action(t_s)`` at t = k / rate_hz for k = 0, 1, … (priority orders tasks due at the same instant).

    k / rate (not k·period) so that a 10 Hz task fires at exactly the floats a user writes as ``k / 10``.
    ``t_s`` is the deadline's grid time, also when the run is late (see the module docstring).
    """

    name: str
    rate_hz: float
    action: Callable[[float], None]
    priority: int = 50
    count: int = 0  # k of the next deadline
    missed: int = 0
    # clock time the previous run's action returned: what it sends has gone out by then (a process frozen in the
    # middle of an action sends late; spacing from the end keeps its receivers' spacing, not only the loop's)
    last_run_s: float | None = None
    timing: TaskTiming = field(default_factory=TaskTiming)

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz

    def next_time(self) -> float:
        """The grid time of the next deadline."""
        return self.count / self.rate_hz

    def due_s(self) -> float:
        """When the next run may start: its deadline, but not sooner than half a period after the previous run."""
        due = self.next_time()
        if self.last_run_s is not None:
            due = max(due, self.last_run_s + MIN_SPACING_PERIODS * self.period_s)
        return due

    def last_index(self, duration_s: float) -> int:
        """k of the last deadline of a run of ``duration_s``."""
        return math.floor(duration_s * self.rate_hz + 1e-9)

    def newest_passed(self, now_s: float, duration_s: float) -> tuple[int, int]:
        """(k of the deadline to run now, deadlines it supersedes): the newest grid deadline that has passed at
        ``now_s`` (never beyond the run's end, never before the next one; the first deadline runs as k = 0)."""
        if self.count == 0:
            return 0, 0
        newest = min(max(self.count, math.floor(now_s * self.rate_hz + 1e-9)), self.last_index(duration_s))
        return newest, newest - self.count

    def mark_run(self, k: int, started_s: float, finished_s: float | None = None) -> None:
        """Bookkeeping of a run of deadline ``k`` that started at clock time ``started_s`` and whose action returned
        at ``finished_s`` (default: at once). Gaps and spacing are between the ends of the actions."""
        finished_s = started_s if finished_s is None else finished_s
        t = self.timing
        if self.last_run_s is not None:
            gap = finished_s - self.last_run_s
            t.max_gap_s = max(t.max_gap_s, gap)
            t.min_spacing_s = min(t.min_spacing_s, gap)
        if k > 0:  # the first deadline is t = 0 by definition, however late the run's start
            t.max_late_s = max(t.max_late_s, started_s - k / self.rate_hz)
        t.runs += 1
        self.last_run_s = finished_s
        self.count = k + 1


@dataclass(frozen=True)
class TaskLoopResult:
    duration_s: float
    interrupted: bool
    deadlines_missed: int
    timing: dict[str, dict[str, float | int | None]] = field(default_factory=dict)  # task name -> TaskTiming.as_dict()


class TaskLoop:
    """Periodic tasks on one clock, with a backend advanced to each deadline: the loop every robot's run uses.

    A robot's own loop (Aiko's ``ControlLoop``: gait → references, feedback → safety checks) brings its tasks; the
    scheduling, the skipped deadlines and progress live here, once. The backend must be active:
    :func:`aiko.core.run.run` owns its lifecycle.
    """

    def __init__(
        self,
        backend: Backend[Any, Any, Any],
        recorder: Recorder,
        clock: Clock,
        tasks: list[PeriodicTask] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.backend = backend
        self.recorder = recorder
        self.clock = clock
        self.progress = progress
        self.tasks: list[PeriodicTask] = list(tasks or [])
        self._last_wake_usage: Usage | None = None  # at the loop's previous wake-up (`_run_due`)

    def add_task(self, task: PeriodicTask) -> None:
        """Extra periodic work on the run clock (motion capture, dashboards, …)."""
        self.tasks.append(task)

    def _report_missed(
        self, task: PeriodicTask, k: int, skipped: int, now_s: float, waited: dict[str, float | int]
    ) -> None:
        """One ``deadline_missed`` event for deadlines a late wake-up superseded (run late once, never replayed);
        ``waited``: how long the loop slept, and what the process did since the loop's previous wake-up: the previous
        wake-up's own work (its tasks, the backend) and the sleep (`aiko.core.usage`)."""
        task.missed += skipped
        task.timing.missed += skipped
        late_s = now_s - task.next_time()
        gap_s = now_s - task.last_run_s if task.last_run_s is not None else late_s
        log.warning(
            "%s: %d deadline(s) missed (%.3f s without a run); running t = %.3f s now, late",
            task.name,
            skipped,
            gap_s,
            k / task.rate_hz,
        )
        self.recorder.event(
            "deadline_missed",
            self.clock.now_ns(),
            task=task.name,
            count=skipped,
            gap_s=round(gap_s, 6),
            late_s=round(late_s, 6),
            run_t_s=k / task.rate_hz,
            resume_t_s=(k + 1) / task.rate_hz,
            **waited,
        )

    def _run_due(self, duration_s: float, advanced_s: float) -> tuple[float, float] | None:
        """Sleep until the next task is due, then run every task due by now (priority order), each once with its
        newest passed deadline. Returns (the grid time reached, the time the backend was advanced to), or None
        when no deadline of the run is left."""
        pending = [t for t in self.tasks if t.count <= t.last_index(duration_s)]
        if not pending:
            return None
        sleep_started_s = self.clock.now_s()
        self.clock.sleep_until(min(t.due_s() for t in pending))
        now_s = self.clock.now_s()
        since_last_wake = self._last_wake_usage
        # ~10 µs a wake-up; a simulated run's deadlines are never missed. A clock that does not say (one written to
        # the protocol, not derived from `Clock`) may wake late.
        if getattr(self.clock, "wakes_late", True):
            self._last_wake_usage = Usage.take()
        waited: dict[str, float | int] | None = None
        due = sorted((t for t in pending if t.due_s() <= now_s + _EPS_S), key=lambda t: t.priority)
        plan = []
        for task in due:
            k, skipped = task.newest_passed(now_s, duration_s)
            if skipped:
                if waited is None:
                    waited = {"slept_s": round(now_s - sleep_started_s, 6)}
                    if since_last_wake is not None and self._last_wake_usage is not None:
                        waited.update(self._last_wake_usage.since(since_last_wake))
                self._report_missed(task, k, skipped, now_s, waited)
            plan.append((task, k))
        t_reached = max(k / task.rate_hz for task, k in plan)
        advanced_s = max(advanced_s, t_reached)  # monotonic, also when a spaced-out run is behind another task
        self.backend.advance_to(advanced_s)
        for task, k in plan:
            started_s = self.clock.now_s()
            task.action(k / task.rate_hz)
            task.mark_run(k, started_s, self.clock.now_s())
        return t_reached, advanced_s

    def run(self, duration_s: float) -> TaskLoopResult:
        """Run the tasks for ``duration_s`` on an active backend. Only scheduling: the backend's lifecycle and the
        run's own events (start, stop, interruption) belong to the run's owner, :func:`aiko.core.run.run`."""
        last_progress = -math.inf
        advanced_s = -math.inf
        while (reached := self._run_due(duration_s, advanced_s)) is not None:
            t_reached, advanced_s = reached
            if self.progress is not None and t_reached - last_progress >= max(duration_s / 100, 0.1):
                self.progress(t_reached, duration_s)
                last_progress = t_reached
        self.backend.advance_to(max(duration_s, advanced_s))
        return self.result(interrupted=False)

    def result(self, interrupted: bool) -> TaskLoopResult:
        """Where the run got to (also after it was interrupted or stopped)."""
        return TaskLoopResult(
            duration_s=self.clock.now_s(),
            interrupted=interrupted,
            deadlines_missed=sum(task.missed for task in self.tasks),
            timing={task.name: task.timing.as_dict() for task in self.tasks},
        )
