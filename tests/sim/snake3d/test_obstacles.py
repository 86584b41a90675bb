"""Vertical cylinder obstacles (the paper's ref. [29]): contact geometry, fast vs reference, non-penetration."""

import numpy as np
import pytest

from sim.snake3d import SnakeModel, SnakeModelError, SnakeSimulator, posture_state
from sim.snake3d import kinematics as kin

from .test_kinematics import FD_TOL, fd


def test_obstacle_W_matches_gap_derivative_and_body_point_velocity():
    model = SnakeModel(n_links=3, obstacles=((0.05, 0.12, 0.04), (-0.2, -0.1, 0.03)))
    rng = np.random.default_rng(4)
    state = posture_state(model, rng.uniform(-0.5, 0.5, size=(2, 2)), head_direction_rad=0.3)
    pos, quat = state.position_m, state.quaternion
    u = rng.normal(size=6 * model.n_links)
    gaps, links, dirs = kin.obstacle_contacts(model, pos, quat)
    gamma = np.array([dirs[k, :3] @ u.reshape(-1, 6)[links[k]] for k in range(len(gaps))])
    expected = fd(lambda p, q: kin.obstacle_contacts(model, p, q)[0], pos, quat, u)
    np.testing.assert_allclose(gamma[:, 0], expected, atol=FD_TOL)
    # the tangent columns must be orthogonal to the normal and horizontal / vertical
    for k in range(len(gaps)):
        n_dir, t1, t2 = dirs[k, 0, :3], dirs[k, 1, :3], dirs[k, 2, :3]
        assert abs(n_dir[2]) < 1e-15 and abs(n_dir @ t1) < 1e-15 and abs(n_dir @ t2) < 1e-15
        np.testing.assert_allclose(t2, [0, 0, 1])
        np.testing.assert_allclose(dirs[k, 3], 0.0)


def test_fast_step_matches_reference_with_obstacles():
    free = SnakeModel(n_links=5)
    state = posture_state(free, np.tile([0.3, 0.0], (4, 1)))
    # two posts just touching links 2 and 4 on their +y side (the body is pushed into them below)
    radius = 0.04
    posts = tuple(
        (state.position_m[i, 0], state.position_m[i, 1] + free.link_radius_m + radius - 1e-4, radius) for i in (1, 3)
    )
    model = SnakeModel(n_links=5, obstacles=posts, tolerance=1e-12, velocity_tolerance_m_s=1e-10)
    state.impulse_cache = np.zeros((model.n_all_contacts, 4))
    fast, ref = SnakeSimulator(model, state.copy()), SnakeSimulator(model, state.copy(), use_reference=True)
    rng = np.random.default_rng(0)
    angles = rng.uniform(-0.6, 0.6, size=(4, 2))
    for sim in (fast, ref):
        sim.state.velocity_m_s[:, 1] = 0.3  # slide sideways into the obstacles
        sim.set_references(angles)
        sim.step(1)
    assert np.count_nonzero(ref.impulses[2 * model.n_links :, 0] > 0) == 2, "both posts must push back"
    for sim in (fast, ref):
        sim.step(5)
    assert fast.stats.sweeps == ref.stats.sweeps
    for name in ("position_m", "quaternion", "velocity_m_s", "omega_body_rad_s", "impulse_cache"):
        np.testing.assert_allclose(getattr(fast.state, name), getattr(ref.state, name), rtol=1e-10, atol=1e-12)


def test_link_slid_into_a_post_stops_at_it():
    """A link sliding sideways onto a post stops (completely inelastic) without passing through it."""
    radius = 0.03
    model = SnakeModel(n_links=1, obstacles=((0.0, 0.2, radius),), mu_obstacle=0.3)
    sim = SnakeSimulator(model, posture_state(model))
    sim.state.velocity_m_s[0, 1] = 1.0
    closest = []
    for _ in range(2000):
        sim.step(1)
        gaps, _, _ = kin.obstacle_contacts(model, sim.state.position_m, sim.state.quaternion)
        closest.append(gaps[0])
    assert min(closest) > -1.0 * model.dt_s  # at most |v| Δt of penetration at the impact step
    assert min(closest) < 1e-6  # it did reach the post
    assert abs(sim.state.velocity_m_s[0, 1]) < 1e-6  # and stopped there


def test_obstacle_parameters_are_checked():
    with pytest.raises(SnakeModelError, match=r"obstacles\[0\]"):
        SnakeModel(obstacles=((0.0, 0.0, -0.1),))
    with pytest.raises(SnakeModelError, match="mu_obstacle"):
        SnakeModel(mu_obstacle=0.0)
