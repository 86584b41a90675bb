"""Kinematics and dynamics of the planar snake (paper 001, eq. 3–12) against first principles."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from sim.planar_snake import (
    PlanarSnakeError,
    PlanarSnakeModel,
    coriolis_force,
    kinetic_energy,
    link_centres,
    link_jacobians,
    mass_matrix,
    state_from_joint_angles,
)
from sim.planar_snake.model import link_acceleration_bias

THETA0_DEG = [7, -32, -57, -46, -8, 33, 53, 45, 12, -23]  # the paper's initial link angles


@pytest.fixture
def model():
    return PlanarSnakeModel()


def random_state(rng, n):
    return np.r_[rng.uniform(-1.5, 1.5, n), rng.normal(size=2)], rng.normal(size=n + 2)


def test_links_are_joined_and_p_is_the_centre_of_mass(model):
    rng = np.random.default_rng(0)
    l = model.link_half_length_m
    for _ in range(20):
        q, _ = random_state(rng, model.n_links)
        th = q[:10]
        x, y = link_centres(model, q)
        np.testing.assert_allclose(x[:-1] + l * np.cos(th[:-1]), x[1:] - l * np.cos(th[1:]), atol=1e-14)
        np.testing.assert_allclose(y[:-1] + l * np.sin(th[:-1]), y[1:] - l * np.sin(th[1:]), atol=1e-14)
        assert x.mean() == pytest.approx(q[10], abs=1e-14) and y.mean() == pytest.approx(q[11], abs=1e-14)


def test_jacobians_and_acceleration_bias_by_finite_differences(model):
    rng = np.random.default_rng(1)
    q, qd = random_state(rng, model.n_links)
    Jx, Jy = link_jacobians(model, q)
    eps = 1e-6
    centres = lambda qq: np.array(link_centres(model, qq))  # noqa: E731
    num = np.array([(centres(q + eps * e) - centres(q - eps * e)) / (2 * eps) for e in np.eye(12)])
    np.testing.assert_allclose(Jx, num[:, 0, :].T, atol=1e-8)
    np.testing.assert_allclose(Jy, num[:, 1, :].T, atol=1e-8)
    # along q(t) = q + t qd (q̈ = 0) the CM acceleration is the bias alone
    pos = lambda t: np.array(link_centres(model, q + t * qd))  # noqa: E731
    h = 1e-4
    acc = (pos(h) - 2 * pos(0) + pos(-h)) / h**2
    bx, by = link_acceleration_bias(model, q, qd)
    np.testing.assert_allclose(acc[0], bx, atol=1e-5)
    np.testing.assert_allclose(acc[1], by, atol=1e-5)


def test_mass_matrix_equals_sum_of_link_energies(model):
    """eq. 10 (with V = N Nᵀ) must equal m (JxᵀJx + JyᵀJy) + J on the θ block, nm on p."""
    rng = np.random.default_rng(2)
    for _ in range(10):
        q, _ = random_state(rng, model.n_links)
        Jx, Jy = link_jacobians(model, q)
        expected = model.link_mass_kg * (Jx.T @ Jx + Jy.T @ Jy)
        expected[:10, :10] += model.link_inertia_kgm2 * np.eye(10)
        np.testing.assert_allclose(mass_matrix(model, q), expected, atol=1e-14)


def free_flow(model, q0, qd0, t_end):
    n = model.n_links

    def rhs(_t, x):
        q, qd = x[: n + 2], x[n + 2 :]
        return np.r_[qd, np.linalg.solve(mass_matrix(model, q), coriolis_force(model, q, qd))]

    return solve_ivp(rhs, (0, t_end), np.r_[q0, qd0], rtol=1e-11, atol=1e-12)


def test_free_motion_conserves_energy_and_momenta(model):
    """Without friction and torques the flow of eq. 9 conserves kinetic energy, linear and angular momentum:
    this checks W of eq. 10 (a sign or transpose error in W breaks energy conservation)."""
    rng = np.random.default_rng(3)
    q0, qd0 = random_state(rng, model.n_links)
    sol = free_flow(model, q0, qd0, 1.0)
    n, m, J = 10, model.link_mass_kg, model.link_inertia_kgm2

    def momenta(x):
        q, qd = x[:12], x[12:]
        X, Y = link_centres(model, q)
        Jx, Jy = link_jacobians(model, q)
        vx, vy = Jx @ qd, Jy @ qd
        return (
            kinetic_energy(model, q, qd),
            qd[10],
            qd[11],
            float(np.sum(m * (X * vy - Y * vx)) + J * qd[:n].sum()),
        )

    start, end = momenta(sol.y[:, 0]), momenta(sol.y[:, -1])
    assert end[0] == pytest.approx(start[0], rel=1e-8)
    assert end[1] == pytest.approx(start[1], abs=1e-10) and end[2] == pytest.approx(start[2], abs=1e-10)
    assert end[3] == pytest.approx(start[3], rel=1e-7, abs=1e-10)


def test_mirror_symmetry(model):
    """Reflecting y → −y (θ → −θ) maps solutions of eq. 9 onto solutions."""
    rng = np.random.default_rng(4)
    q0, qd0 = random_state(rng, model.n_links)
    mirror = np.r_[-np.ones(10), 1.0, -1.0]
    a = free_flow(model, q0, qd0, 0.5).y[:, -1]
    b = free_flow(model, mirror * q0, mirror * qd0, 0.5).y[:, -1]
    np.testing.assert_allclose(np.r_[mirror, mirror] * a, b, atol=1e-7)


def test_state_from_joint_angles_round_trip(model):
    phi = np.deg2rad(np.diff(THETA0_DEG) * -1.0)
    q = state_from_joint_angles(model, phi, np.deg2rad(THETA0_DEG[-1]))
    np.testing.assert_allclose(np.rad2deg(q[:10]), THETA0_DEG, atol=1e-12)
    with pytest.raises(PlanarSnakeError, match="joint_angles_rad"):
        state_from_joint_angles(model, phi[:3], 0.0)


def test_bad_parameters_name_the_field():
    with pytest.raises(PlanarSnakeError, match="n_links"):
        PlanarSnakeModel(n_links=1)
    with pytest.raises(PlanarSnakeError, match="ground_mu"):
        PlanarSnakeModel(ground_mu=1.5)
    with pytest.raises(PlanarSnakeError, match="obstacle_radii_m"):
        PlanarSnakeModel(obstacle_centres_m=np.zeros((2, 2)), obstacle_radii_m=np.ones(3))
