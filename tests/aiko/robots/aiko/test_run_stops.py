"""A run stops cleanly when a module reports ESTOP / WATCHDOG / fault (unless run.allow_degraded), and the loop
sends a late reference late, once, instead of replaying or skipping missed deadlines."""

from pathlib import Path

import numpy as np
import pytest

from aiko.cli import main
from aiko.core.errors import RunStopped
from aiko.core.loop import PeriodicTask
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.backends.hil import HilBackend
from aiko.robots.aiko.control_loop import ControlLoop
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointStatus
from aiko.robots.aiko.run import RunOptions, run_experiment
from firmware_protocol.dbc import ModuleState

REPO = Path(__file__).resolve().parents[4]
SIDEWINDING = REPO / "experiments" / "sidewinding.toml"


def _estop_at(backend: HilBackend, t_stop: float) -> PeriodicTask:
    def action(t_s: float) -> None:
        if abs(t_s - t_stop) < 1e-9:
            backend.emergency_stop()  # as if `aiko can estop` had been run from another shell

    return PeriodicTask("estop", 100.0, action, priority=90)


def _stopped_hil_run(backend: HilBackend, recorder: MemoryRecorder, duration_s: float, task: PeriodicTask, match: str):
    """Run sidewinding on `backend` with `task` beside the loop; the run must end in RunStopped matching `match`.
    Returns the run_stopped event's fields."""
    with pytest.raises(RunStopped, match=match):
        run_experiment(
            load_experiment(SIDEWINDING),
            recorder,
            RunOptions(backend="hil", duration_s=duration_s),
            backend=backend,
            extra_tasks=[task],
        )
    return next(fields for _, kind, fields in recorder.events if kind == "run_stopped")


def test_a_module_in_estop_stops_the_run_with_an_event():
    backend, recorder = HilBackend(), MemoryRecorder()
    every_module = r"joint modules \[1, 2, 3, 4, 5, 6, 7, 8, 9, 10\] reported ESTOP"
    stopped = _stopped_hil_run(backend, recorder, 2.0, _estop_at(backend, 0.55), every_module)
    assert "run_stopped" in recorder.event_kinds() and recorder.event_kinds()[-1] == "stop"
    assert stopped["modules"] == list(range(1, 11)) and stopped["reasons"] == ["estop_or_fault"]
    refs = [t for t, _ in recorder.channels["/references"]]
    assert len(refs) == 6  # t = 0.0 .. 0.5: nothing after the stop
    assert (backend.emulator.state == ModuleState.ESTOP).all()


def test_a_degraded_run_is_allowed_when_the_experiment_says_so():
    experiment = load_experiment(SIDEWINDING, {"run.allow_degraded": True})
    backend, recorder = HilBackend(), MemoryRecorder()
    run_experiment(
        experiment,
        recorder,
        RunOptions(backend="hil", duration_s=1.0),
        backend=backend,
        extra_tasks=[_estop_at(backend, 0.55)],
    )
    assert "run_stopped" not in recorder.event_kinds()
    assert len(recorder.channels["/references"]) == 11


class _StatusBackend(JointInterface):
    """A backend whose modules report a given status from t_bad on."""

    def configure(self, ctx):
        pass

    def __init__(self, status_after: int, t_bad: float, n: int = 3) -> None:
        self.status_after, self.t_bad, self.n = status_after, t_bad, n
        self.t = 0.0
        self.writes: list[float] = []
        self.deactivated = 0

    def activate(self):
        pass

    def advance_to(self, t_s):
        self.t = t_s

    def read(self):
        status = np.full(self.n, self.status_after if self.t >= self.t_bad else int(JointStatus.ENABLED))
        z = np.zeros(self.n)
        return JointFeedback(self.t, z, z, z, z, status, z, z)

    def write(self, refs):
        self.writes.append(refs.t_s)

    def deactivate(self):
        self.deactivated += 1

    def link_poses(self):
        return None

    def summary(self):
        return {}


@pytest.mark.parametrize("status", [int(JointStatus.WATCHDOG), int(JointStatus.FAULT)])
def test_watchdog_or_fault_stops_the_loop_and_deactivates(status):
    from aiko.core.clock import SimulatedClock

    experiment = load_experiment(SIDEWINDING)
    backend = _StatusBackend(status, 0.3)
    recorder = MemoryRecorder()
    loop = ControlLoop(
        experiment.gait, backend, recorder, SimulatedClock(), reference_rate_hz=10.0, feedback_rate_hz=100.0
    )
    with pytest.raises(RunStopped):
        loop.run(1.0)
    assert backend.writes == pytest.approx([0.0, 0.1, 0.2]) and backend.deactivated >= 1
    assert recorder.event_kinds()[-2:] == ["run_stopped", "stop"]


def test_cli_exits_1_with_one_line_when_the_run_is_stopped(monkeypatch, capsys, tmp_path):
    import aiko.commands.run as run_command

    def stopped(*args, **kwargs):
        raise RunStopped("joint modules [3] reported WATCHDOG at t = 1.000 s; run stopped")

    monkeypatch.setattr("aiko.robots.aiko.run.record_run", stopped)
    argv = ["run", str(SIDEWINDING), "--backend", "hil", "--out", str(tmp_path / "x.mcap"), "--no-report"]
    assert run_command is not None
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == "aiko: joint modules [3] reported WATCHDOG at t = 1.000 s; run stopped\n"


# ------------------------------------------------------------------------------- missed deadlines
class _StallingClock:
    """Simulated time that jumps over [stall_at, stall_to) once, as a SIGSTOP/SIGCONT does to the wall clock."""

    def __init__(self, stall_at: float, stall_to: float) -> None:
        from aiko.core.clock import SimulatedClock

        self._inner = SimulatedClock()
        self.start_ns = self._inner.start_ns
        self.stall_at, self.stall_to, self.stalled = stall_at, stall_to, False

    def now_s(self) -> float:
        return self._inner.now_s()

    def now_ns(self) -> int:
        return self._inner.now_ns()

    def stamp_ns(self, t_s: float) -> int:
        return self._inner.stamp_ns(t_s)

    def sleep_until(self, t_s: float) -> None:
        if not self.stalled and t_s >= self.stall_at:
            self.stalled = True
            t_s = self.stall_to
        self._inner.sleep_until(t_s)


def test_after_a_stall_the_newest_reference_is_sent_once_then_the_grid():
    """Aiko's control loop over the spine's deadline rule (tests/aiko/core/test_deadline_rule.py has the rule
    itself): a 1.53 s stall from just before t = 0.5 sends t = 2.0 at 2.03 once, then 2.1, 2.2, ...; nothing
    replayed, nothing skipped into silence."""
    experiment = load_experiment(SIDEWINDING)
    backend = _StatusBackend(int(JointStatus.ENABLED), 99.0)
    recorder = MemoryRecorder()
    clock = _StallingClock(0.5, 2.03)  # 1.53 s stalled from just before the t = 0.5 deadline
    loop = ControlLoop(experiment.gait, backend, recorder, clock, reference_rate_hz=10.0, feedback_rate_hz=100.0)
    result = loop.run(3.0)
    sent = np.array([t for t, _ in recorder.channels["/references"]], dtype=float) * 1e-9
    sent -= clock.start_ns * 1e-9
    assert np.all(np.diff(sent) >= 0.05 - 1e-9)  # no burst: never two references within half a period
    assert np.diff(sent).max() == pytest.approx(1.63)  # the stall plus one period, no more
    assert backend.writes == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 2.0, *[k / 10 for k in range(21, 31)]])
    missed = {f["task"]: f for _, kind, f in recorder.events if kind == "deadline_missed"}
    assert missed["references"]["count"] == 15 and missed["references"]["gap_s"] == pytest.approx(1.63)
    assert missed["references"]["run_t_s"] == 2.0 and missed["references"]["resume_t_s"] == pytest.approx(2.1)
    assert result.deadlines_missed == missed["references"]["count"] + missed["feedback"]["count"]
    assert result.task_timing["references"]["max_gap_s"] == pytest.approx(1.63)


def test_a_slightly_late_reference_is_sent_not_skipped():
    """11 ms late (more than the 10 % that used to be skipped into a 0.2 s silence): sent, late."""
    from aiko.core.loop import PeriodicTask

    task = PeriodicTask("x", 10.0, lambda t: None)
    task.mark_run(4, 0.4)
    assert task.due_s() == pytest.approx(0.5)
    assert task.newest_passed(0.5 + 0.011, 3.0) == (5, 0)  # deadline 5 runs, nothing superseded
    assert task.newest_passed(0.5 + 0.099, 3.0) == (5, 0)
    assert task.newest_passed(0.5 + 0.101, 3.0) == (6, 1)  # a whole period late: the newest one, one superseded


def test_slew_limit_counts_the_time_that_really_passed():
    from aiko.devices.can.driver import CanDriverSettings, CanJointDriver

    class _NullBus:
        channel_info = "null"

        def send(self, msg, timeout=None):
            pass

    now = {"t": 1.0}
    settings = CanDriverSettings(nodes=(1,), limit_h_rad=1.0, limit_v_rad=1.0, slew_limit_rad_s=1.0)
    driver = CanJointDriver(_NullBus(), settings, lambda: now["t"], use_notifier=False)
    driver.shaper.reset(np.zeros((1, 2)), 1.0)
    target = np.full((1, 2), 0.5)
    # a stalled loop asking for the references of t = 1.1 .. 1.5 at one wall instant: no motion allowed
    for t_nominal in (1.1, 1.2, 1.3, 1.4, 1.5):
        driver.write(t_nominal, target, np.zeros((1, 2)))
    assert np.all(driver.shaper._previous == 0.0)
    now["t"] = 1.1
    driver.write(1.6, target, np.zeros((1, 2)))
    np.testing.assert_allclose(driver.shaper._previous, 0.1)  # 1 rad/s x 0.1 s of wall time


def test_a_module_whose_feedback_goes_stale_stops_the_run():
    backend, recorder = HilBackend(), MemoryRecorder()

    def silence(t_s: float) -> None:
        if abs(t_s - 0.3) < 1e-9:  # module 4 stops reporting (as if unplugged)
            backend.emulator.feedback_rate_hz[3] = 0.0

    unplug = PeriodicTask("unplug", 100.0, silence, priority=90)
    stopped = _stopped_hil_run(backend, recorder, 3.0, unplug, r"joint modules \[4\] sent no feedback")
    assert stopped["reasons"] == ["feedback_stale"] and stopped["modules"] == [4]
    assert 0.3 + 0.5 < stopped["t_s"] <= 0.3 + 0.5 + 0.02  # can.feedback_timeout_s = 0.5 s after the last frame


def test_a_module_disabled_by_a_stray_command_stops_the_run():
    import can

    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import Command, MessageKind

    backend, recorder = HilBackend(), MemoryRecorder()

    def stray_disable(t_s: float) -> None:
        if abs(t_s - 0.5) < 1e-9:
            intruder = can.Bus(interface="virtual", channel=backend.bus.channel_id)
            frame_id, data = default_codec().encode(
                MessageKind.COMMAND, 0, {"Command": int(Command.DISABLE), "TargetNode": 3}
            )
            intruder.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
            intruder.shutdown()

    intruder = PeriodicTask("intruder", 100.0, stray_disable, priority=90)
    stopped = _stopped_hil_run(
        backend, recorder, 2.0, intruder, r"joint modules \[3\] were disabled by something other than this run"
    )
    assert stopped["reasons"] == ["disabled"] and 0.5 < stopped["t_s"] <= 0.55
    assert "module_disabled" in recorder.event_kinds()
