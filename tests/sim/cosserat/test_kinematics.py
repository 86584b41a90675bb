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


def _exact_coefficients(theta_sq, derivative=False):
    """The five coefficients' power series in θ², summed in exact rationals (60 terms): sinθ/θ = Σ(−θ²)ᵏ/(2k+1)!,
    (1−cosθ)/θ² = Σ(−θ²)ᵏ/(2k+2)!, (θ−sinθ)/θ³ = Σ(−θ²)ᵏ/(2k+3)!, (θ²+2cosθ−2)/(2θ⁴) = Σ(−θ²)ᵏ/(2k+4)!,
    (2θ−3sinθ+θcosθ)/(2θ⁵) = Σ(−θ²)ᵏ(k+1)/(2k+5)!; with ``derivative`` their derivatives in θ², term by term."""
    from fractions import Fraction
    from math import factorial

    x = -Fraction(theta_sq)
    if derivative:  # d/dθ² (−θ²)ᵏ = −k (−θ²)ᵏ⁻¹
        terms = [-k * x ** (k - 1) if k else Fraction(0) for k in range(60)]
    else:
        terms = [x**k for k in range(60)]
    series = [
        sum(t / factorial(2 * k + 1) for k, t in enumerate(terms)),
        sum(t / factorial(2 * k + 2) for k, t in enumerate(terms)),
        sum(t / factorial(2 * k + 3) for k, t in enumerate(terms)),
        sum(t / factorial(2 * k + 4) for k, t in enumerate(terms)),
        sum(t * (k + 1) / factorial(2 * k + 5) for k, t in enumerate(terms)),
    ]
    return [float(c) for c in series]


@pytest.mark.parametrize("theta_sq", [0.0, 3e-5, 1e-4, 1e-3, 0.04, 0.2, 0.99, 1.01, 2.5, 9.0])
def test_the_exponential_coefficients_are_their_series_on_both_sides_of_the_branch(theta_sq):
    """`_lie_extra.exp_coefficients` (one sine and cosine for all five, the sweeps' per-point call) against the exact
    series: its truncated series below the branch (θ² < 1), the closed forms above it, all to 1e-13. The closed
    forms alone lost up to 8 digits of the last two at θ² ~ 1e-4–1e-3 (the branch was at 1e-4)."""
    from sim.cosserat._lie_extra import exp_coefficients

    got = exp_coefficients(theta_sq)
    exact = _exact_coefficients(theta_sq)
    for i, (g, e) in enumerate(zip(got, exact, strict=True)):
        assert g == pytest.approx(e, rel=1e-13), (i, g, e)


@pytest.mark.parametrize("theta_sq", [0.0, 3e-5, 1e-3, 0.04, 0.2, 0.99, 1.01, 2.5, 9.0])
def test_the_exponential_coefficients_carry_their_derivative_at_a_complex_step(theta_sq):
    """At θ² + iε the imaginary parts over ε are the coefficients' derivatives (what the sweeps' complex step needs),
    against the exact series' derivatives on both sides of the branch: to 1e-13 below it; above it the closed forms'
    cancellation leaves the last two ~1e-12 at θ² = 1 (3e-11 at 0.2, which is why the branch is at 1)."""
    from sim.cosserat._lie_extra import exp_coefficients

    eps = 1e-20
    at_step = exp_coefficients(complex(theta_sq, eps))
    exact = _exact_coefficients(theta_sq, derivative=True)
    for i, (c, e) in enumerate(zip(at_step, exact, strict=True)):
        assert c.imag / eps == pytest.approx(e, rel=1e-13 if theta_sq < 1.0 else 5e-12, abs=1e-18), (i, c, e)
