"""Obstacle-aided gait: leader-follower propagation, heading-keeping continuation, jam detection/resolution."""

import math

import numpy as np
import pytest

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.gaits.obstacle_aided import (
    PAPER_PHI0_DEG,
    ObstacleAidedGait,
    ObstacleAidedParams,
    obstacle_aided_from_table,
)
from aiko.robots.aiko.joints import JointFeedback

LINK = 0.14


def gait(**kw):
    return ObstacleAidedGait(ObstacleAidedParams(tuple(np.deg2rad(PAPER_PHI0_DEG)), LINK, **kw))


def feedback(t, angles, n=9):
    z = np.zeros(n)
    return JointFeedback(t, np.asarray(angles, dtype=float), z, z.copy(), z.copy(), np.ones(n, dtype=np.uint8))


def test_starts_in_the_papers_posture():
    g = gait()
    np.testing.assert_allclose(np.rad2deg(g.initial_posture().angle_h_rad), PAPER_PHI0_DEG, atol=1e-12)
    np.testing.assert_allclose(np.rad2deg(g.references(0.0).angle_h_rad), PAPER_PHI0_DEG, atol=1e-12)


def test_each_joint_repeats_the_joint_ahead_one_link_later():
    """Leader-follower: φ_i(t + 2l/v) = φ_{i+1}(t), for the laid track and for the head's new values."""
    v = 0.1
    lag = LINK / v
    a, b = gait(propagation_speed_m_s=v), gait(propagation_speed_m_s=v)
    times = np.arange(0.0, 6.0, 0.1)
    early = {round(t, 6): a.references(t).angle_h_rad for t in times}
    for t in times:
        late = b.references(t + lag).angle_h_rad
        np.testing.assert_allclose(late[:-1], early[round(t, 6)][1:], atol=1e-9)


def test_path_ahead_keeps_the_bodys_mean_heading():
    """The continuation is chosen so the body, laid along the track, keeps its mean heading."""
    g = gait()
    s = np.arange(-8, 40) * LINK
    phi, _ = g.track(s)
    heading = -np.cumsum(phi)  # link headings relative to the first, θ_{k+1} = θ_k − φ_k
    body = heading[:9].mean()
    for start in range(9, 40 - 8, 8):
        assert abs(heading[start : start + 8].mean() - body) < math.radians(6.0)


def test_rate_feed_forward_is_the_derivative_of_the_reference():
    g = gait(propagation_speed_m_s=0.1)
    h = 1e-4
    g.references(1.0)
    r = g.references(1.0 + h)
    g2 = gait(propagation_speed_m_s=0.1)
    g2.references(1.0)
    r2 = g2.references(1.0 + 2 * h)
    np.testing.assert_allclose((r2.angle_h_rad - r.angle_h_rad) / h, r.rate_h_rad_s, atol=2e-3)


def test_jam_is_detected_relaxed_and_resolved():
    g = gait(jam_error_rad=math.radians(10), jam_time_s=0.5, relax_time_s=1.0)
    stuck = np.deg2rad(PAPER_PHI0_DEG).copy()
    t = 0.0
    # the body does not follow: after the shape has moved on, the error exceeds 10 deg and stays
    while g.mode == "propagate" and t < 20:
        g.references(t, feedback(t, stuck))
        t = round(t + 0.1, 6)
    assert g.stats.jams_detected == 1 and g.mode == "relax"
    frozen = g.sigma_m
    refs = g.references(t, feedback(t, stuck)).angle_h_rad
    relaxed = g._relaxed
    assert relaxed.any()
    np.testing.assert_allclose(refs[relaxed], stuck[relaxed])  # relaxed joints comply with the measurement
    # during relaxation the shape does not propagate; afterwards the track restarts from the measured shape
    while g.mode == "relax":
        t = round(t + 0.1, 6)
        g.references(t, feedback(t, stuck))
    assert g.sigma_m == pytest.approx(frozen)
    for _ in range(10):  # the body now follows its references: no new jam, so the jam counts as resolved
        t = round(t + 0.1, 6)
        refs = g.references(t, feedback(t, stuck)).angle_h_rad
        stuck = refs
    assert g.stats.jams_resolved == 1 and g.stats.jams_detected == 1


def test_config_is_validated(experiments_dir):
    robot = load_robot(experiments_dir / "robots" / "planar_snake_001.toml")
    g = obstacle_aided_from_table(Table({"propagation_speed_m_s": 0.2}, "gait"), robot)
    assert g.params.propagation_speed_m_s == 0.2
    with pytest.raises(ConfigError, match="initial_joint_angles_deg"):
        obstacle_aided_from_table(Table({"initial_joint_angles_deg": [1.0, 2.0]}, "gait"), robot)
    with pytest.raises(ConfigError, match="propagation_speed_m_s"):
        obstacle_aided_from_table(Table({"propagation_speed_m_s": -1.0}, "gait"), robot)


def test_stalled_progress_is_a_jam_and_the_head_then_bends_the_other_way():
    """With jam_speed_m_s > 0, a body that follows its joint references but does not advance is jammed; the
    most loaded joints relax, and the re-laid path ahead starts bending opposite to the blocked one."""
    g = gait(jam_speed_m_s=0.02, progress_window_s=2.0, relax_time_s=0.5)
    effort = np.linspace(0.1, 0.9, 9)
    t = 0.0
    while g.mode == "propagate" and t < 10:
        refs = g.references(t).angle_h_rad
        for k in range(10):  # 100 Hz body-velocity observations: no progress at all
            g.observe_body_velocity(t + 0.01 * k, np.array([0.0, 0.0]))
        fb = feedback(t, refs)
        g.references(t, JointFeedback(t, refs, *(np.zeros(9),) * 3, fb.status, effort_h=effort))
        t = round(t + 0.1, 6)
    assert g.stats.jams_detected == 1 and 1.9 <= t <= 2.3
    np.testing.assert_array_equal(g._relaxed, effort >= effort[-3])  # the third with the largest effort
    k = 2 * math.pi / g.wavelength_m
    before = math.copysign(1.0, math.cos(k * g.sigma_m + g._psi))
    while g.mode == "relax":
        g.references(t, feedback(t, g._last_feedback_angles))
        t = round(t + 0.1, 6)
    assert math.copysign(1.0, math.cos(k * g.sigma_m + g._psi)) == -before


def test_progress_is_not_watched_by_default():
    g = gait()
    for k in range(100):
        g.observe_body_velocity(0.1 * k, np.zeros(2))
        g.references(0.1 * k, feedback(0.1 * k, g.references(0.1 * k).angle_h_rad))
    assert g.stats.jams_detected == 0
