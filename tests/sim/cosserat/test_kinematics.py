"""PLS kinematics: Lie kernels vs sim.lie, exact arcs, Magnus accuracy, J and J̇ vs finite differences, M SPD."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from sim import lie
from sim.cosserat import build_model, initial_state, kinematics, mass_matrix, uniform_rod
from sim.cosserat._lie_extra import ad, ad_inverse_pose, se3_exp, se3_tangent, so3_left_jacobian

RNG = np.random.default_rng(42)


@pytest.mark.parametrize("scale", [1e-4, 3e-3, 0.3, 2.5])
def test_numba_kernels_match_sim_lie(scale):
    for _ in range(5):
        xi = RNG.normal(size=6) * scale
        R, p = se3_exp(xi)
        g = lie.exp_se3(xi)
        np.testing.assert_allclose(R, g[:3, :3], atol=1e-14)
        np.testing.assert_allclose(p, g[:3, 3], atol=1e-14)
        np.testing.assert_allclose(ad(xi), lie.ad(xi), atol=0)
        np.testing.assert_allclose(se3_tangent(xi), lie.tangent_se3(xi), atol=1e-13)
        np.testing.assert_allclose(ad_inverse_pose(R, p), lie.Ad_inv(g), atol=1e-14)
        np.testing.assert_allclose(so3_left_jacobian(xi[:3]), lie.left_jacobian_so3(xi[:3]), atol=1e-14)


def test_complex_step_of_kernels_is_exact_derivative():
    xi, d = RNG.normal(size=6) * 0.7, RNG.normal(size=6)
    eps = 1e-30
    dT_cs = se3_tangent(xi + 1j * eps * d).imag / eps
    h = 1e-6
    dT_fd = (lie.tangent_se3(xi + h * d) - lie.tangent_se3(xi - h * d)) / (2 * h)
    np.testing.assert_allclose(dT_cs, dT_fd, atol=1e-8)


def _model(n=6, length=0.8, **kw):
    return build_model(uniform_rod(length, 0.01, 1e6, 1000.0), n, **kw)


def test_constant_strain_gives_exact_helix_and_arc():
    model = _model(n=5)
    strain = np.array([0.4, -0.3, 2.0, 1.02, 0.01, -0.02])  # twist, bending, stretch and shear together
    q = initial_state(model).q
    q[6:] = np.tile(strain - np.array([0, 0, 0, 1.0, 0, 0]), model.n_sections + 1)
    kin = kinematics(model, q)
    for x, R, p in zip(model.grid.x_points, kin.R, kin.p, strict=True):
        g = lie.exp_se3(x * strain)
        np.testing.assert_allclose(R, g[:3, :3], atol=1e-13)
        np.testing.assert_allclose(p, g[:3, 3], atol=1e-13)
    # pure in-plane bending: the centreline is the circle of radius 1/κ
    q[6:] = 0.0
    q[6 + 2 :: 6] = 2.0
    p = kinematics(model, q).p
    x = model.grid.x_points
    np.testing.assert_allclose(p, np.stack([np.sin(2 * x) / 2, (1 - np.cos(2 * x)) / 2, 0 * x], 1), atol=1e-14)


def test_magnus_sweep_is_fourth_order_against_ode_reference_for_linear_strain():
    rng = np.random.default_rng(3)
    theta = rng.normal(size=6 * 5) * 1.0  # strains O(1/m) on a 0.8 m rod: strongly curved and twisted
    errors = []
    for n_sub in (16, 32, 64):
        model = build_model(
            uniform_rod(0.8, 0.01, 1e6, 1000.0), 4, extra_points_m=tuple(np.linspace(0, 0.8, n_sub + 1)[1:-1])
        )
        q = initial_state(model).q
        q[6:] = theta
        tip = kinematics(model, q).p[-1]
        xn, th = model.grid.x_nodes, theta.reshape(-1, 6) + np.array([0, 0, 0, 1.0, 0, 0])

        def rhs(x, y, xn=xn, th=th):
            k = min(int(np.searchsorted(xn, x, side="right") - 1), len(xn) - 2)
            t = (x - xn[k]) / (xn[k + 1] - xn[k])
            return (y.reshape(4, 4) @ lie.hat6((1 - t) * th[k] + t * th[k + 1])).reshape(-1)

        if not errors:
            ref = solve_ivp(rhs, (0, 0.8), np.eye(4).reshape(-1), rtol=1e-12, atol=1e-13, max_step=0.01)
            tip_ref = ref.y[:, -1].reshape(4, 4)[:3, 3]
        errors.append(np.max(np.abs(tip - tip_ref)))
    assert errors[2] < 1e-6
    assert errors[0] / errors[1] > 10 and errors[1] / errors[2] > 10  # ≈ 16 for a 4th-order method


def _body_twist_fd(model, q, v, eps=1e-6):
    kp, km, k0 = kinematics(model, q + eps * v), kinematics(model, q - eps * v), kinematics(model, q)
    dR = (kp.R - km.R) / (2 * eps)
    dp = (kp.p - km.p) / (2 * eps)
    W = np.einsum("kji,kjl->kil", k0.R, dR)
    w = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1)
    return np.concatenate([w, np.einsum("kji,kj->ki", k0.R, dp)], axis=1), kp, km


def test_jacobian_and_its_time_derivative_match_finite_differences():
    model = _model(n=5)
    q = RNG.normal(size=model.n_dof) * 0.4
    v = RNG.normal(size=model.n_dof)
    kin = kinematics(model, q, v)
    eta_fd, kp, km = _body_twist_fd(model, q, v)
    eta = np.einsum("kin,n->ki", kin.J, v)
    assert np.max(np.abs(eta - eta_fd)) < 1e-8 * np.max(np.abs(eta))
    jdot_fd = (kp.J - km.J) / 2e-6
    assert np.max(np.abs(kin.Jdot - jdot_fd)) < 1e-7 * np.max(np.abs(jdot_fd))


def test_mass_matrix_is_symmetric_positive_definite_and_gives_kinetic_energy():
    model = _model(n=6)
    q = RNG.normal(size=model.n_dof) * 0.3
    kin = kinematics(model, q)
    M = mass_matrix(model, kin)
    np.testing.assert_allclose(M, M.T, atol=0)
    assert np.linalg.eigvalsh(M).min() > 0
    # rigid translation at speed u: kinetic energy ½ m u²
    v = np.zeros(model.n_dof)
    R0 = lie.exp_so3(q[0:3])
    v[3:6] = R0 @ np.array([0.0, 0.0, 0.0]) + np.array([0.3, -0.4, 0.0])
    q_straight = q.copy()
    q_straight[6:] = 0.0
    M_s = mass_matrix(model, kinematics(model, q_straight))
    assert 0.5 * v @ M_s @ v == pytest.approx(0.5 * model.rod.mass_kg() * 0.25, rel=1e-12)


@pytest.mark.parametrize("theta_sq", [0.0, 3e-5, -2e-5, 1e-4, 0.04, 2.5, 30.0])
@pytest.mark.parametrize("rate", [0.0, 1e-20])
def test_the_fused_exponential_coefficients_are_the_two_functions_to_the_last_bit(theta_sq, rate):
    """`kinematics._exp_coefficients` computes `_so3_coefficients` and `se3_tangent_coefficients` with one sine and
    cosine: the same numbers, real and at the complex step's θ² + iε·rate, on both sides of the series branch."""
    from sim.cosserat._lie_extra import _so3_coefficients, se3_tangent_coefficients
    from sim.cosserat.kinematics import _exp_coefficients

    for t2 in (theta_sq, complex(theta_sq, rate)):
        fused = _exp_coefficients(t2)
        apart = (*_so3_coefficients(t2), *se3_tangent_coefficients(t2))
        assert [complex(c) for c in fused] == [complex(c) for c in apart]
