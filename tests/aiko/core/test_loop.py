"""The control loop: references at the reference rate on absolute deadlines, feedback first, always deactivated."""

import numpy as np
import pytest

from aiko.core.clock import SimulatedClock
from aiko.core.loop import PeriodicTask
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.backends.kinematic import KinematicBackend
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.joints import JointStatus
from aiko.robots.aiko.run import RunOptions, run_experiment


@pytest.fixture
def sidewinding(experiments_dir):
    return load_experiment(experiments_dir / "sidewinding.toml", {"run.duration_s": 2.0})


def test_references_are_the_gait_sampled_at_the_reference_rate(sidewinding):
    recorder = MemoryRecorder()
    clock = SimulatedClock()
    result, summary = run_experiment(sidewinding, recorder, clock=clock)
    refs = recorder.channels["/references"]
    assert len(refs) == 21 and result.reference_updates == 21
    for k, (t_ns, payload) in enumerate(refs):
        assert t_ns == clock.stamp_ns(k / 10.0)
        np.testing.assert_array_equal(payload["angle_h_rad"], sidewinding.gait.references(k / 10.0).angle_h_rad)
    assert len(recorder.channels["/joint_feedback"]) == 201
    assert recorder.event_kinds() == ["start", "stop"]
    assert summary["duration_s"] == 2.0 and summary["backend"] == "kinematic"


def test_kinematic_backend_tracks_held_references_with_a_first_order_lag(sidewinding):
    recorder = MemoryRecorder()
    run_experiment(sidewinding, recorder, RunOptions(duration_s=1.0))
    t_ns0 = recorder.channels["/references"][0][0]
    feedback = {round((t - t_ns0) * 1e-9, 6): p for t, p in recorder.channels["/joint_feedback"]}
    refs = {round((t - t_ns0) * 1e-9, 6): p for t, p in recorder.channels["/references"]}
    tau = 0.05
    for t_ref in (0.3, 0.7):
        start = np.array(feedback[t_ref]["angle_h_rad"])
        target = np.array(refs[t_ref]["angle_h_rad"])
        after = np.array(feedback[round(t_ref + 0.05, 6)]["angle_h_rad"])
        np.testing.assert_allclose(after, target + (start - target) * np.exp(-0.05 / tau), atol=1e-12)
    assert all(p["status"] == [int(JointStatus.ENABLED)] * 10 for p in list(feedback.values())[:-1])


def test_feedback_is_read_before_references_at_the_same_instant(sidewinding):
    seen = []
    gait = sidewinding.gait

    class SpyGait:
        n_joints = 10

        def references(self, t_s, feedback=None):
            seen.append((t_s, feedback.t_s if feedback else None))
            return gait.references(t_s)

        def initial_posture(self):
            return gait.initial_posture()

    sidewinding.gait = SpyGait()
    run_experiment(sidewinding, MemoryRecorder(), RunOptions(duration_s=0.5))
    assert [t for t, _ in seen] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), seen  # every 10 Hz tick
    assert all(t == fb_t for t, fb_t in seen)


class ExplodingBackend(KinematicBackend):
    def __init__(self, at_s: float, exc: BaseException) -> None:
        super().__init__()
        self.at_s, self.exc, self.deactivations = at_s, exc, 0

    def advance_to(self, t_s: float) -> None:
        super().advance_to(t_s)
        if t_s >= self.at_s:
            raise self.exc

    def deactivate(self) -> None:
        self.deactivations += 1
        super().deactivate()


def test_a_crash_mid_run_deactivates_and_is_logged(sidewinding):
    backend = ExplodingBackend(0.55, RuntimeError("motor driver on fire"))
    recorder = MemoryRecorder()
    with pytest.raises(RuntimeError, match="motor driver on fire"):  # the original error, not a wrapper
        run_experiment(sidewinding, recorder, backend=backend)
    assert backend.deactivations >= 1
    assert recorder.event_kinds() == ["start", "error", "stop"]
    assert "motor driver on fire" in recorder.events[1][2]["message"]


def test_ctrl_c_deactivates_and_ends_the_run_cleanly(sidewinding):
    backend = ExplodingBackend(0.55, KeyboardInterrupt())
    recorder = MemoryRecorder()
    result, summary = run_experiment(sidewinding, recorder, backend=backend)
    assert summary["interrupted"] and backend.deactivations >= 1
    assert recorder.event_kinds() == ["start", "interrupted", "stop"]
    assert result.reference_updates == 6


def test_extra_periodic_tasks_run_on_the_same_clock(sidewinding):
    times = []
    task = PeriodicTask("mocap", 20.0, times.append, priority=30)
    run_experiment(sidewinding, MemoryRecorder(), RunOptions(duration_s=1.0), extra_tasks=[task])
    np.testing.assert_allclose(times, np.arange(21) / 20)


def test_a_run_shorter_than_one_reference_period_is_refused_before_anything_is_enabled(sidewinding):
    from aiko.core.errors import ConfigError

    class Spy(KinematicBackend):
        configured = False

        def configure(self, ctx):
            Spy.configured = True
            super().configure(ctx)

    with pytest.raises(ConfigError, match=r"run duration = 1e-300 s is shorter than one reference period \(0.1 s"):
        run_experiment(sidewinding, MemoryRecorder(), RunOptions(duration_s=1e-300), backend=Spy())
    assert not Spy.configured
