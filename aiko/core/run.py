"""The one owner of a run: a plan goes in, the backend is moved through its lifecycle exactly once, the loop runs in
between. The only place in the package where a backend changes state.

::

    robots/<robot>/run.py   plans the run (experiment → backend, context, recorder, tasks)
    core/run.py: run(plan)
        with BackendSession(plan.backend) as session:   # close, always; deactivate, if activation began
            session.configure(plan.context)
            plan.prepare()                              # what needs the configured backend (sensors, the clock)
            run_active(session, …)                      # activate, "start", the loop, "stop", deactivate
            plan.before_close(result)                   # the backend's final state (summary, poses)

The model is ros2_control's resource manager (it alone moves hardware components through their lifecycle states)
and python-can's bus (one idempotent ``shutdown()`` behind its context manager). The task loop
(:mod:`aiko.core.loop`) only schedules; what a run records about itself (``start``, ``stop``, ``interrupted``,
``run_stopped``, ``error``) is recorded here, around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic

from aiko.core.clock import Clock
from aiko.core.errors import RunStopped
from aiko.core.interfaces import Backend, ContextT, Recorder
from aiko.core.loop import PeriodicTask, ProgressCallback, TaskLoop, TaskLoopResult

log = logging.getLogger(__name__)

__all__ = ["BackendSession", "RunPlan", "run", "run_active"]


class BackendSession(Generic[ContextT]):
    """A backend behind a context manager: ``configure`` → ``activate`` → ``deactivate`` → ``close``, each at most
    once, and on every way out of the ``with`` block (a return, an exception in any phase, Ctrl-C) the backend is
    deactivated if its activation began and closed if its configuration began.

    ``transitions`` lists the calls made, in order (what the tests count). A second call of a phase is a no-op, so a
    caller that deactivates early (a stop it must confirm at once) cannot make the exit path deactivate again.

    ``configured_by_caller``: a backend its caller configured by hand and will close itself (tests and tools that
    inspect a backend around a run): the session starts at ``activate`` and its exit only deactivates.
    """

    def __init__(self, backend: Backend[ContextT, Any, Any], *, configured_by_caller: bool = False) -> None:
        self.backend = backend
        self.transitions: list[str] = []
        self._owns_close = not configured_by_caller
        if configured_by_caller:
            self.transitions.append("configure")

    def _enter(self, phase: str) -> bool:
        if phase in self.transitions:
            return False
        self.transitions.append(phase)
        return True

    def configure(self, ctx: ContextT) -> None:
        if self._enter("configure"):
            self.backend.configure(ctx)

    def activate(self) -> None:
        if "configure" not in self.transitions:
            raise RuntimeError(f"{self.backend.name} backend activated before it was configured")
        if self._enter("activate"):
            self.backend.activate()

    def deactivate(self) -> None:
        if "activate" in self.transitions and self._enter("deactivate"):
            self.backend.deactivate()

    def close(self) -> None:
        if self._owns_close and "configure" in self.transitions and self._enter("close"):
            self.backend.close()

    def __enter__(self) -> BackendSession[ContextT]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.deactivate()
        finally:
            self.close()


@dataclass
class RunPlan(Generic[ContextT]):
    """Everything a run is: the backend and what it is configured with, where records go, the clock, the periodic
    tasks (a robot's own: gait → references, feedback, motion capture, sensors; an operator's command reader is
    one more task) and how long it lasts. The hooks are for what a robot must do at fixed points of the lifecycle:

    ``prepare`` after configure, before activate (open what needs the configured backend; may return the clock the
    run goes on when the backend keeps the time, e.g. a robot controller's); ``on_start`` right after activation and
    the ``start`` event, before the first deadline; ``before_close`` after deactivation, before the backend is
    closed (read its final state: the summary, where the robot ended)."""

    backend: Backend[ContextT, Any, Any]
    context: ContextT
    recorder: Recorder
    clock: Clock
    duration_s: float
    tasks: Sequence[PeriodicTask] = field(default_factory=list)
    progress: ProgressCallback | None = None
    prepare: Callable[[], Clock | None] | None = None
    on_start: Callable[[], None] | None = None
    before_close: Callable[[TaskLoopResult], None] | None = None


def run(plan: RunPlan[Any]) -> TaskLoopResult:
    """Run ``plan``: configure, prepare, activate, the task loop, deactivate, ``before_close``, close.

    Returns the loop's result (``interrupted`` after Ctrl-C, which ends a run cleanly); any other exception is
    raised after the backend has been deactivated and closed."""
    with BackendSession(plan.backend) as session:
        session.configure(plan.context)
        clock = (plan.prepare() if plan.prepare is not None else None) or plan.clock
        result = run_active(
            session, plan.recorder, clock, plan.tasks, plan.duration_s, progress=plan.progress, on_start=plan.on_start
        )
        if plan.before_close is not None:
            plan.before_close(result)
    return result


def run_active(
    session: BackendSession[Any],
    recorder: Recorder,
    clock: Clock,
    tasks: Sequence[PeriodicTask],
    duration_s: float,
    *,
    progress: ProgressCallback | None = None,
    on_start: Callable[[], None] | None = None,
) -> TaskLoopResult:
    """The active part of a run on a configured session: activate, record ``start``, the loop for ``duration_s``,
    and on every way out deactivate and record ``stop``. Ctrl-C ends the run (``interrupted``); a
    :class:`RunStopped` (a module in e-stop, watchdog or fault) and any other error are recorded, then raised."""
    loop = TaskLoop(session.backend, recorder, clock, list(tasks), progress=progress)
    session.activate()
    recorder.event("start", clock.now_ns(), duration_s=duration_s)
    interrupted = False
    try:
        if on_start is not None:
            on_start()
        loop.run(duration_s)
    except RunStopped as exc:
        log.error("%s", exc)
        recorder.event("run_stopped", clock.now_ns(), message=str(exc), **exc.fields)
        raise
    except KeyboardInterrupt:
        interrupted = True
        log.warning("interrupted at t = %.3f s; deactivating", clock.now_s())
        recorder.event("interrupted", clock.now_ns())
    except BaseException as exc:
        recorder.event("error", clock.now_ns(), message=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        try:
            session.deactivate()
        finally:
            recorder.event("stop", clock.now_ns())
    return loop.result(interrupted)
