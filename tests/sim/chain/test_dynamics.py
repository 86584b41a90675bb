"""Chain dynamics: M*, N*, F* structure, inverse/forward round trip, textbook pendulums, energy, RK4 order."""

import numpy as np
import pytest

from sim import lie
from sim.chain import (
    assemble,
    forward_dynamics,
    generalized_force,
    inverse_dynamics,
    joint_torque_moments,
    kinetic_energy_j,
    potential_energy_j,
    simulate,
    uniform_chain,
)
from sim.chain.model import cylinder_inertia_kg_m2
from tests.sim.chain.test_kinematics import CHAINS

RNG = np.random.default_rng(3)
G = 9.81


def random_state(chain):
    return RNG.uniform(-np.pi, np.pi, chain.n_bodies), RNG.normal(size=chain.n_bodies)


@pytest.mark.parametrize("name", CHAINS)
def test_M_star_N_star_equal_the_dense_formulas_of_eq_86(name):
    chain = CHAINS[name]()
    q, qd = random_state(chain)
    eom = assemble(chain, q, qd)
    np.testing.assert_array_equal(eom.M_star, eom.M_star.T)
    assert np.linalg.eigvalsh(eom.M_star).min() > 0
    # dense definition of eq. 86a with M = blockdiag(m I3, J)
    n = chain.n_bodies
    M = np.zeros((6 * n, 6 * n))
    for i in range(n):
        M[6 * i : 6 * i + 3, 6 * i : 6 * i + 3] = chain.mass_kg[i] * np.eye(3)
        M[6 * i + 3 : 6 * i + 6, 6 * i + 3 : 6 * i + 6] = chain.inertia_kg_m2[i]
    np.testing.assert_allclose(eom.M_star, eom.B.T @ M @ eom.B, rtol=1e-13, atol=1e-15)
    # eq. 86b literally, with D = blockdiag(0, omega^(1)^, 0, omega^(2)^, ...) (eq. 76)
    D = np.zeros((6 * n, 6 * n))
    omega = (eom.B @ qd).reshape(n, 2, 3)[:, 1]
    for i in range(n):
        D[6 * i + 3 : 6 * i + 6, 6 * i + 3 : 6 * i + 6] = lie.hat3(omega[i])
    N_dense = eom.B.T @ (M @ eom.B_dot + D @ M @ eom.B)
    np.testing.assert_allclose(eom.N_star, N_dense, rtol=0, atol=1e-13 * np.abs(N_dense).max())
    # kinetic energy two ways: 1/2 qd^T M* qd and the body-by-body sum (eq. 66)
    assert np.isclose(0.5 * qd @ eom.M_star @ qd, kinetic_energy_j(chain, q, qd), rtol=1e-13)


@pytest.mark.parametrize("name", CHAINS)
def test_power_identity_qd_half_Mdot_minus_N_qd_is_zero(name):
    chain = CHAINS[name]()
    q, qd = random_state(chain)
    h = 1e-6
    M_dot = (assemble(chain, q + h * qd, qd).M_star - assemble(chain, q - h * qd, qd).M_star) / (2 * h)
    N = assemble(chain, q, qd).N_star
    power = qd @ (0.5 * M_dot - N) @ qd
    scale = abs(qd @ N @ qd) + abs(0.5 * qd @ M_dot @ qd)
    assert abs(power) <= 1e-8 * scale, (power, scale)


@pytest.mark.parametrize("name", CHAINS)
def test_motor_part_of_F_star_equals_joint_torques(name):
    chain = CHAINS[name]()
    q, qd = random_state(chain)
    tau = RNG.normal(size=chain.n_bodies)
    eom = assemble(chain, q, qd)
    F_star = generalized_force(eom, moments_body_n_m=joint_torque_moments(chain, tau))
    np.testing.assert_allclose(F_star, tau, rtol=0, atol=1e-13)


def test_gravity_generalized_force_is_minus_gradient_of_potential():
    chain = CHAINS["tree"]()
    q = RNG.uniform(-np.pi, np.pi, chain.n_bodies)
    h = 1e-6
    grad = np.array(
        [
            (potential_energy_j(chain, q + h * e) - potential_energy_j(chain, q - h * e)) / (2 * h)
            for e in np.eye(chain.n_bodies)
        ]
    )
    np.testing.assert_allclose(assemble(chain, q, np.zeros_like(q)).F_star_gravity, -grad, atol=1e-8)


@pytest.mark.parametrize("name", CHAINS)
def test_forward_dynamics_of_inverse_dynamics_torques_returns_desired_acceleration(name):
    chain = CHAINS[name]()
    q, qd = random_state(chain)
    qdd = RNG.normal(size=chain.n_bodies)
    tau = inverse_dynamics(chain, q, qd, qdd)
    np.testing.assert_allclose(forward_dynamics(chain, q, qd, tau), qdd, rtol=0, atol=1e-10)


def test_single_pendulum_matches_textbook_equation():
    """Body pinned at its end, pitch axis e2, chain along e1: (m c^2 + J22) th_dd = m g c cos th."""
    m, L, r = 0.8, 0.5, 0.03
    chain = uniform_chain(1, L, m, r, "y", gravity_m_s2=G)
    c = L / 2
    J22 = cylinder_inertia_kg_m2(m, L, r)[1, 1]
    for th in np.linspace(-3, 3, 7):
        for thd in (-2.0, 0.0, 1.5):
            expected = m * G * c * np.cos(th) / (m * c**2 + J22)
            assert np.isclose(forward_dynamics(chain, [th], [thd])[0], expected, rtol=1e-13)


def test_planar_double_pendulum_matches_textbook_lagrange_equations():
    """Compound double pendulum in the vertical x-z plane (axes e2); phi1 = th1, phi2 = th1 + th2."""
    m, L, r = 1.3, 0.4, 0.02
    chain = uniform_chain(2, L, m, r, "yy", gravity_m_s2=G)
    c, I = L / 2, cylinder_inertia_kg_m2(m, L, r)[1, 1]
    for _ in range(5):
        th, thd = RNG.uniform(-3, 3, 2), RNG.normal(size=2)
        p1, p2 = th[0], th[0] + th[1]
        w1, w2 = thd[0], thd[0] + thd[1]
        k = m * L * c
        M = np.array([[I + m * c**2 + m * L**2, k * np.cos(p1 - p2)], [k * np.cos(p1 - p2), I + m * c**2]])
        rhs = np.array(
            [
                G * (m * c + m * L) * np.cos(p1) - k * np.sin(p1 - p2) * w2**2,
                G * m * c * np.cos(p2) + k * np.sin(p1 - p2) * w1**2,
            ]
        )
        phi_dd = np.linalg.solve(M, rhs)
        expected = np.array([phi_dd[0], phi_dd[1] - phi_dd[0]])
        np.testing.assert_allclose(forward_dynamics(chain, th, thd), expected, rtol=1e-12, atol=1e-12)


def test_energy_with_gravity_only_is_conserved_by_rk4():
    """6-link 3D chain (mixed axes), released from rest, 1 s at dt = 1 ms: |E - E0| < 1e-6 of max kinetic."""
    chain = uniform_chain(6, 0.2, 0.3, 0.02, "zyxzyz")
    q0 = np.array([0.3, -0.4, 0.2, 0.8, -0.5, 0.1])
    traj = simulate(chain, q0, np.zeros(6), 1.0, 1e-3)
    assert traj.success
    kinetic = np.array([kinetic_energy_j(chain, q, v) for q, v in zip(traj.q, traj.q_dot, strict=True)])
    energy = kinetic + np.array([potential_energy_j(chain, q) for q in traj.q])
    drift = np.max(np.abs(energy - energy[0]))
    assert kinetic.max() > 0.1  # the chain really swings (energy scale ~ J)
    assert drift < 1e-6 * kinetic.max(), (drift, kinetic.max())


def test_rk4_converges_at_fourth_order():
    chain = uniform_chain(4, 0.3, 0.5, 0.02, "zyzy")
    q0, v0 = np.array([0.4, -0.6, 0.9, 0.2]), np.array([1.0, -0.5, 0.3, 0.0])
    reference = simulate(chain, q0, v0, 0.4, 1e-3, method="DOP853", rtol=1e-13, atol=1e-14)
    errors = []
    for dt in (0.01, 0.005, 0.0025):
        traj = simulate(chain, q0, v0, 0.4, dt)
        errors.append(np.max(np.abs(traj.q[-1] - reference.q[-1])))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 3.8) and np.all(orders < 4.2), (errors, orders)


def test_rk4_and_solve_ivp_agree():
    chain = uniform_chain(3, 0.3, 0.5, 0.02, "yzy")
    q0, v0 = np.array([0.1, 0.5, -0.3]), np.zeros(3)
    a = simulate(chain, q0, v0, 0.3, 1e-3)
    b = simulate(chain, q0, v0, 0.3, 1e-3, method="DOP853", rtol=1e-12, atol=1e-13)
    assert b.success and b.n_rhs_evaluations > 0
    np.testing.assert_allclose(a.q, b.q, atol=1e-10)


def test_simulate_rejects_bad_arguments():
    chain = uniform_chain(2, 0.3, 0.5, 0.02, "zz")
    with pytest.raises(ValueError, match="whole number of steps"):
        simulate(chain, np.zeros(2), np.zeros(2), 0.1, 0.03)
    with pytest.raises(ValueError, match="method must be 'rk4' or one of"):
        simulate(chain, np.zeros(2), np.zeros(2), 0.1, 0.01, method="euler")


@pytest.mark.parametrize("name", CHAINS)
def test_numba_kernel_matches_numpy_reference(name):
    from sim.chain.fast import assemble_kernel, chain_arrays

    chain = CHAINS[name]()
    q, qd = random_state(chain)
    eom = assemble(chain, q, qd)
    M, N, Fg, Bx, Bw, Bxd, Bwd = assemble_kernel(*chain_arrays(chain), q, qd)
    for fast, ref in [(M, eom.M_star), (N, eom.N_star), (Fg, eom.F_star_gravity), (Bx, eom.Bx), (Bw, eom.Bw)]:
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-13 * max(1.0, np.abs(ref).max()))
    for fast, ref in [(Bxd, eom.Bx_dot), (Bwd, eom.Bw_dot)]:
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-13 * max(1.0, np.abs(ref).max()))
    tau = RNG.normal(size=chain.n_bodies)
    np.testing.assert_allclose(
        forward_dynamics(chain, q, qd, tau), forward_dynamics(chain, q, qd, tau, reference=True), atol=1e-11
    )


def test_massless_joint_gives_a_readable_error_on_both_paths():
    from sim.chain import Chain, ChainModelError

    chain = Chain(
        parent=[-1, 0],
        joint_axis=[[0, 0, 1.0], [0, 0, 1.0]],
        joint_offset_m=np.zeros((2, 3)),
        com_offset_m=[[0.1, 0, 0], [0.1, 0, 0]],
        mass_kg=[1.0, 0.0],
        inertia_kg_m2=[np.eye(3) * 1e-3, np.zeros((3, 3))],
    )
    for reference in (False, True):
        with pytest.raises(ChainModelError, match="M\\* is not positive definite"):
            forward_dynamics(chain, np.zeros(2), np.zeros(2), reference=reference)


@pytest.mark.parametrize("name", CHAINS)
def test_composite_body_kernel_matches_numpy_reference(name):
    from sim.chain.composite import composite_matrices

    chain = CHAINS[name]()
    q, qd = random_state(chain)
    eom = assemble(chain, q, qd)
    for fast, ref in zip(composite_matrices(chain, q, qd), (eom.M_star, eom.N_star, eom.F_star_gravity), strict=True):
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-13 * max(1.0, np.abs(ref).max()))


def test_rk4_divergence_ends_the_run_with_a_message_not_an_exception():
    """A torque that blows the chain up: the trajectory stops, success is False, samples so far are kept."""
    chain = uniform_chain(3, 0.3, 0.5, 0.02, "zyz")
    traj = simulate(chain, np.zeros(3), np.zeros(3), 1.0, 1e-2, lambda t, q, v: 1e300 * np.ones(3))
    assert not traj.success and "diverged" in traj.message
    assert np.all(np.isfinite(traj.q))


def test_wrong_torque_shape_is_reported_not_swallowed():
    chain = uniform_chain(3, 0.3, 0.5, 0.02, "zyz")
    with pytest.raises(ValueError, match=r"tau must have shape \(3,\)"):
        simulate(chain, np.zeros(3), np.zeros(3), 0.1, 1e-2, lambda t, q, v: np.ones(2))
