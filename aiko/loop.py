"""The control loop: periodic tasks on one clock, the same for the robot, the emulated bus and every simulator.

Each task runs at integer multiples of its period (k·T from the run start), so deadlines are absolute and nothing
drifts. A deadline that has passed by more than the task's tolerance (a stalled process, SIGSTOP, a swapping
machine) is skipped, never replayed: the task resumes at its next future deadline and a ``deadline_missed`` event
records how many were skipped and the gap. Replaying them would send the missed references back to back.
Before the tasks due at time t run, the backend is advanced to t (simulators integrate; hardware ignores it).
At one instant, feedback is read before references are computed, so a reactive gait sees the freshest state.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.clock import Clock
from aiko.errors import RunStopped
from aiko.gait import Gait
from aiko.interfaces import JointFeedback, JointInterface, JointStatus, Recorder

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


@dataclass
class LoopResult:
    duration_s: float
    reference_updates: int
    feedback_reads: int
    tracked_point_start_m: list[float] | None
    tracked_point_end_m: list[float] | None
    backend_summary: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    deadlines_missed: int = 0


class ControlLoop:
    """Samples the gait at the reference rate, writes references, reads feedback and records everything."""

    def __init__(
        self,
        gait: Gait,
        backend: JointInterface,
        recorder: Recorder,
        clock: Clock,
        *,
        reference_rate_hz: float,
        feedback_rate_hz: float,
        tracked_link: int = 6,
        progress: ProgressCallback | None = None,
        allow_degraded: bool = False,
    ) -> None:
        self.gait = gait
        self.backend = backend
        self.recorder = recorder
        self.clock = clock
        self.tracked_link = tracked_link
        self.progress = progress
        self.allow_degraded = allow_degraded
        self.latest_feedback: JointFeedback | None = None
        self.tasks = [
            PeriodicTask("feedback", feedback_rate_hz, self._read_feedback, priority=10),
            # a reference more than 10 % of a period late is skipped: consecutive references are never closer
            # than 0.9 periods in wall time, and after a stall the stream resumes on its own grid
            PeriodicTask("references", reference_rate_hz, self._send_references, priority=20, late_fraction=0.1),
        ]
        self._reference_updates = 0
        self._feedback_reads = 0

    def add_task(self, task: PeriodicTask) -> None:
        """Extra periodic work on the run clock (motion capture, dashboards, …)."""
        self.tasks.append(task)

    def _read_feedback(self, t_s: float) -> None:
        feedback = self.backend.read()
        self.latest_feedback = feedback
        self._feedback_reads += 1
        self.recorder.record("/joint_feedback", self.clock.now_ns(), feedback.as_payload())
        if not self.allow_degraded:
            self._stop_if_unsafe(feedback)

    _UNSAFE = JointStatus.FAULT | JointStatus.WATCHDOG  # the firmware reports an e-stop as FAULT (+ EStop)

    def _stop_if_unsafe(self, feedback: JointFeedback) -> None:
        """A module in ESTOP, WATCHDOG or fault has cut its drive: streaming on would move the others alone. A
        module whose feedback went stale (backends that track it) may be in any of those: the same."""
        stale = getattr(self.backend, "stale_modules", None)
        silent = stale() if callable(stale) else []
        if silent:
            raise RunStopped(
                f"joint modules {silent} sent no feedback for longer than the feedback timeout at "
                f"t = {feedback.t_s:.3f} s: their state is unknown; run stopped, references no longer sent "
                "(set run.allow_degraded = true to keep running)",
                {"modules": list(silent), "reasons": ["feedback_stale"], "t_s": float(feedback.t_s)},
            )
        disabled = getattr(self.backend, "disabled_modules", None)
        lost = disabled() if callable(disabled) else []
        if lost:
            raise RunStopped(
                f"joint modules {lost} were disabled by something other than this run at t = {feedback.t_s:.3f} s; "
                "run stopped, references no longer sent (set run.allow_degraded = true to keep running)",
                {"modules": list(lost), "reasons": ["disabled"], "t_s": float(feedback.t_s)},
            )
        status = np.asarray(feedback.status, dtype=np.int64)
        bad = np.flatnonzero(status & int(self._UNSAFE))
        if bad.size == 0:
            return
        modules = [int(i) + 1 for i in bad]  # joint modules, 1-based in chain order
        reasons = sorted({"watchdog" if status[i] & JointStatus.WATCHDOG else "estop_or_fault" for i in bad})
        raise RunStopped(
            f"joint modules {modules} reported {' / '.join(r.upper().replace('_OR_', ' or ') for r in reasons)} "
            f"at t = {feedback.t_s:.3f} s; run stopped, references no longer sent "
            "(set run.allow_degraded = true to keep running)",
            {"modules": modules, "reasons": reasons, "t_s": float(feedback.t_s)},
        )

    def _send_references(self, t_s: float) -> None:
        refs = self.gait.references(t_s, self.latest_feedback)
        self.backend.write(refs)
        self._reference_updates += 1
        self.recorder.record("/references", self.clock.now_ns(), refs.as_payload())

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

    def _tracked_point(self) -> list[float] | None:
        poses = self.backend.link_poses()
        if poses is None:
            return None
        positions = np.asarray(poses[0])
        index = min(max(self.tracked_link - 1, 0), len(positions) - 1)
        return [float(x) for x in positions[index]]

    def run(self, duration_s: float) -> LoopResult:
        """Run for ``duration_s``. The backend is deactivated on every exit path, including Ctrl-C."""
        backend, clock = self.backend, self.clock
        interrupted = False
        start_point: list[float] | None = None
        backend.activate()
        self.recorder.event("start", clock.now_ns(), duration_s=duration_s)
        try:
            start_point = self._tracked_point()
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
        except RunStopped as exc:
            log.error("%s", exc)
            self.recorder.event("run_stopped", clock.now_ns(), message=str(exc), **exc.fields)
            raise
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted at t = %.3f s; deactivating", clock.now_s())
            self.recorder.event("interrupted", clock.now_ns())
        except BaseException as exc:
            self.recorder.event("error", clock.now_ns(), message=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            backend.deactivate()
            self.recorder.event("stop", clock.now_ns())
        end_point = self._tracked_point()
        return LoopResult(
            duration_s=clock.now_s(),
            reference_updates=self._reference_updates,
            feedback_reads=self._feedback_reads,
            tracked_point_start_m=start_point,
            tracked_point_end_m=end_point,
            backend_summary=backend.summary(),
            interrupted=interrupted,
            deadlines_missed=sum(task.missed for task in self.tasks),
        )
