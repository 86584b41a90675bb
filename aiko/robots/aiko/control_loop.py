"""Aiko's control loop: the gait sampled at the reference rate, joint feedback read at the feedback rate and
checked for modules that are no longer safe to drive, everything recorded. It is a set of tasks for the spine's
:class:`~aiko.core.loop.TaskLoop` with two hooks for the run's owner (:func:`aiko.core.run.run`): ``start`` (where
the robot starts) and ``result`` (where it ended, the backend's summary); it moves no backend through its lifecycle.

At one instant, feedback is read before references are computed, so a reactive gait sees the freshest state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.core.clock import Clock
from aiko.core.errors import RunStopped
from aiko.core.interfaces import Recorder
from aiko.core.loop import PeriodicTask, ProgressCallback, TaskLoopResult
from aiko.core.run import BackendSession, run_active
from aiko.robots.aiko.joints import (
    FEEDBACK_CHANNEL,
    REFERENCES_CHANNEL,
    Gait,
    JointFeedback,
    JointInterface,
    JointStatus,
)


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
    # per task: runs, missed, max gap, min spacing (aiko.core.loop.TaskTiming)
    task_timing: dict[str, dict[str, float | int | None]] = field(default_factory=dict)


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
        self.allow_degraded = allow_degraded
        self.latest_feedback: JointFeedback | None = None
        self.progress = progress
        self._tasks: list[PeriodicTask] = [
            PeriodicTask("feedback", feedback_rate_hz, self._read_feedback, priority=10),
            # late is sent late, once (the newest reference), never skipped into silence nor replayed in a burst:
            # the spine's deadline rule (aiko.core.loop)
            PeriodicTask("references", reference_rate_hz, self._send_references, priority=20),
        ]
        self._start_point: list[float] | None = None
        self._reference_updates = 0
        self._feedback_reads = 0

    @property
    def tasks(self) -> list[PeriodicTask]:
        return self._tasks

    def add_task(self, task: PeriodicTask) -> None:
        """Extra periodic work on the run clock (motion capture, dashboards, an operator's commands, …)."""
        self._tasks.append(task)

    def _read_feedback(self, t_s: float) -> None:
        feedback = self.backend.read()
        self.latest_feedback = feedback
        self._feedback_reads += 1
        self.recorder.record(FEEDBACK_CHANNEL, self.clock.now_ns(), feedback.as_payload())
        if not self.allow_degraded:
            self._stop_if_unsafe(feedback)

    _UNSAFE = JointStatus.FAULT | JointStatus.WATCHDOG  # the firmware reports an e-stop as FAULT (+ EStop)

    def _stop_if_unsafe(self, feedback: JointFeedback) -> None:
        """A module in ESTOP, WATCHDOG or fault has cut its drive: streaming on would move the others alone. A
        module whose feedback went stale may be in any of those, and one disabled by someone else is not driven:
        the same. What a module reports itself comes first: after a stall of this process, a module that said
        ESTOP is stopped as ESTOP, not as stale."""
        status = np.asarray(feedback.status, dtype=np.int64)
        bad = np.flatnonzero(status & int(self._UNSAFE))
        if bad.size:
            modules = [int(i) + 1 for i in bad]  # joint modules, 1-based in chain order
            reasons = sorted({"watchdog" if status[i] & JointStatus.WATCHDOG else "estop_or_fault" for i in bad})
            raise RunStopped(
                f"joint modules {modules} reported {' / '.join(r.upper().replace('_OR_', ' or ') for r in reasons)} "
                f"at t = {feedback.t_s:.3f} s; run stopped, references no longer sent "
                "(set run.allow_degraded = true to keep running)",
                {"modules": modules, "reasons": reasons, "t_s": float(feedback.t_s)},
            )
        silent = self.backend.stale_modules()
        if silent:
            raise RunStopped(
                f"joint modules {silent} sent no feedback for longer than the feedback timeout at "
                f"t = {feedback.t_s:.3f} s: their state is unknown; run stopped, references no longer sent "
                "(set run.allow_degraded = true to keep running)",
                {"modules": list(silent), "reasons": ["feedback_stale"], "t_s": float(feedback.t_s)},
            )
        lost = self.backend.disabled_modules()
        if lost:
            raise RunStopped(
                f"joint modules {lost} were disabled by something other than this run at t = {feedback.t_s:.3f} s; "
                "run stopped, references no longer sent (set run.allow_degraded = true to keep running)",
                {"modules": list(lost), "reasons": ["disabled"], "t_s": float(feedback.t_s)},
            )

    def _send_references(self, t_s: float) -> None:
        if not self.backend.streaming():
            return
        refs = self.gait.references(t_s, self.latest_feedback)
        self.backend.write(refs)
        self._reference_updates += 1
        self.recorder.record(REFERENCES_CHANNEL, self.clock.now_ns(), refs.as_payload())

    def _tracked_point(self) -> list[float] | None:
        poses = self.backend.link_poses()
        if poses is None:
            return None
        positions = np.asarray(poses[0])
        index = min(max(self.tracked_link - 1, 0), len(positions) - 1)
        return [float(x) for x in positions[index]]

    def start(self) -> None:
        """Right after activation (the run owner's ``on_start``): where the tracked point starts."""
        self._start_point = self._tracked_point()

    def result(self, loop: TaskLoopResult) -> LoopResult:
        """After deactivation, before the backend is closed (the run owner's ``before_close``): the run's result
        with where the tracked point ended and the backend's summary."""
        return LoopResult(
            duration_s=loop.duration_s,
            reference_updates=self._reference_updates,
            feedback_reads=self._feedback_reads,
            tracked_point_start_m=self._start_point,
            tracked_point_end_m=self._tracked_point(),
            backend_summary=self.backend.summary(),
            interrupted=loop.interrupted,
            deadlines_missed=loop.deadlines_missed,
            task_timing=loop.timing,
        )

    def run(self, duration_s: float) -> LoopResult:
        """The active part of a run on a backend the caller configured and will close (tests, tools that inspect
        a backend around a run): activated here and deactivated on every exit path, including Ctrl-C. A run of an
        experiment goes through :func:`aiko.robots.aiko.run.run_experiment` instead, which configures and closes."""
        with BackendSession(self.backend, configured_by_caller=True) as session:
            loop = run_active(
                session, self.recorder, self.clock, self.tasks, duration_s, progress=self.progress, on_start=self.start
            )
            return self.result(loop)
