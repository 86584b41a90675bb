"""The run owner: the backend goes configure → activate → deactivate → close exactly once on every exit path, the
loop only schedules, and the run's events bracket the loop."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from aiko.core.clock import SimulatedClock
from aiko.core.errors import RunStopped
from aiko.core.interfaces import Backend
from aiko.core.loop import PeriodicTask
from aiko.core.recording import MemoryRecorder
from aiko.core.run import BackendSession, RunPlan, run

PHASES = ("configure", "activate", "deactivate", "close")


class Boom(Exception):
    pass


class CountingBackend(Backend[Any, Any, Any]):
    """Counts every lifecycle call; raises ``exc`` in the phase named ``fail_in``."""

    name = "counting"

    def __init__(self, fail_in: str | None = None, exc: BaseException | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.order: list[str] = []
        self.fail_in, self.exc = fail_in, exc or Boom(f"{fail_in} failed")
        self.writes: list[float] = []

    def _phase(self, name: str) -> None:
        self.calls[name] += 1
        self.order.append(name)
        if name == self.fail_in:
            raise self.exc

    def configure(self, ctx: Any) -> None:
        self._phase("configure")

    def activate(self) -> None:
        self._phase("activate")

    def deactivate(self) -> None:
        self._phase("deactivate")

    def close(self) -> None:
        self._phase("close")

    def write(self, command: Any) -> None:
        self.writes.append(command)

    def read(self) -> Any:
        return None

    def emergency_stop(self) -> None:
        self._phase("emergency_stop")


def _plan(backend: CountingBackend, recorder: MemoryRecorder, action=None, **hooks: Any) -> RunPlan[Any]:
    def step(t_s: float) -> None:
        if action is not None:
            action(t_s)
        backend.write(t_s)

    return RunPlan(
        backend=backend,
        context=None,
        recorder=recorder,
        clock=SimulatedClock(),
        duration_s=1.0,
        tasks=[PeriodicTask("step", 10.0, step)],
        **hooks,
    )


def test_a_run_moves_the_backend_through_each_phase_once_in_order():
    backend, recorder = CountingBackend(), MemoryRecorder()
    result = run(_plan(backend, recorder))
    assert backend.order == list(PHASES)
    assert backend.writes == pytest.approx([k / 10 for k in range(11)])
    assert recorder.event_kinds() == ["start", "stop"]
    assert not result.interrupted and result.duration_s == 1.0


@pytest.mark.parametrize(
    ("fail_in", "expected"),
    [
        ("configure", ["configure", "close"]),  # never activated: nothing to deactivate, but what it opened is closed
        ("activate", ["configure", "activate", "deactivate", "close"]),  # a half-enabled robot is disabled
        ("deactivate", ["configure", "activate", "deactivate", "close"]),  # a failing DISABLE still closes
        ("close", ["configure", "activate", "deactivate", "close"]),
    ],
)
def test_an_exception_in_a_phase_still_ends_every_phase_begun_exactly_once(fail_in, expected):
    backend, recorder = CountingBackend(fail_in), MemoryRecorder()
    with pytest.raises(Boom, match=f"{fail_in} failed"):
        run(_plan(backend, recorder))
    assert backend.order == expected
    assert all(n == 1 for n in backend.calls.values())


def _raise(exc: BaseException, at_s: float = 0.5):
    def action(t_s: float) -> None:
        if t_s >= at_s:
            raise exc

    return action


def test_an_exception_in_the_loop_is_recorded_then_raised_after_deactivate_and_close():
    backend, recorder = CountingBackend(), MemoryRecorder()
    with pytest.raises(Boom, match="gait blew up"):
        run(_plan(backend, recorder, _raise(Boom("gait blew up"))))
    assert backend.order == list(PHASES)
    assert recorder.event_kinds() == ["start", "error", "stop"]
    assert "gait blew up" in recorder.events[1][2]["message"]


@pytest.mark.parametrize("hook", ["prepare", "on_start", "before_close"])
def test_an_exception_in_a_hook_still_ends_every_phase_begun_exactly_once(hook):
    def fail(*args: Any) -> None:
        raise Boom(hook)

    backend, recorder = CountingBackend(), MemoryRecorder()
    with pytest.raises(Boom, match=hook):
        run(_plan(backend, recorder, **{hook: fail}))
    expected = ["configure", "close"] if hook == "prepare" else list(PHASES)
    assert backend.order == expected


def test_ctrl_c_in_the_loop_ends_the_run_cleanly_and_says_so():
    backend, recorder = CountingBackend(), MemoryRecorder()
    result = run(_plan(backend, recorder, _raise(KeyboardInterrupt())))
    assert result.interrupted and result.duration_s == 0.5
    assert backend.order == list(PHASES)
    assert recorder.event_kinds() == ["start", "interrupted", "stop"]


def test_ctrl_c_while_activating_disables_and_closes_then_propagates():
    """Waiting for the modules to confirm ENABLE is where a person presses Ctrl-C: the run is not started, the
    robot is disabled and the bus closed."""
    backend, recorder = CountingBackend("activate", KeyboardInterrupt()), MemoryRecorder()
    with pytest.raises(KeyboardInterrupt):
        run(_plan(backend, recorder))
    assert backend.order == list(PHASES)
    assert recorder.event_kinds() == []


def test_an_emergency_stop_ends_the_run_with_each_phase_once():
    """A module reporting ESTOP stops the run (RunStopped); the backend's own fast stop, called by the task that
    saw it, does not make the run owner deactivate or close twice."""
    backend, recorder = CountingBackend(), MemoryRecorder()

    def estop(t_s: float) -> None:
        if t_s >= 0.3:
            backend.emergency_stop()
            raise RunStopped("joint modules [3] reported ESTOP", {"modules": [3]})

    with pytest.raises(RunStopped):
        run(_plan(backend, recorder, estop))
    assert backend.order == ["configure", "activate", "emergency_stop", "deactivate", "close"]
    assert recorder.event_kinds() == ["start", "run_stopped", "stop"]
    assert recorder.events[1][2]["modules"] == [3]


def test_the_hooks_run_at_their_points_of_the_lifecycle():
    backend, recorder = CountingBackend(), MemoryRecorder()
    seen: list[str] = []
    later_clock = SimulatedClock()

    def prepare() -> SimulatedClock:
        seen.append(f"prepare after {backend.order[-1]}")
        return later_clock

    plan = _plan(
        backend,
        recorder,
        prepare=prepare,
        on_start=lambda: seen.append(f"on_start after {backend.order[-1]}, {recorder.event_kinds()[-1]}"),
        before_close=lambda result: seen.append(f"before_close after {backend.order[-1]}"),
    )
    run(plan)
    assert seen == ["prepare after configure", "on_start after activate, start", "before_close after deactivate"]
    assert later_clock.now_s() == 1.0 and plan.clock.now_s() == 0.0  # the loop ran on the clock prepare returned


def test_a_session_ends_only_what_began_and_each_once():
    backend = CountingBackend()
    with BackendSession(backend) as session:
        session.configure(None)
        session.activate()
        session.deactivate()  # early (a stop confirmed at once): the exit does not repeat it
    assert backend.order == list(PHASES) and session.transitions == list(PHASES)
    with pytest.raises(RuntimeError, match="before it was configured"):
        BackendSession(CountingBackend()).activate()


def test_a_session_over_a_backend_its_caller_configured_leaves_closing_to_the_caller():
    backend = CountingBackend()
    with BackendSession(backend, configured_by_caller=True) as session:
        session.activate()
    assert backend.order == ["activate", "deactivate"]
