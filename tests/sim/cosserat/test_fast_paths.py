"""The numba fast paths of the step (contact Jacobians, force/slip, Newton-matrix contact blocks) against
their plain-numpy references, and the conditioning of the Newton matrix at a grazing contact."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat import (
    ContactSettings,
    CurvedTube,
    Material,
    Plane,
    RodDescription,
    Smoothing,
    build_model,
    initial_state,
    uniform_rod,
)
from sim.cosserat.contact import contact_query, contact_query_reference
from sim.cosserat.forces import kinematics
from sim.cosserat.step_problem import StepProblem

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "rod"


def _tube_and_plane_model():
    rod = uniform_rod(0.02, 1.5e-4, 55e6, 1200.0, 0.45, damping_time_s=1e-3)
    obstacles = (Plane(point_m=(0.0, 0.0, -0.01)), CurvedTube(4e-4, 5e-3, 3e-3, 90.0))
    contact = ContactSettings(
        obstacles, friction_coefficient=0.3, m_sections=6, smoothing=Smoothing("sigmoid", 50.0), force_scale_n=1e-4
    )
    return build_model(rod, 6, base="free", gravity_m_s2=(0.0, 0.0, 0.0), contact=contact)


def _single_tilted_plane_model():
    rod = uniform_rod(0.02, 1.5e-4, 55e6, 1200.0, 0.45)
    plane = Plane(point_m=(0.003, -0.002, -0.01), normal=(0.2, -0.1, 1.0))
    contact = ContactSettings(
        (plane,), friction_coefficient=0.3, m_sections=6, smoothing=Smoothing("sigmoid", 50.0), force_scale_n=1e-4
    )
    return build_model(rod, 6, base="free", contact=contact)


@pytest.mark.parametrize("make_model", [_tube_and_plane_model, _single_tilted_plane_model], ids=["two", "one"])
def test_numba_contact_query_matches_the_numpy_reference(make_model):
    """Fast contact query (numba Jacobians, the plane's frame tiled once) against the per-obstacle numpy
    reference, with two obstacles (concatenated candidates) and with a single tilted plane."""
    model = make_model()
    rng = np.random.default_rng(3)
    q = 0.05 * rng.normal(size=model.n_dof)
    q[3:6] = (-0.015, 1e-4, -1e-4)
    kin = kinematics(model, q)
    fast, ref = contact_query(model, kin), contact_query_reference(model, kin)
    scale = np.abs(ref.jac_contact).max()
    np.testing.assert_allclose(fast.jac_position, ref.jac_position, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(fast.jac_contact, ref.jac_contact, rtol=0, atol=1e-14 * scale)
    np.testing.assert_array_equal(fast.gap_m, ref.gap_m)
    for fast_frame, ref_frame in ((fast.normal, ref.normal), (fast.t1, ref.t1), (fast.t2, ref.t2)):
        np.testing.assert_array_equal(fast_frame, ref_frame)


def test_numba_newton_matrix_matches_the_numpy_reference():
    model = _tube_and_plane_model()
    state = initial_state(model, base_position_m=(-0.015, 1e-4, -1e-4))
    rng = np.random.default_rng(4)
    state.v = 0.01 * rng.normal(size=model.n_dof)
    state.slack = rng.normal(size=state.slack.shape)
    for frame_terms in (False, True):
        problem = StepProblem(model, state, 0.002, None)
        problem.frame_terms = frame_terms
        x = problem.pack(state.v, state.slack)
        fast, ref = problem.jacobian(x), problem._jacobian_reference(x)
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-13 * np.abs(ref).max())


def test_separated_nodes_carry_no_friction_and_keep_the_newton_matrix_well_scaled():
    """The sigmoid's Λ_n = u_n·D(u_n) is slightly negative at separated nodes; a friction bound μΛ_n < 0
    used to turn into a gain −μΛ_n/ε (ε = 1e-9) at u_t = 0: entries ~1e10 and rcond ~1e-22 at the start of
    the tube insertion. With the bound μ·max(Λ_n, 0) separated nodes carry no friction at all; with the
    prescribed base speed in v_ref the dynamic rows are no longer scaled by 1/(1e-6 L/h)."""
    from sim.cosserat.step_problem import predicted_slack

    scenario = load_rod_experiment(EXPERIMENTS / "tube_insertion.toml", {})
    model, state = scenario.model, scenario.initial_state.copy()
    problem = StepProblem(model, state, scenario.dt_s, scenario.base_motion.alpha(scenario.dt_s))
    v = problem.v_fixed.copy()
    x = problem.pack(v, predicted_slack(problem, state.slack, v))
    _, contact, _ = problem.evaluate(x)
    separated = contact["lam_n"] <= 0
    assert np.any(separated)
    assert np.all(contact["lam_n"][separated] < 0)  # the sigmoid's negative normal "force"
    # the friction slack's force exactly (the world force's tangential part is only zero to rounding, ~1e-234 N,
    # where the bell mouth's normal is oblique)
    np.testing.assert_array_equal(contact["lam_t"][separated], 0.0)
    jac = problem.jacobian(x)
    assert np.abs(jac[:, problem.n_free :]).max() < 1e6  # was 7.8e9 (negative bound), 2.8e8 (v_ref = 1e-6 L/h)
    assert 1.0 / np.linalg.cond(jac, 1) > 1e-12  # was 4e-22


@pytest.mark.parametrize(
    "plane",
    [Plane(), Plane(point_m=(0.1, -0.2, 0.03), normal=(0.3, -0.2, 1.0)), Plane(normal=(1.0, 0.0, 0.0))],
    ids=["floor", "tilted", "wall normal along the preferred tangent"],
)
def test_plane_query_with_cached_frame_matches_the_per_node_reference(plane):
    rng = np.random.default_rng(5)
    p = rng.normal(size=(9, 3))
    r = rng.uniform(1e-3, 5e-3, size=9)
    for fast, ref in zip(plane.query(p, r), plane.query_reference(p, r), strict=True):
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-15)
    gap, normal, t1, t2 = plane.query(p, r)
    np.testing.assert_allclose(np.einsum("ij,ij->i", normal, t1), 0.0, atol=1e-15)
    np.testing.assert_allclose(np.cross(normal, t1), t2, atol=1e-15)


@pytest.mark.parametrize("scale", [1e-4, 0.4, 2.0], ids=["small-angle series", "moderate", "large rotations"])
def test_rate_sweep_matches_the_complex_step_sweep(scale):
    """`forward_sweep_with_rates` (real J, complex 6-vector η only) against the complex sweep of the whole J:
    poses, J, η = J q̇ and J̇ q̇ to 1e-13 relative, with a pre-curved reference strain and a moving base."""
    from sim.cosserat.kinematics import forward_sweep, forward_sweep_with_rates

    rod = uniform_rod(0.3, 4e-3, 1e6, 1100.0, 0.45)
    model = build_model(rod, 7, base="free", reference_strain=(0.5, -2.0, 1.0, 1.05, 0.02, -0.01))
    g = model.grid
    rng = np.random.default_rng(11)
    q = scale * rng.normal(size=model.n_dof)
    v = 3.0 * rng.normal(size=model.n_dof)
    eps = 1e-30
    Rc, pc, Jc = forward_sweep(
        q + 1j * eps * v, model.xi_ref_nodes.astype(complex), g.x_nodes, g.x_points, g.section_of_point
    )
    R, p, J, eta, eta_dot = forward_sweep_with_rates(
        q, v, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point, eps
    )
    np.testing.assert_allclose(R, Rc.real, rtol=0, atol=1e-13)
    np.testing.assert_allclose(p, pc.real, rtol=0, atol=1e-13 * rod.length_m)
    np.testing.assert_allclose(J, Jc.real, rtol=0, atol=1e-13 * np.abs(Jc.real).max())
    eta_ref = Jc.real @ v
    jdot_v_ref = (Jc.imag / eps) @ v
    np.testing.assert_allclose(eta, eta_ref, rtol=0, atol=1e-13 * np.abs(eta_ref).max())
    np.testing.assert_allclose(eta_dot, jdot_v_ref, rtol=0, atol=1e-13 * np.abs(jdot_v_ref).max())


@pytest.mark.parametrize("tip_force_n", [None, (0.01, -0.02, 0.03)], ids=["no tip load", "tip load"])
def test_fast_step_residual_matches_the_reference_path(tip_force_n):
    """The step's residual and Newton matrix from the rate sweep, the fused inertia kernel, the contact-law
    kernel and the composite mass matrix equal those of the complex-J sweep, `inertia_and_gravity` and the
    numpy slack maps (to 1e-12 of the largest entry), on the plane drop mid-flight."""

    scenario = load_rod_experiment(EXPERIMENTS / "rod_on_plane.toml", {"model.n_sections": 8, "contact.m_sections": 8})
    model, state = scenario.model, scenario.initial_state.copy()
    if tip_force_n is not None:
        model = dataclasses.replace(model, tip_force_n=np.array(tip_force_n))
    rng = np.random.default_rng(6)
    state.v = state.v + 0.5 * rng.normal(size=model.n_dof)
    state.slack = 0.1 * rng.normal(size=state.slack.shape)
    fast = StepProblem(model, state, scenario.dt_s, None)
    ref = StepProblem(model, state, scenario.dt_s, None)
    ref.reference_kinematics = True
    x = fast.pack(state.v + 0.3 * rng.normal(size=model.n_dof), state.slack)
    r_fast, r_ref = fast.residual(x), ref.residual(x)
    np.testing.assert_allclose(r_fast, r_ref, rtol=0, atol=1e-12 * np.abs(r_ref).max())
    j_fast, j_ref = fast.jacobian(x), ref.jacobian(x)
    np.testing.assert_allclose(j_fast, j_ref, rtol=0, atol=1e-12 * np.abs(j_ref).max())


@pytest.mark.parametrize("kind", ["heaviside", "sigmoid", "trigonometric"])
def test_contact_law_kernel_matches_the_slack_maps(kind):
    """`contact_laws` (numba) against `slack.normal_map`/`slack.friction_map` and the force assembly of
    `StepProblem._contact_reference`, on separated, grazing, sticking and sliding nodes."""
    from sim.cosserat._slack_kernels import contact_laws, smoothing_arguments
    from sim.cosserat.slack import friction_map, normal_map

    smoothing = Smoothing(kind, 50.0 if kind == "sigmoid" else 2.0)
    rng = np.random.default_rng(7)
    k = 40
    slack = rng.normal(scale=2.0, size=(k, 3))
    slack[:8, 0] = -np.abs(slack[:8, 0])  # separated
    slack[8:12, 0] = 0.0  # grazing
    slack[12:16, 1:3] = 0.0  # u_t = 0 (regularised |u_t|)
    slack[16:24, 1:3] *= 1e-3  # deep inside the friction cone: sticking
    normal = rng.normal(size=(k, 3))
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    t1 = np.cross(normal, rng.normal(size=(k, 3)))
    t1 /= np.linalg.norm(t1, axis=1)[:, None]
    t2 = np.cross(normal, t1)
    mu, force_scale = 0.4, 0.37
    laws = contact_laws(*smoothing_arguments(smoothing), mu, force_scale, slack, normal, t1, t2)
    lam_n, dlam_n, gap_map, dgap_map, dbound_dun = laws.lam_n, laws.dlam_n, laws.gap_map, laws.dgap_map, laws.dbound_dun
    lam_t, dlt_da, slip_map, dslip_da, dlt_du, dslip_du = (
        laws.lam_t, laws.dlt_da, laws.slip_map, laws.dslip_da, laws.dlt_du, laws.dslip_du
    )  # fmt: skip
    force, df_dun, df_dut = laws.force, laws.df_dun, laws.df_dut

    ref_n = normal_map(smoothing, slack[:, 0])
    bound = mu * np.where(ref_n[0] > 0, ref_n[0], 0.0)
    ref_t = friction_map(smoothing, slack[:, 1:3], bound)
    fast_parts = (lam_n, dlam_n, gap_map, dgap_map, lam_t, dlt_du, dlt_da, slip_map, dslip_du, dslip_da)
    for fast, ref in zip(fast_parts, (*ref_n, *ref_t), strict=True):
        np.testing.assert_allclose(fast, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dbound_dun, mu * np.where(ref_n[0] > 0, ref_n[1], 0.0), rtol=1e-13, atol=0)
    # the sample covers every regime: separated, sticking (no slip) and sliding nodes
    ut = np.linalg.norm(slack[:, 1:3], axis=1)
    slip = np.linalg.norm(slip_map, axis=1)
    assert np.any(lam_n <= 0) and np.any(slip[16:24] < 1e-2 * ut[16:24]) and np.any(slip > 0.5 * ut)
    ref_force = force_scale * (ref_n[0][:, None] * normal + ref_t[0][:, 0:1] * t1 + ref_t[0][:, 1:2] * t2)
    np.testing.assert_allclose(force, ref_force, rtol=1e-13, atol=1e-13)
    dlt_dun = ref_t[2] * (mu * np.where(ref_n[0] > 0, ref_n[1], 0.0))[:, None]
    ref_df_dun = force_scale * (ref_n[1][:, None] * normal + dlt_dun[:, 0:1] * t1 + dlt_dun[:, 1:2] * t2)
    np.testing.assert_allclose(df_dun, ref_df_dun, rtol=1e-13, atol=1e-13)
    bt = np.stack([t1, t2], axis=1)
    np.testing.assert_allclose(df_dut, force_scale * np.einsum("kai,kab->kib", bt, ref_t[1]), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("n_sections", [1, 3, 12])
def test_composite_mass_matrix_matches_the_plain_quadrature(n_sections):
    """`mass_matrix` (composite inertias, CRBA-like) equals Bᵀ B over the quadrature points to 1e-13 of its
    largest entry, for a tapered, pre-curved, twisted rod with contact nodes and markers in the sweep."""
    from sim.cosserat.forces import mass_matrix, mass_matrix_reference

    rod = RodDescription(0.4, 6e-3, 2e-3, Material(2e6, 0.45, 1100.0))
    contact = ContactSettings((Plane(),), friction_coefficient=0.3, m_sections=5, smoothing=Smoothing("sigmoid", 50.0))
    model = build_model(
        rod,
        n_sections,
        base="free",
        contact=contact,
        reference_strain=(0.3, 1.5, -2.0, 1.02, 0.01, 0.0),
        extra_points_m=(0.05, 0.33),
    )
    rng = np.random.default_rng(n_sections)
    for scale in (1e-3, 0.5):
        q = scale * rng.normal(size=model.n_dof)
        kin = kinematics(model, q)
        ref = mass_matrix_reference(model, kin)
        fast = mass_matrix(model, kin)
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
        np.testing.assert_array_equal(fast, fast.T)


def test_fast_step_residual_matches_the_reference_path_clamped_moving_base_with_a_pin():
    """As above for a clamped base that is moved during the step (prescribed base velocity enters η and J̇q̇
    through the base columns), a pinned point (constraint multipliers) and a tilted plane."""
    from sim.cosserat.constraints import PointConstraint

    rod = RodDescription(0.3, 5e-3, 2.5e-3, Material(1e6, 0.45, 1100.0), damping_time_s=0.01)
    contact = ContactSettings(
        (Plane(normal=(0.1, 0.0, 1.0)),), friction_coefficient=0.4, m_sections=6, smoothing=Smoothing("sigmoid", 50.0)
    )
    pin = PointConstraint(0.3, "position", (0.29, 0.01, -0.02))
    model = build_model(rod, 6, base="clamped", contact=contact, constraints=(pin,))
    state = initial_state(model, base_position_m=(0.0, 0.0, 0.01))
    rng = np.random.default_rng(9)
    state.v = 0.3 * rng.normal(size=model.n_dof)
    state.slack = 0.1 * rng.normal(size=state.slack.shape)
    base_next = state.q[0:6] + 0.005 * np.array([0.2, -0.1, 0.3, 0.05, 0.02, -0.04])
    fast = StepProblem(model, state, 0.005, base_next)
    ref = StepProblem(model, state, 0.005, base_next)
    ref.reference_kinematics = True
    x = fast.pack(state.v, state.slack, multipliers=rng.normal(size=3))
    r_fast, r_ref = fast.residual(x), ref.residual(x)
    np.testing.assert_allclose(r_fast, r_ref, rtol=0, atol=1e-12 * np.abs(r_ref).max())
    j_fast, j_ref = fast.jacobian(x), ref.jacobian(x)
    np.testing.assert_allclose(j_fast, j_ref, rtol=0, atol=1e-12 * np.abs(j_ref).max())


def test_regular_slack_kernels_match_the_slack_reference():
    """`trigonometric_slack_from_regular` / `regular_from_slack` (numba) against `slack.slack_from_regular` /
    `slack.regular_slack`, on separated, grazing, sticking, knee and sliding nodes, and at zero force."""
    from sim.cosserat._slack_kernels import regular_from_slack, trigonometric_slack_from_regular
    from sim.cosserat.slack import regular_slack, slack_from_regular

    rng = np.random.default_rng(3)
    y = rng.normal(scale=2.0, size=(60, 3))
    y[:8, 0] = -np.abs(y[:8, 0])  # separated: zero friction bound
    y[8:12, 0] = 0.0
    y[12:20, 0] = 1e-4 * rng.random(8)  # grazing
    y[20:28, 1:3] *= 1e-3  # deep stick
    y[28:36, 1:3] *= (0.5 * y[28:36, 0] / np.linalg.norm(y[28:36, 1:3], axis=1))[:, None]  # at the knee
    for w in (2.0, 4.0, 20.0):
        smoothing = Smoothing("trigonometric", w)
        fast = trigonometric_slack_from_regular(w, 0.5, y)
        ref = slack_from_regular(smoothing, y, 0.5)
        np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(regular_from_slack(smoothing, 0.5, ref), regular_slack(smoothing, ref, 0.5),
                                   rtol=1e-13, atol=1e-13)  # fmt: skip
        np.testing.assert_allclose(regular_slack(smoothing, fast, 0.5), y, rtol=1e-12, atol=1e-12)
