"""Simulated motion capture: exact delay, noise statistics, dropouts as NaN + flag, logging through MocapTask."""

import numpy as np
import pytest

from aiko.core.mocap import MOCAP_CHANNEL, MocapTask
from aiko.core.recording import MemoryRecorder
from aiko.devices.mocap.simulated import SimulatedMocap
from aiko.log import LogReader, McapRecorder

N_LINKS = 11
VELOCITY_M_S = np.array([0.02, -0.01, 0.0])


class MovingSnake:
    """Links on a line moving at constant velocity; yaw turning at a constant rate."""

    def __init__(self):
        self.t_s = 0.0

    def poses(self):
        positions = np.array([[0.122 * i, 0.0, 0.05] for i in range(N_LINKS)]) + VELOCITY_M_S * self.t_s
        yaw = 0.1 * self.t_s
        quats = np.tile([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)], (N_LINKS, 1))
        return positions, quats


def _run(mocap, snake, n, rate_hz=20.0, t0_ns=5_000_000_000):
    out = []
    for k in range(n):
        snake.t_s = k / rate_hz
        out.append(mocap.sample(t0_ns + round(k / rate_hz * 1e9)))
    return out


def test_no_noise_no_latency_reports_link_6_exactly():
    snake = MovingSnake()
    samples = _run(SimulatedMocap(snake.poses), snake, 5)
    for k, s in enumerate(samples):
        np.testing.assert_array_equal(s.position_m[0], snake.poses()[0][5] - VELOCITY_M_S * (4 - k) / 20.0)
    assert samples[0].names == ("link6",) and samples[0].latency_s == 0.0


def test_latency_is_a_pure_delay_even_between_samples():
    snake = MovingSnake()
    latency_s = 0.03  # shorter than the 50 ms sample period: needs interpolation
    samples = _run(SimulatedMocap(snake.poses, latency_s=latency_s), snake, 20)
    assert samples[0].occluded.all()  # nothing captured 30 ms before the first sample
    for k, s in enumerate(samples[1:], start=1):
        t_true = k / 20.0 - latency_s
        expected = np.array([0.122 * 5, 0.0, 0.05]) + VELOCITY_M_S * t_true
        np.testing.assert_allclose(s.position_m[0], expected, atol=1e-12)
        yaw = 2 * np.arctan2(s.quaternion_wxyz[0, 3], s.quaternion_wxyz[0, 0])
        assert abs(yaw - 0.1 * t_true) < 1e-6  # nlerp of a small step: error O(step³)
        assert abs(s.latency_s - latency_s) < 1e-9


def test_noise_and_dropout_statistics():
    snake = MovingSnake()
    mocap = SimulatedMocap(snake.poses, links=(1, 6), noise_std_m=0.001, dropout_probability=0.1, seed=3)
    samples = _run(mocap, snake, 4000)
    occluded = np.array([s.occluded for s in samples])
    p_hat = occluded.mean()
    assert abs(p_hat - 0.1) < 4 * np.sqrt(0.1 * 0.9 / occluded.size)  # 4σ binomial
    positions = np.array([s.position_m for s in samples])
    assert np.isnan(positions[occluded]).all() and not np.isnan(positions[~occluded]).any()
    truth = np.array([snake_pos for snake_pos in _truth_positions(len(samples))])
    errors = (positions - truth)[~occluded]
    assert abs(errors.std() / 0.001 - 1.0) < 0.05 and abs(errors.mean()) < 1e-4


def _truth_positions(n):
    snake = MovingSnake()
    out = []
    for k in range(n):
        snake.t_s = k / 20.0
        out.append(snake.poses()[0][[0, 5]])
    return out


def test_no_poses_yet_is_occluded_and_bad_config_raises():
    mocap = SimulatedMocap(lambda: None)
    s = mocap.sample(1)
    assert s.occluded.all() and np.isnan(s.position_m).all()
    with pytest.raises(ValueError, match="1-based"):
        SimulatedMocap(lambda: None, links=(0,))
    with pytest.raises(ValueError, match="dropout"):
        SimulatedMocap(lambda: None, dropout_probability=1.0)
    with pytest.raises(ValueError, match="out of range"):
        SimulatedMocap(MovingSnake().poses, links=(12,)).sample(0)


def test_mocap_task_logs_nan_and_flags(tmp_path):
    snake = MovingSnake()
    mocap = SimulatedMocap(snake.poses, dropout_probability=0.3, seed=1)
    memory = MemoryRecorder()
    task = MocapTask(mocap, memory)
    for k in range(40):
        snake.t_s = k / 20
        task(k * 50_000_000)
    assert len(memory.channels["/mocap"]) == 40
    assert task.summary()["mocap_occluded_samples"] == sum(p["occluded"][0] for _, p in memory.channels["/mocap"])
    path = tmp_path / "m.mcap"
    with McapRecorder(path) as rec:
        for t_ns, payload in memory.channels["/mocap"]:
            rec.record(MOCAP_CHANNEL, t_ns, payload)
    arrays = LogReader(path).channel("/mocap")
    assert arrays["position_m"].shape == (40, 1, 3)
    flagged = arrays["occluded"][:, 0]
    assert flagged.any() and np.isnan(arrays["position_m"][flagged]).all()
