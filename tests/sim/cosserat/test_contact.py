"""Frictional contact: the incline (stick iff tan ϑ ≤ μ, else g(sin ϑ − μ cos ϑ)), Signorini, Jacobian blocks."""

import numpy as np
import pytest

from sim.cosserat import ContactSettings, Plane, Smoothing, build_model, initial_state, uniform_rod
from sim.cosserat.dynamics import step
from sim.cosserat.incline import run_incline
from sim.cosserat.newton import finite_difference_jacobian
from sim.cosserat.rod import RodParameterError
from sim.cosserat.step_problem import StepProblem

G = 9.81


@pytest.mark.parametrize(
    "mu, angle_deg",
    [(0.3, 10.0), (0.3, 25.0), (0.5, 25.0), (0.5, 28.0), (0.0, 15.0)],
)
def test_rod_on_incline_sticks_iff_tan_below_mu_else_slides_at_coulomb_rate(mu, angle_deg):
    th = np.radians(angle_deg)
    res = run_incline(mu, th, duration_s=0.3)
    if np.tan(th) <= mu:
        assert res.sticks
        assert abs(res.acceleration_m_s2) < 1e-6
    else:
        assert not res.sticks
        assert res.acceleration_m_s2 == pytest.approx(G * (np.sin(th) - mu * np.cos(th)), rel=0.03)
    rod_weight = 0.3 * np.pi * 0.005**2 * 1000.0 * G
    assert res.normal_force_n == pytest.approx(rod_weight * np.cos(th), rel=1e-6)


def test_heaviside_smoothing_also_sticks_and_slides():
    stick = run_incline(0.4, np.radians(15.0), duration_s=0.2, smoothing=Smoothing("heaviside"))
    slide = run_incline(0.4, np.radians(35.0), duration_s=0.2, smoothing=Smoothing("heaviside"))
    assert stick.sticks and not slide.sticks
    th = np.radians(35.0)
    assert slide.acceleration_m_s2 == pytest.approx(G * (np.sin(th) - 0.4 * np.cos(th)), rel=0.03)


def test_trigonometric_smoothing_slides_at_coulomb_rate():
    # (its stick case does not converge from rest at zero gap: see docs/cosserat.md, "Known limits")
    slide = run_incline(0.4, np.radians(35.0), duration_s=0.2, smoothing=Smoothing("trigonometric", 2.0))
    th = np.radians(35.0)
    assert slide.acceleration_m_s2 == pytest.approx(G * (np.sin(th) - 0.4 * np.cos(th)), rel=0.03)


def test_resting_rod_satisfies_signorini_with_zero_gap_and_weight_balanced():
    rod = uniform_rod(0.3, 0.005, 1e6, 1000.0)
    contact = ContactSettings((Plane(),), friction_coefficient=0.5, m_sections=8, smoothing=Smoothing("heaviside"))
    model = build_model(rod, 8, base="free", contact=contact)
    state = initial_state(model, base_position_m=(0, 0, 0.005))
    state.slack[:, 0] = 1.0
    for _ in range(20):
        info = step(model, state, 0.005)
    assert np.all(np.abs(info.contact_gap_m) < 1e-9)
    assert np.all(info.contact_force_n[:, 2] >= 0)
    assert np.sum(info.contact_force_n[:, 2]) == pytest.approx(rod.mass_kg() * G, rel=1e-8)


def test_contact_blocks_of_the_newton_matrix_match_finite_differences():
    """Rows and columns of the slacks are exact (plane contact); only the dropped M/C geometry terms differ."""
    rod = uniform_rod(0.3, 0.005, 1e6, 1000.0)
    model = build_model(
        rod,
        4,
        base="free",
        gravity_m_s2=(2.0, 0, -9.0),
        contact=ContactSettings(
            (Plane(),), friction_coefficient=0.4, m_sections=4, smoothing=Smoothing("sigmoid", 5.0)
        ),
    )
    state = initial_state(model, base_position_m=(0, 0, 0.005))
    rng = np.random.default_rng(0)
    state.slack = rng.normal(size=state.slack.shape)
    problem = StepProblem(model, state, 0.005, None)
    x = problem.pack(state.v, state.slack)
    _, jac = problem.residual_and_jacobian(x)
    fd = finite_difference_jacobian(problem.residual, x)
    nf = problem.n_free
    np.testing.assert_allclose(jac[:, nf:], fd[:, nf:], atol=1e-6 * np.abs(fd).max())
    np.testing.assert_allclose(jac[nf:, :], fd[nf:, :], atol=1e-6 * np.abs(fd[nf:]).max())


def test_tube_mouth_frees_the_rod_outside_and_joins_the_wall_continuously():
    """Before the mouth (x < 0) the tube must not hold the rod (it used to extend its wall to x → −∞); the bell
    mouth's gap and normal meet the straight wall's at x = 0, and the gap's gradient is the normal."""
    from sim.cosserat import CurvedTube

    tube = CurvedTube(4e-4, 3e-3, 3e-3)
    r = np.full(2, 1e-4)
    far_out = np.array([[-3e-3, 1e-3, 0.0], [-5e-3, 0.0, -2e-3]])  # outside the inner radius, before the mouth
    assert np.all(tube.query(far_out, r)[0] > 1e-3)
    side = np.array([[-1e-12, 2.5e-4, 1e-4], [1e-12, 2.5e-4, 1e-4]])
    gap, normal, _, _ = tube.query(side, r)
    np.testing.assert_allclose(gap[0], gap[1], atol=1e-15)
    np.testing.assert_allclose(normal[0], normal[1], atol=1e-8)
    p = np.array([[-4e-4, 3e-4, 2.16e-4]])  # near contact with the flare (gap ≈ 10 µm)
    gap0, n0, _, _ = tube.query(p, r[:1])
    step = 1e-9
    grad = [(tube.query(p + d, r[:1])[0] - tube.query(p - d, r[:1])[0])[0] / (2 * step) for d in np.eye(3) * step]
    assert gap0[0] < 2e-5
    np.testing.assert_allclose(grad, n0[0], atol=5e-3)  # first-order distance: ∇gap = n up to ~gap·R′/R_m (3e-3)


def test_contact_gap_and_slip_scales_override_the_inertial_rule():
    from sim.cosserat.contact import contact_scales

    rod = uniform_rod(0.2, 0.005, 1e6, 1000.0)
    default = build_model(rod, 4, contact=ContactSettings((Plane(),), friction_coefficient=0.5, m_sections=4))
    set_scales = build_model(
        rod,
        4,
        contact=ContactSettings(
            (Plane(),), friction_coefficient=0.5, m_sections=4, gap_scale_m=1e-5, slip_scale_m_s=1e-3
        ),
    )
    s0, s1 = contact_scales(default, 0.005), contact_scales(set_scales, 0.005)
    node_mass = rod.mass_kg() / 4
    assert s0.gap_m == pytest.approx(s0.force_n * 0.005**2 / node_mass)
    assert (s1.force_n, s1.gap_m, s1.slip_m_s) == (s0.force_n, 1e-5, 1e-3)
    with pytest.raises(RodParameterError, match="slip_scale_m_s"):
        ContactSettings((Plane(),), friction_coefficient=0.5, m_sections=4, slip_scale_m_s=0.0)


def test_sigmoid_rod_just_inside_the_cone_sticks_instead_of_creeping_up_slope():
    """μ = 0.5 at 26.5° (tan ϑ = 0.4986): Coulomb sticks. Before the slip map was clamped at zero on the stick side
    (slack.friction_map), the sigmoid rod crept *up* the slope at 3.9e-5 m/s for as long as it ran."""
    res = run_incline(0.5, np.radians(26.5), duration_s=0.5)
    assert res.sticks
    assert abs(res.acceleration_m_s2) < 1e-6
