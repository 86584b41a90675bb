"""The task loop: periodic tasks on one clock, the same for every robot, the emulated buses and every simulator.

Each task runs at integer multiples of its period (k·T from the run start), so deadlines are absolute and nothing
drifts. A deadline that has passed by more than the task's tolerance (a stalled process, SIGSTOP, a swapping
machine) is skipped, never replayed: the task resumes at its next future deadline and a ``deadline_missed`` event
records how many were skipped and the gap. Replaying them would send the missed references back to back.
Before the tasks due at time t run, the backend is advanced to t (simulators integrate; hardware ignores it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiko.core.clock import Clock
from aiko.core.interfaces import Backend, Recorder

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float], None]


@dataclass
class PeriodicTask:
    """``action(t_s)`` at t = k / rate_hz for k = 0, 1, … (priority orders tasks due at the same instant).

    k / rate (not k·period) so that a 10 Hz task fires at exactly the floats a user writes as ``k / 10``.
    """

    name: str
    rate_hz: float
    action: Callable[[float], None]
    priority: int = 50
    count: int = 0
    # a deadline later than this fraction of a period is skipped (the next one is then less than
    # (1 - late_fraction) periods away; running both would crowd them)
    late_fraction: float = 0.5
    missed: int = 0

    def next_time(self) -> float:
        return self.count / self.rate_hz

    def skip_missed(self, now_s: float) -> tuple[int, float] | None:
        """If the next deadline has passed by more than the tolerance, move to the next future deadline;
        returns (deadlines skipped, how late the first one was) or None."""
        late_s = now_s - self.next_time()
        if self.count == 0 or late_s <= self.late_fraction / self.rate_hz:
            # The first deadline always runs: nothing was sent before it, so nothing is replayed, and its reference
            # is the gait's start (a late start on a loaded machine used to drop t = 0 from the run). If the start
            # was late by periods, the next deadline is late too and is skipped from there.
            return None
        k = max(self.count + 1, math.ceil(now_s * self.rate_hz - 1e-9))
        skipped = k - self.count
        self.count = k
        self.missed += skipped
        return skipped, late_s


@dataclass(frozen=True)
class TaskLoopResult:
    duration_s: float
    interrupted: bool
    deadlines_missed: int


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

    def add_task(self, task: PeriodicTask) -> None:
        """Extra periodic work on the run clock (motion capture, dashboards, …)."""
        self.tasks.append(task)

    def _skip_missed(self, now_s: float) -> bool:
        """Skip (never replay) deadlines that a stall made late; one ``deadline_missed`` event per task."""
        moved = False
        for task in self.tasks:
            skipped = task.skip_missed(now_s)
            if skipped is None:
                continue
            moved = True
            count, late_s = skipped
            log.warning(
                "%s: %d deadline(s) missed (%.3f s late); resuming at t = %.3f s",
                task.name,
                count,
                late_s,
                task.next_time(),
            )
            self.recorder.event(
                "deadline_missed",
                self.clock.now_ns(),
                task=task.name,
                count=count,
                gap_s=round(late_s, 6),
                resume_t_s=task.next_time(),
            )
        return moved

    def run(self, duration_s: float) -> TaskLoopResult:
        """Run the tasks for ``duration_s`` on an active backend. Only scheduling: the backend's lifecycle and the
        run's own events (start, stop, interruption) belong to the run's owner, :func:`aiko.core.run.run`."""
        backend, clock = self.backend, self.clock
        last_progress = -math.inf
        while True:
            t_next = min(task.next_time() for task in self.tasks)
            if t_next > duration_s + 1e-12:
                break
            clock.sleep_until(t_next)
            if self._skip_missed(clock.now_s()):
                continue  # some deadlines were dropped: choose the next one again
            backend.advance_to(t_next)
            due = sorted((t for t in self.tasks if abs(t.next_time() - t_next) < 1e-12), key=lambda t: t.priority)
            for task in due:
                task.action(t_next)
                task.count += 1
            if self.progress is not None and t_next - last_progress >= max(duration_s / 100, 0.1):
                self.progress(t_next, duration_s)
                last_progress = t_next
        backend.advance_to(duration_s)
        return self.result(interrupted=False)

    def result(self, interrupted: bool) -> TaskLoopResult:
        """Where the run got to (also after it was interrupted or stopped)."""
        return TaskLoopResult(
            duration_s=self.clock.now_s(),
            interrupted=interrupted,
            deadlines_missed=sum(task.missed for task in self.tasks),
        )
