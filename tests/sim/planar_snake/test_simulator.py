"""Hybrid simulation: ground friction (analytic stop, no creep), impacts, contact flow, detachment."""

import numpy as np
import pytest

from sim.planar_snake import (
    PlanarSnakeError,
    PlanarSnakeModel,
    initial_state,
    joint_angles,
    kinetic_energy,
    link_centres,
    step,
)
from sim.planar_snake.ground_friction import solve_ground_friction, solve_ground_friction_reference
from sim.planar_snake.simulator import _ground_operator

STRAIGHT = np.zeros(12)


def hold(model, state):
    """References equal to the current joint angles with zero rate: the servos apply no torque at rest."""
    return joint_angles(model, state.q), np.zeros(model.n_links - 1)


def run(model, state, seconds, refs=None):
    refs = refs if refs is not None else hold(model, state)
    for _ in range(round(seconds / model.time_step_s)):
        step(model, state, *refs)


def test_sliding_straight_snake_stops_like_a_block():
    """A straight snake sliding along its axis decelerates at μ g and stops: v(t) = v0 − μ g t."""
    model = PlanarSnakeModel()
    v0 = 0.5
    state = initial_state(model, STRAIGHT, np.r_[np.zeros(10), v0, 0.0])
    refs = hold(model, state)
    mu_g = model.ground_mu * model.gravity_m_s2
    t_stop = v0 / mu_g
    run(model, state, 0.1, refs)
    assert state.qd[10] == pytest.approx(v0 - mu_g * 0.1, abs=1e-9)
    run(model, state, 0.2, refs)
    assert np.max(np.abs(state.qd)) < 1e-12  # stopped exactly, no creep afterwards
    # discrete (semi-implicit Euler) travel differs from v0²/2μg by at most h v0
    assert state.q[10] == pytest.approx(v0**2 / (2 * mu_g), abs=model.time_step_s * v0)
    assert np.max(np.abs(state.q[:10])) < 1e-12 and abs(state.q[11]) < 1e-12
    assert t_stop < 0.3


def test_resting_snake_with_small_joint_torques_does_not_creep():
    """Joint torques below the friction limits: the set-valued friction holds every link exactly still."""
    model = PlanarSnakeModel(joint_kp_nm_rad=1.0)
    q0 = np.r_[np.deg2rad([7, -32, -57, -46, -8, 33, 53, 45, 12, -23]), 0.0, 0.0]
    state = initial_state(model, q0)
    phi = joint_angles(model, state.q)
    refs = (phi + 0.05 * np.sign(np.sin(np.arange(9))), np.zeros(9))  # up to 0.05 N m per joint
    run(model, state, 1.0, refs)
    assert np.max(np.abs(state.q - q0)) < 1e-10
    assert np.max(np.abs(state.qd)) < 1e-10
    # the same pose with 20x larger torques does move: the test can fail
    strong = PlanarSnakeModel(joint_kp_nm_rad=20.0)
    state2 = initial_state(strong, q0)
    run(strong, state2, 0.2, refs)
    assert np.max(np.abs(state2.q - q0)) > 1e-3


def test_pgs_matches_reference_solver():
    model = PlanarSnakeModel()
    rng = np.random.default_rng(5)
    q = np.r_[rng.uniform(-1, 1, 10), 0, 0]
    G = _ground_operator(model, q)
    from sim.planar_snake import mass_matrix

    H = G.T @ np.linalg.solve(mass_matrix(model, q), G)
    v_free = G.T @ rng.normal(size=12) * 0.05
    lim_f, lim_t = np.full(10, 0.003), np.full(10, 0.0001)
    P, sweeps = solve_ground_friction(H, v_free, np.zeros(30), lim_f, lim_t, max_sweeps=5000, tol=1e-14)
    P_ref = solve_ground_friction_reference(H, v_free, lim_f, lim_t, 200_000)
    # the post-step velocities (unique, unlike P when H is singular) agree
    np.testing.assert_allclose(v_free + H @ P, v_free + H @ P_ref, atol=1e-7)


def obstacle_below_link(link, gap, model=None, radius=0.05):
    model = model or PlanarSnakeModel(ground_mu=0.0)
    x, y = link_centres(model, STRAIGHT)
    return model.with_obstacles(np.array([[x[link] + 0.01, y[link] - radius - gap]]), np.array([radius]))


def test_inelastic_impact_and_contact_flow():
    """A straight snake translating onto an obstacle below link 5. The contact itself is inelastic; the
    compliant joint servos store energy, so the body may rebound and hit again (each time inelastically)."""
    model = obstacle_below_link(4, 0.01)
    state = initial_state(model, STRAIGHT, np.r_[np.zeros(10), 0.0, -0.3])
    e0 = kinetic_energy(model, state.q, state.qd)
    refs = hold(model, state)
    sides = set()
    for _ in range(200):
        step(model, state, *refs)
        sides |= {int(a) for a in state.alpha[state.alpha != 0]}
    s = state.stats
    assert s.impacts >= 1 and sides == {1}  # force along +y of link 5 (eq. 15): the obstacle is below
    assert np.all(state.alpha[[0, 1, 2, 3, 5, 6, 7, 8, 9]] == 0)
    assert s.min_post_impact_normal_velocity_m_s >= -1e-12
    assert s.max_penetration_m < 1e-6 and s.max_drift_before_projection_m < 1e-6
    assert kinetic_energy(model, state.q, state.qd) < e0
    assert s.flow_lcp_solves > 0 and s.max_complementarity_residual < 1e-8 and s.min_lambda >= 0.0
    assert s.p_matrix_checks == s.flow_lcp_solves and s.p_matrix_failures == 0 and s.smallest_principal_minor > 0


def test_pushing_into_obstacle_with_ground_friction_keeps_contact_without_penetration():
    """Joint torques press the body onto an obstacle for 1 s: λ > 0 persists, gap stays ≥ −1e-6 m."""
    model = obstacle_below_link(4, 0.002, PlanarSnakeModel())
    state = initial_state(model, STRAIGHT, np.r_[np.zeros(10), 0.0, -0.2])  # drifts onto the obstacle
    bend = np.zeros(9)
    bend[3], bend[4] = -0.6, -0.6  # φ < 0 at joints 4, 5: both halves fold up, link 5 is pushed down
    run(model, state, 1.0, (bend, np.zeros(9)))
    s = state.stats
    assert s.impacts >= 1 and s.max_penetration_m < 1e-6 and s.max_drift_before_projection_m < 1e-6
    assert s.max_complementarity_residual < 1e-8 and s.min_lambda >= 0.0 and s.p_matrix_failures == 0


def test_detachment_when_link_slides_off_the_obstacle():
    """The tail link moves down onto an obstacle and along +x: the obstacle slips off its rear end, α → 0."""
    model = obstacle_below_link(0, 0.005)
    state = initial_state(model, STRAIGHT, np.r_[np.zeros(10), 1.0, -0.2])
    run(model, state, 0.5)
    assert state.stats.impacts >= 1 and state.stats.detachments >= 1 and not state.alpha.any()


def test_initial_pose_intersecting_an_obstacle_is_rejected():
    model = obstacle_below_link(4, -0.01)
    with pytest.raises(PlanarSnakeError, match="intersects obstacle 0 with link 5"):
        initial_state(model, STRAIGHT)


def test_compiled_event_location_matches_brent():
    from sim.planar_snake.obstacles import random_field
    from sim.planar_snake.simulator import _first_impact, _first_impact_reference

    field = random_field(5, (-0.8, 0.8), (-0.5, 0.5), 14, (0.03, 0.06), 0.14)
    rng = np.random.default_rng(8)
    found = 0
    for _ in range(200):
        model = PlanarSnakeModel().with_obstacles(field.centres_m, field.radii_m)
        q0 = np.r_[rng.uniform(-1, 1, 10), rng.uniform(-0.2, 0.2, 2)]
        from sim.planar_snake import all_gaps

        if all_gaps(model, q0).min() <= 0:
            continue
        state = initial_state(model, q0)
        v = rng.normal(size=12) * 2.0
        fast = _first_impact(model, state, q0, v, 0.05)
        ref = _first_impact_reference(model, state, q0, v, 0.05)
        assert (fast is None) == (ref is None)
        if fast is not None:
            found += 1
            assert fast[1:] == ref[1:] and fast[0] == pytest.approx(ref[0], abs=1e-12)
    assert found > 10


def test_compiled_free_dynamics_match_numpy_reference():
    from sim.planar_snake import coriolis_force, mass_matrix
    from sim.planar_snake.simulator import _free_dynamics_kernel, _implicit_servo

    model = PlanarSnakeModel(joint_torque_limit_nm=3.0)
    rng = np.random.default_rng(12)
    for _ in range(20):
        q, qd = np.r_[rng.uniform(-1, 1, 10), rng.normal(size=2)], rng.normal(size=12)
        ref, rate = rng.normal(size=9) * 0.3, rng.normal(size=9)
        u, Minv_eff, Minv, f, G, MinvG, H = _free_dynamics_kernel(
            q,
            qd,
            model._Nt,
            model.V,
            0.07,
            1.0,
            0.0016,
            model.joint_kp_nm_rad,
            model.joint_kd_nms_rad,
            3.0,
            model.time_step_s,
            ref,
            rate,
        )
        u_ref, u_rhs, stiffness = _implicit_servo(model, q, qd, ref, rate)
        M = mass_matrix(model, q)
        f_ref = coriolis_force(model, q, qd)
        f_ref[:9] += u_rhs
        f_ref[1:10] -= u_rhs
        np.testing.assert_allclose(u, u_ref, atol=1e-12)
        np.testing.assert_allclose(Minv, np.linalg.inv(M), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Minv_eff, np.linalg.inv(M + stiffness), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(f, f_ref, atol=1e-10)
        G_ref = _ground_operator(model, q)
        np.testing.assert_allclose(G, G_ref, atol=1e-14)
        np.testing.assert_allclose(H, G_ref.T @ np.linalg.inv(M + stiffness) @ G_ref, atol=1e-10)


def _multi_contact_model_and_state(rng):
    """A random posture with pegs placed just beside several links (interior contact points)."""
    base = PlanarSnakeModel()
    q = np.r_[rng.uniform(-0.5, 0.5, 10), 0.0, 0.0]
    x, y = link_centres(base, q)
    links = np.array([1, 4, 7])
    centres, sides = [], rng.choice([-1.0, 1.0], links.size)
    for i, side in zip(links, sides, strict=True):
        normal = np.array([-np.sin(q[i]), np.cos(q[i])])
        centres.append(np.array([x[i], y[i]]) + side * 0.05 * normal)  # radius 0.05: touching
    model = base.with_obstacles(np.array(centres), np.full(links.size, 0.05))
    return model, q, links, np.arange(links.size)


def test_frictionless_lcp_matrix_is_symmetric_positive_definite_and_friction_breaks_symmetry():
    """Proposition 12: A = C̄M⁻¹C̄ᵀ is SPD (so a P-matrix); with obstacle friction (32) A loses symmetry but,
    for μ_o = 0.2, stays a P-matrix (Proposition 13 / Remark 14)."""
    from sim.lcp import p_matrix_test
    from sim.planar_snake import contact_terms, mass_matrix

    rng = np.random.default_rng(31)
    for _ in range(50):
        model, q, links, obstacles = _multi_contact_model_and_state(rng)
        qd = rng.normal(size=12)
        terms = contact_terms(model, q, qd, links, obstacles)
        Minv = np.linalg.inv(mass_matrix(model, q))
        A0 = terms.rows @ Minv @ terms.rows.T
        np.testing.assert_allclose(A0, A0.T, atol=1e-14)
        assert np.linalg.eigvalsh(A0).min() > 0 and p_matrix_test(A0).is_p_matrix
        A = terms.rows @ Minv @ (terms.rows.T - model.obstacle_mu * terms.friction_map)
        assert np.abs(A - A.T).max() > 1e-6
        assert p_matrix_test(A).is_p_matrix


def test_impact_lcp_leaves_no_contact_approaching():
    """Proposition 15 / eq. 36–37: after the impact map every contacted link has v_n ≥ 0, λ ⊥ v_n, and the
    kinetic energy does not grow."""
    from sim.planar_snake import mass_matrix
    from sim.planar_snake.simulator import _impact

    rng = np.random.default_rng(32)
    for _ in range(50):
        model, q, links, obstacles = _multi_contact_model_and_state(rng)
        state = initial_state(PlanarSnakeModel(), q)  # the obstacle-free model: the pegs touch by construction
        state.alpha[links] = 1
        state.contact_obstacle[links] = obstacles
        qd = rng.normal(size=12)
        qd_plus, v_min, residual = _impact(model, state, q, qd, np.linalg.inv(mass_matrix(model, q)))
        assert v_min >= -1e-12 and residual < 1e-10
        assert kinetic_energy(model, q, qd_plus) <= kinetic_energy(model, q, qd) + 1e-12


def test_compiled_inverse_mass_matches_numpy():
    from sim.planar_snake import mass_matrix
    from sim.planar_snake.simulator import _inverse_mass_kernel

    model = PlanarSnakeModel()
    q = np.r_[np.random.default_rng(3).uniform(-1, 1, 10), 0.2, 0.1]
    np.testing.assert_allclose(
        _inverse_mass_kernel(q, model.V, 0.07, 1.0, 0.0016), np.linalg.inv(mass_matrix(model, q)), atol=1e-10
    )
