"""Two rods in one Newton system with rod–rod frictional contact (sim.cosserat.multirod): force balance and
Newton's third law at rest, no energy gain, symmetry, penetration bound, the analytic Newton blocks."""

import numpy as np
import pytest

from sim.cosserat import (
    ContactSettings,
    Material,
    Plane,
    PointConstraint,
    RodDescription,
    Smoothing,
    build_model,
    initial_state,
    uniform_rod,
)
from sim.cosserat.dynamics import step
from sim.cosserat.forces import energy, kinematics
from sim.cosserat.multirod import (
    PairContact,
    SystemStepProblem,
    build_system,
    initial_system_state,
    pair_contact_points,
    pair_scales,
    step_rods,
    system_pair_query,
)
from sim.cosserat.newton import ConvergenceError, NewtonSettings, finite_difference_jacobian
from sim.cosserat.pair_geometry import (
    closest_points_on_centreline,
    closest_points_on_centreline_reference,
    pair_frame_derivatives,
)
from sim.cosserat.rod import RodParameterError

G = 9.81
L, R = 0.3, 0.005


def _crossing(mu=0.5, smoothing=None, damping_time_s=0.02, gravity=(0.0, 0.0, -G), n=8, m=20):
    """Rod 0 (free) dropped crosswise, midpoint over the middle of rod 1, clamped at x = 0 and held fixed at
    x = L. (A cantilever would tilt under the load and the round rod would roll down it: no rest state.)"""
    smoothing = smoothing if smoothing is not None else Smoothing("sigmoid", 50.0)
    rod = uniform_rod(L, R, 1e8, 1000.0, damping_time_s=damping_time_s)
    dropped = build_model(rod, n, base="free", gravity_m_s2=gravity, extra_points_m=pair_contact_points(L, m))
    held = build_model(
        rod, n, base="clamped", gravity_m_s2=gravity, constraints=(PointConstraint(L, "fixed", (L, 0.0, 0.0)),)
    )
    system = build_system(
        [dropped, held], [PairContact(0, 1, friction_coefficient=mu, m_sections=m, smoothing=smoothing)]
    )
    s0 = initial_state(dropped, base_rotation_vector=(0, 0, np.pi / 2), base_position_m=(L / 2, -L / 2, 2 * R + 5e-4))
    state = initial_system_state(system, [s0, initial_state(held)])
    return rod, system, state


@pytest.mark.parametrize("kind", ["sigmoid", "heaviside"])
def test_rod_dropped_across_a_held_rod_rests_with_its_weight_and_the_support_carries_both(kind):
    rod, system, state = _crossing(smoothing=Smoothing(kind, 50.0))
    weight = rod.mass_kg() * G
    for _ in range(200):  # 1 s
        info = step_rods(system, state, 0.005)
    force_on_dropped = info.pairs[0].force_n.sum(axis=0)
    np.testing.assert_allclose(force_on_dropped, [0.0, 0.0, weight], atol=1e-3 * weight)
    held = info.rods[1]
    support = held.base_wrench[3:6] + held.constraint_multipliers[0:3]  # base + end reactions on rod 1
    # rod 1 is in equilibrium under its weight, the supports and −(force on rod 0): both weights reach the supports
    np.testing.assert_allclose(support, [0.0, 0.0, 2 * weight], atol=1e-3 * weight)
    np.testing.assert_allclose(support - [0, 0, weight], force_on_dropped, atol=1e-4 * weight)
    assert np.max(np.abs(state.rods[0].v[0:6])) < 2e-3  # at rest (a slow see-saw mode is left, ≈ 4e-4)
    assert info.iterations <= 4


def test_reordering_the_rods_gives_the_identical_trajectory():
    _, system, state = _crossing(n=6, m=10)
    swapped = build_system(
        system.models[::-1],
        [PairContact(1, 0, friction_coefficient=0.5, m_sections=10, smoothing=Smoothing("sigmoid", 50.0))],
    )
    state_swapped = initial_system_state(swapped, state.rods[::-1])
    for _ in range(40):  # through the impact
        step_rods(system, state, 0.005)
        step_rods(swapped, state_swapped, 0.005)
    for i, j in ((0, 1), (1, 0)):
        np.testing.assert_allclose(state.rods[i].q, state_swapped.rods[j].q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(state.rods[i].v, state_swapped.rods[j].v, rtol=0, atol=1e-9)


def _two_free_crossing_rods(a, b, m=20):
    """Two identical free rods crossing at right angles, 1 mm apart, approaching at ±0.2 m/s (no gravity)."""
    rod = uniform_rod(L, R, 1e7, 1000.0)
    models = [
        build_model(rod, 6, base="free", gravity_m_s2=(0, 0, 0), extra_points_m=pair_contact_points(L, m))
        for _ in range(2)
    ]
    system = build_system(
        models, [PairContact(a, b, friction_coefficient=0.3, m_sections=m, smoothing=Smoothing("heaviside"))]
    )
    lower = initial_state(models[0], base_position_m=(-L / 2, 0, 0), base_velocity=np.array([0, 0, 0, 0, 0, 0.2]))
    upper = initial_state(
        models[1],
        base_rotation_vector=(0, 0, np.pi / 2),
        base_position_m=(0, -L / 2, 2 * R + 1e-3),
        base_velocity=np.array([0, 0, 0, 0, 0, -0.2]),
    )
    return system, initial_system_state(system, [lower, upper])


def test_swapping_which_rod_carries_the_contact_nodes_gives_the_same_collision():
    """A's nodes against B's centreline is one-sided; with a node at the crossing both choices agree to within
    the node-vs-curve discretisation (measured 1.4e-5 m of 12 mm travel). Not to rounding: the mirror image of
    the scene does not map the runs onto each other exactly either (measured 9e-5 m), presumably because the
    free bases' rotation vectors (φ = 0 and π/2 about z) are integrated in exponential coordinates, which are
    not frame-invariant."""
    runs = []
    for a, b in ((0, 1), (1, 0)):
        system, state = _two_free_crossing_rods(a, b)
        impulse = 0.0
        for _ in range(30):
            info = step_rods(system, state, 0.002)
            impulse += 0.002 * info.pairs[0].force_n.sum(axis=0)[2] * (1 if a == 0 else -1)  # on the lower rod
        runs.append((system, state, impulse))
    (sys01, s01, i01), (sys10, s10, i10) = runs
    assert i01 < 0 and i10 < 0  # the upper rod pushes the lower one down
    assert i01 == pytest.approx(i10, rel=1e-3)
    momentum = sys01.models[0].rod.mass_kg() * 0.2
    assert abs(i01) > 0.5 * momentum  # a real collision (measured 1.34 m·v: the flexible rods rebound)
    for k in range(2):
        p01 = kinematics(sys01.models[k], s01.rods[k].q).p
        p10 = kinematics(sys10.models[k], s10.rods[k].q).p
        assert np.max(np.abs(p01 - p10)) < 3e-5


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_contact_never_gains_energy_and_undamped_free_motion_neither(mu):
    """Frictionless contact does no work and friction only dissipates: with implicit Euler the total energy of
    the undamped rods never grows (measured max per step: −6.7e-7 W L at μ = 0, −8.7e-10 W L at μ = 0.5)."""
    rod, system, state = _crossing(mu=mu, smoothing=Smoothing("heaviside"), damping_time_s=0.0)

    def total():
        return sum(energy(m, s.q, s.v)["total"] for m, s in zip(system.models, state.rods, strict=True))

    e0 = total()
    scale = rod.mass_kg() * G * L
    changes, touched = [], False
    for _ in range(80):
        before = total()
        info = step_rods(system, state, 0.005)
        changes.append(total() - before)
        touched |= bool(np.any(info.pairs[0].force_n[:, 2] > 0))
    assert touched
    assert max(changes) <= 1e-9 * scale
    assert total() < e0
    # contact-free reference: the same rods without the pair
    free_system = build_system(system.models)
    _, _, fresh = _crossing(mu=0.0, smoothing=Smoothing("heaviside"), damping_time_s=0.0)
    free_state = initial_system_state(free_system, fresh.rods)
    for _ in range(20):
        before = sum(energy(m, s.q, s.v)["total"] for m, s in zip(free_system.models, free_state.rods, strict=True))
        step_rods(free_system, free_state, 0.005)
        after = sum(energy(m, s.q, s.v)["total"] for m, s in zip(free_system.models, free_state.rods, strict=True))
        assert after - before <= 1e-9 * scale


def test_a_system_without_pairs_steps_each_rod_as_the_single_rod_step_also_with_base_motion():
    _, system, state = _crossing(n=6, m=10)
    lone = build_system(system.models)
    lone_state = initial_system_state(lone, state.rods)
    singles = [s.copy() for s in state.rods]
    for k in range(1, 6):
        moved = np.array([0.0, 0.0, 0.02 * k, 0.0, 0.001 * k, 0.0])  # held rod's base turns and shifts
        step_rods(lone, lone_state, 0.005, base_alpha_next=[None, moved])
        step(lone.models[0], singles[0], 0.005)
        step(lone.models[1], singles[1], 0.005, base_alpha_next=moved)
    for a, b in zip(lone_state.rods, singles, strict=True):
        # same to the Newton tolerance (one joint solve: the rods stop iterating together)
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lone_state.rods[1].q[0:6], moved, rtol=0, atol=1e-15)


def test_parallel_rods_pressed_together_penetrate_no_more_than_the_sigmoid_bound():
    """A soft rod (E = 1 MPa) held at both ends 1 mm above a stiff one (1 GPa), parallel: it sags onto it
    under gravity and rests on it over a length."""
    m, c = 20, 50.0
    z0 = 2 * R + 1e-3
    soft = uniform_rod(L, R, 1e6, 1000.0, damping_time_s=0.05)
    stiff = uniform_rod(L, R, 1e9, 1000.0, damping_time_s=0.05)
    a = build_model(
        soft, 8, constraints=(PointConstraint(L, "fixed", (L, 0, z0)),), extra_points_m=pair_contact_points(L, m)
    )
    b = build_model(stiff, 8, constraints=(PointConstraint(L, "fixed", (L, 0, 0)),))
    system = build_system(
        [a, b], [PairContact(0, 1, friction_coefficient=0.3, m_sections=m, smoothing=Smoothing("sigmoid", c))]
    )
    state = initial_system_state(system, [initial_state(a, base_position_m=(0, 0, z0)), initial_state(b)])
    for _ in range(100):  # settled after ≈ 40 steps
        info = step_rods(system, state, 0.005)
    assert np.max(np.abs(state.rods[0].v)) < 5e-3  # strain rates (1/(m·s)); measured 1.2e-3
    sigma_gap = pair_scales(system, system.pairs[0], 0.005).gap_m
    bound = 0.2784645 * sigma_gap / c  # max |f*(u) − u⁺| of the sigmoid, in gap units (1.4 µm here)
    gaps = info.pairs[0].gap_m
    assert -bound <= np.min(gaps) < 1e-9  # touching (measured |gap| ≈ 5e-17 m at the loaded nodes)
    load = info.pairs[0].force_n[:, 2]
    assert np.count_nonzero(load > 1e-3) >= 3  # rests over a length (measured: 5 nodes, 15–39 mN)
    # symmetric about midspan to 0.6 % (measured; base clamp vs end constraint and n = 8 PLS are not mirror images)
    np.testing.assert_allclose(load, load[::-1], atol=1e-2 * load.max())
    weight = soft.mass_kg() * G
    assert 0.3 * weight < load.sum() < weight  # the rest of its weight goes to its own supports (measured 0.63)
    # friction inside the (sigmoid-widened) Coulomb cone; the sagging rod stretched along B, so the loaded
    # nodes hold it at the cone's edge (measured |F_t| = μF_n: statically indeterminate tangential loads)
    tangential = np.linalg.norm(info.pairs[0].force_n[:, 0:2], axis=1)
    touching = load > 1e-3
    assert np.all(tangential[touching] <= 0.3 * load[touching] * (1 + 0.2784645 / c))


@pytest.mark.parametrize("taper", [False, True])
def test_pair_rows_and_columns_of_the_newton_matrix_match_central_differences(taper):
    """Exact blocks (v = 0 so the dropped ∂J/∂q·v terms vanish): every row of the pair slack columns and every
    column of the pair rows; with a tapered B the gap rows include −r_B′·∂x′/∂q."""
    m = 4
    rod = uniform_rod(L, R, 1e7, 1000.0)
    if taper:
        rod = RodDescription(L, 0.006, 0.003, Material(1e7, 0.3, 1000.0))
    a = build_model(rod, 4, base="free", extra_points_m=pair_contact_points(L, m))
    b = build_model(rod, 4, base="free")
    system = build_system(
        [a, b], [PairContact(0, 1, friction_coefficient=0.4, m_sections=m, smoothing=Smoothing("sigmoid", 5.0))]
    )
    sa = initial_state(a, base_rotation_vector=(0, 0, np.pi / 2), base_position_m=(0.1, -L / 2, 2 * R + 1e-3))
    sb = initial_state(b, base_rotation_vector=(0.0, 0.1, 0.0))
    rng = np.random.default_rng(1)
    sb.q[6:] = 0.01 * rng.normal(size=sb.q[6:].shape)  # a bent rod B
    state = initial_system_state(system, [sa, sb])
    state.pair_slack[0] = rng.normal(size=state.pair_slack[0].shape)
    problem = SystemStepProblem(system, state, 0.005, None)
    x = problem.pack(
        [sub.pack(s.v, s.slack) for sub, s in zip(problem.rods, state.rods, strict=True)], state.pair_slack
    )
    jac = problem.jacobian(x)
    fd = finite_difference_jacobian(problem.residual, x)
    c0 = problem.pair_offset[0]
    np.testing.assert_allclose(jac[:, c0:], fd[:, c0:], atol=1e-7 * np.abs(fd[:, c0:]).max())
    np.testing.assert_allclose(jac[c0:, :], fd[c0:, :], atol=1e-7 * np.abs(fd[c0:, :]).max())
    # the per-rod blocks are the single-rod Newton matrices
    for i, sub in enumerate(problem.rods):
        sl = slice(problem.rod_offset[i], problem.rod_offset[i + 1])
        np.testing.assert_array_equal(jac[sl, sl], sub.jacobian(problem.rod_x(x, i)))


def test_bad_pairs_are_rejected_with_the_reason():
    rod = uniform_rod(L, R, 1e7, 1000.0)
    plain = build_model(rod, 4)
    with pytest.raises(RodParameterError, match="different rods"):
        PairContact(1, 1)
    with pytest.raises(RodParameterError, match="out of range"):
        build_system([plain, plain], [PairContact(0, 2)])
    with pytest.raises(RodParameterError, match="one pair per two rods"):
        lined = build_model(rod, 4, extra_points_m=pair_contact_points(L, 4))
        build_system([lined, lined], [PairContact(0, 1, m_sections=4), PairContact(1, 0, m_sections=4)])
    with pytest.raises(RodParameterError, match="pair_contact_points"):
        build_system([plain, plain], [PairContact(0, 1, m_sections=7)])


def test_numba_closest_points_match_the_numpy_reference():
    """Random points around a random C¹ curve (bent sweep of a rod): same segment, parameter, point, tangent."""
    rod = uniform_rod(L, R, 1e7, 1000.0)
    model = build_model(rod, 6, base="free")
    rng = np.random.default_rng(3)
    q = np.zeros(model.n_dof)
    q[6:] = 0.5 * rng.normal(size=model.n_dof - 6)
    kin = kinematics(model, q)
    points = kin.p[rng.integers(0, len(kin.p), 40)] + 0.02 * rng.normal(size=(40, 3))
    fast = closest_points_on_centreline(points, kin.p, kin.R[:, :, 0])
    ref = closest_points_on_centreline_reference(points, kin.p, kin.R[:, :, 0])
    np.testing.assert_array_equal(fast[0], ref[0])
    for a, b in zip(fast[1:], ref[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
    # the closest point is a stationary point of the distance: (c − p)·c′ = 0 where 0 < t < 1
    interior = (fast[1] > 0) & (fast[1] < 1)
    assert np.count_nonzero(interior) > 30
    assert np.max(np.abs(np.sum((fast[2] - points) * fast[3], axis=1)[interior])) < 1e-12


def test_an_unconverged_step_raises_and_leaves_every_state_untouched():
    _, system, state = _crossing(n=6, m=10)
    for _ in range(3):
        step_rods(system, state, 0.005)
    before = state.copy()
    with pytest.raises(ConvergenceError):
        step_rods(system, state, 0.05, NewtonSettings(max_iterations=1), max_halvings=1)
    assert state.t_s == before.t_s
    for a, b in zip(state.rods, before.rods, strict=True):
        assert a.t_s == b.t_s
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.v, b.v)
    np.testing.assert_array_equal(state.pair_slack[0], before.pair_slack[0])


def test_trigonometric_pair_contact_runs_the_heaviside_step_in_regular_coordinates():
    """Both maps are exact (the same Signorini and Coulomb graphs): the trigonometric system iterated in the
    Heaviside slack coordinates must give the Heaviside trajectory, through the impact and at rest."""
    runs = []
    for smoothing in (Smoothing("heaviside"), Smoothing("trigonometric", 2.0)):
        _, system, state = _crossing(n=6, m=10, smoothing=smoothing)
        for _ in range(60):
            info = step_rods(system, state, 0.005)
        runs.append((state, info))
    (heaviside, info_h), (trig, info_t) = runs
    for a, b in zip(heaviside.rods, trig.rods, strict=True):
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(info_h.pairs[0].force_n, info_t.pairs[0].force_n, atol=1e-9)
    lam_n = trig.pair_slack[0][:, 0]  # the state keeps trigonometric slacks; u_n > 0: in contact
    assert np.any(lam_n > 0)


def test_rod_across_a_rod_on_a_plane_shares_its_weight_and_the_plane_carries_both():
    """Obstacle contact and pair contact in one system: a soft rod dropped across another one lying on a plane
    rests on it and on the plane (its ends sag down); each rod's force balance closes with the pair force."""
    rod = uniform_rod(L, R, 1e6, 1000.0, damping_time_s=0.02)
    on_plane = ContactSettings((Plane(),), friction_coefficient=0.5, m_sections=8, smoothing=Smoothing("sigmoid", 50.0))
    upper = build_model(rod, 8, base="free", contact=on_plane, extra_points_m=pair_contact_points(L, 20))
    lower = build_model(rod, 8, base="free", contact=on_plane)
    system = build_system(
        [upper, lower],
        [PairContact(0, 1, friction_coefficient=0.5, m_sections=20, smoothing=Smoothing("sigmoid", 50.0))],
    )
    s_up = initial_state(upper, base_rotation_vector=(0, 0, np.pi / 2), base_position_m=(0, -L / 2, 3 * R + 5e-4))
    s_low = initial_state(lower, base_position_m=(-L / 2, 0, R + 1e-4))
    state = initial_system_state(system, [s_up, s_low])
    for _ in range(200):  # 1 s
        info = step_rods(system, state, 0.005)
    weight = rod.mass_kg() * G
    plane_up = info.rods[0].contact_force_n.sum(axis=0)
    plane_low = info.rods[1].contact_force_n.sum(axis=0)
    pair = info.pairs[0].force_n.sum(axis=0)  # on the upper rod
    np.testing.assert_allclose(plane_up + pair, [0, 0, weight], atol=1e-3 * weight)  # measured 4e-6 W
    np.testing.assert_allclose(plane_low - pair, [0, 0, weight], atol=1e-3 * weight)
    assert 0.3 * weight < pair[2] < 0.9 * weight  # measured 0.645 W on the lower rod, 0.355 W on the plane


def test_pair_frame_derivatives_match_central_differences():
    """∂n, ∂t1, ∂t2 (the opt-in `contact_frame_terms` of the pair) for two bent, tapered rods."""
    m = 4
    rod = RodDescription(L, 0.006, 0.003, Material(1e7, 0.3, 1000.0))
    a = build_model(rod, 4, base="free", extra_points_m=pair_contact_points(L, m))
    b = build_model(rod, 4, base="free")
    system = build_system([a, b], [PairContact(0, 1, friction_coefficient=0.4, m_sections=m)])
    rng = np.random.default_rng(1)
    qa = initial_state(a, base_rotation_vector=(0, 0, np.pi / 2), base_position_m=(0.1, -L / 2, 2 * R + 1e-3)).q
    qb = initial_state(b, base_rotation_vector=(0.0, 0.1, 0.0)).q
    qa[6:] = 0.01 * rng.normal(size=qa[6:].shape)
    qb[6:] = 0.01 * rng.normal(size=qb[6:].shape)

    def frame(qa, qb):
        q = system_pair_query(system, 0, kinematics(a, qa), kinematics(b, qb))
        return np.stack([q.normal, q.t1, q.t2])

    query = system_pair_query(system, 0, kinematics(a, qa), kinematics(b, qb))
    assert np.all((query.param > 0) & (query.param < 1))
    dn_a, dn_b, dt1_a, dt1_b, dt2_a, dt2_b = pair_frame_derivatives(query)
    eps = 1e-7
    for analytic, moved in (((dn_a, dt1_a, dt2_a), "a"), ((dn_b, dt1_b, dt2_b), "b")):
        q_ref = qa if moved == "a" else qb
        fd = np.zeros((3, *analytic[0].shape))
        for j in range(len(q_ref)):
            e = np.zeros(len(q_ref))
            e[j] = eps
            plus = frame(qa + e, qb) if moved == "a" else frame(qa, qb + e)
            minus = frame(qa - e, qb) if moved == "a" else frame(qa, qb - e)
            fd[..., j] = (plus - minus) / (2 * eps)
        for f in range(3):
            np.testing.assert_allclose(analytic[f], fd[f], rtol=0, atol=1e-7 * np.abs(fd).max())


def test_frame_terms_change_only_the_newton_matrix_not_the_step():
    """Both runs solve the same equations, each step to the Newton tolerance (1e-8 of the step's own speed), so
    after 40 steps through the impact their states agree to 1e-8 (measured 3.5e-9)."""
    runs = []
    for frame_terms in (False, True):
        _, system, state = _crossing(n=6, m=10)
        for _ in range(40):  # through the impact
            step_rods(system, state, 0.005, NewtonSettings(contact_frame_terms=frame_terms))
        runs.append(state)
    for a, b in zip(runs[0].rods, runs[1].rods, strict=True):
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-8)


def test_three_rods_two_pairs_a_rod_resting_across_two_held_rods():
    """Several pairs sharing a rod: a free rod lies across two parallel held rods (clamped at x = 0, fixed at
    x = L, 12 cm apart); by symmetry each carries half its weight."""
    rod = uniform_rod(L, R, 1e8, 1000.0, damping_time_s=0.02)
    m, d = 20, 0.06  # the free rod's pair nodes 6 and 14 sit over the held rods
    held = [build_model(rod, 8, constraints=(PointConstraint(L, "fixed", (L, y, 0.0)),)) for y in (-d, d)]
    free = build_model(rod, 8, base="free", extra_points_m=pair_contact_points(L, m))
    law = Smoothing("sigmoid", 50.0)
    system = build_system(
        [*held, free],
        [
            PairContact(2, 0, friction_coefficient=0.5, m_sections=m, smoothing=law),
            PairContact(2, 1, friction_coefficient=0.5, m_sections=m, smoothing=law),
        ],
    )
    states = [
        initial_state(held[0], base_position_m=(0, -d, 0)),
        initial_state(held[1], base_position_m=(0, d, 0)),
        initial_state(free, base_rotation_vector=(0, 0, np.pi / 2), base_position_m=(L / 2, -L / 2, 2 * R + 5e-4)),
    ]
    state = initial_system_state(system, states)
    for _ in range(200):
        info = step_rods(system, state, 0.005)
    weight = rod.mass_kg() * G
    on_free = [p.force_n.sum(axis=0) for p in info.pairs]
    np.testing.assert_allclose(on_free[0] + on_free[1], [0, 0, weight], atol=1e-3 * weight)
    for force, held_info in zip(on_free, info.rods[:2], strict=True):
        assert force[2] == pytest.approx(0.5 * weight, rel=1e-3)
        support = held_info.base_wrench[3:6] + held_info.constraint_multipliers[0:3]
        np.testing.assert_allclose(support - [0, 0, weight], force, atol=1e-4 * weight)
    # the sagging free rod pulls the held rods inwards by friction (measured ±0.0195 W), symmetrically
    assert on_free[0][1] == pytest.approx(-on_free[1][1], rel=1e-6)
