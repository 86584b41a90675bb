"""The numba fast paths of the step (contact Jacobians, force/slip, Newton-matrix contact blocks) against
their plain-numpy references, and the conditioning of the Newton matrix at a grazing contact."""

from pathlib import Path

import numpy as np
import pytest

from sim.cosserat import ContactSettings, CurvedTube, Plane, Smoothing, build_model, initial_state, uniform_rod
from sim.cosserat.dynamics import StepProblem, contact_query, contact_query_reference, kinematics

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "rod"


def _tube_and_plane_model():
    rod = uniform_rod(0.02, 1.5e-4, 55e6, 1200.0, 0.45, damping_time_s=1e-3)
    obstacles = (Plane(point_m=(0.0, 0.0, -0.01)), CurvedTube(4e-4, 5e-3, 3e-3, 90.0))
    contact = ContactSettings(obstacles, 0.3, 6, Smoothing("sigmoid", 50.0), force_scale_n=1e-4)
    return build_model(rod, 6, base="free", gravity_m_s2=(0.0, 0.0, 0.0), contact=contact)


def test_numba_contact_query_matches_the_numpy_reference():
    model = _tube_and_plane_model()
    rng = np.random.default_rng(3)
    q = 0.05 * rng.normal(size=model.n_dof)
    q[3:6] = (-0.015, 1e-4, -1e-4)
    kin = kinematics(model, q)
    fast, ref = contact_query(model, kin), contact_query_reference(model, kin)
    scale = np.abs(ref.jac_contact).max()
    np.testing.assert_allclose(fast.jac_position, ref.jac_position, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(fast.jac_contact, ref.jac_contact, rtol=0, atol=1e-14 * scale)
    np.testing.assert_array_equal(fast.gap_m, ref.gap_m)


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
    pytest.importorskip("aiko.rod_experiment")
    from aiko.rod_experiment import load_rod_experiment
    from sim.cosserat.dynamics import _predicted_slack

    scenario = load_rod_experiment(EXPERIMENTS / "tube_insertion.toml", {})
    model, state = scenario.model, scenario.initial_state.copy()
    problem = StepProblem(model, state, scenario.dt_s, scenario.base_motion.alpha(scenario.dt_s))
    v = problem.v_fixed.copy()
    x = problem.pack(v, _predicted_slack(model, state, v, scenario.dt_s, problem))
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
