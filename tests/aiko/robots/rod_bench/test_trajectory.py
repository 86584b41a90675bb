"""The set-points' time after a stall (SetPointTime) and the trajectory's targets behind the loop."""

import numpy as np
import pytest

from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.trajectory import CATCH_UP_SPEED_RATIO, BaseTrajectory, SetPointTime

from .bench_files import write_experiment

PERIOD_S = 0.01


def test_on_the_loops_grid_the_set_points_follow_the_loop_exactly():
    follow = SetPointTime(PERIOD_S)
    times = [k * PERIOD_S for k in range(500)]
    assert [follow(t) for t in times] == times and follow.lag_max_s == 0.0


def test_after_a_stall_the_set_points_catch_up_at_twice_the_pace_never_at_once():
    """50 ms without a set-point (the loop stalled): the next ones advance two periods each until they are back on
    the loop's time, and a jittered but unstalled loop (up to 1.9 periods apart) is followed exactly."""
    follow = SetPointTime(PERIOD_S)
    loop = [0.0, 0.01, 0.02, 0.07, 0.08, 0.09, 0.10, 0.11, 0.12, 0.13]
    got = [follow(t) for t in loop]
    expected = [0.0, 0.01, 0.02, 0.04, 0.06, 0.08, 0.10, 0.11, 0.12, 0.13]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert follow.lag_max_s == pytest.approx(0.03)
    assert np.max(np.diff(got)) <= CATCH_UP_SPEED_RATIO * PERIOD_S + 1e-12
    jittered = SetPointTime(PERIOD_S)
    loop = np.cumsum(np.random.default_rng(5).uniform(0.1, 1.9, 300) * PERIOD_S)
    assert [jittered(float(t)) for t in loop] == loop.tolist()


def test_a_ratio_that_never_catches_up_is_refused():
    with pytest.raises(ValueError, match="> 1"):
        SetPointTime(PERIOD_S, ratio=1.0)


def test_a_target_behind_the_loop_is_the_trajectorys_earlier_pose_still_due_one_lead_later(tmp_path):
    experiment = load_bench_experiment(write_experiment(tmp_path))
    trajectory = BaseTrajectory(experiment.scenario.base_motion, Mount.from_settings(experiment.ur3))
    on_time, behind = trajectory.target(0.15, PERIOD_S), trajectory.target(0.15, PERIOD_S, lag_s=0.03)
    assert on_time.target_t_s == behind.target_t_s == pytest.approx(0.16)
    assert on_time.trajectory_t_s == pytest.approx(0.16) and behind.trajectory_t_s == pytest.approx(0.13)
    np.testing.assert_array_equal(behind.base_alpha, trajectory.alpha(0.13))
    assert behind.base_alpha[5] > on_time.base_alpha[5]  # the press: the earlier pose is higher
