"""The 'Must show' facts of paper 003's examples, judged against an independent statement of Tables I–II."""

import numpy as np
import pytest

from sim.planar_contact import analyse, modes_consistent_with
from sim.planar_contact import examples as ex
from sim.planar_contact.kinematics import Segment, point_kinematics
from sim.planar_contact.mode_solution import RankCase, solve_mode
from sim.planar_contact.modes import classify_contacts, feasible_modes
from sim.planar_contact.polytope import chebyshev_ball, project_by_lp

from .conditions import contact_violation, dynamics_residual

G = 9.81


def test_point_kinematics_matches_finite_differences():
    rng = np.random.default_rng(3)
    segs = [Segment(0.7, (0, 0, 1.0, 0)), Segment(0.4, (0, 0, 1.0, 1.0), 0.3)]
    q, qd = rng.normal(size=4), rng.normal(size=4)
    p, J, acc = point_kinematics(q, qd, (0, 1), segs)
    h = 1e-6
    J_fd = np.column_stack(
        [
            (point_kinematics(q + h * e, qd, (0, 1), segs)[0] - point_kinematics(q - h * e, qd, (0, 1), segs)[0])
            / (2 * h)
            for e in np.eye(4)
        ]
    )
    assert np.allclose(J, J_fd, atol=1e-8)
    # J̇q̇ = d/ds J(q + s q̇) q̇ at s = 0
    Jp = point_kinematics(q + h * qd, qd, (0, 1), segs)[1]
    Jm = point_kinematics(q - h * qd, qd, (0, 1), segs)[1]
    assert np.allclose((Jp - Jm) / (2 * h) @ qd, acc, atol=1e-7)


@pytest.mark.parametrize("push", [-6.0, -4.0, 0.0, 2.0, 4.9, 5.5, 9.0])
def test_block_fixed_below_friction_limit_sliding_beyond(push):
    mu, m = 0.5, 1.0
    e = ex.block(mu=mu, push_N=push, mass_kg=m)
    cons = modes_consistent_with(e.snapshot, e.tau)
    modes = {c.mode: c for c in cons}
    limit = mu * m * G
    if abs(push) < limit - 1e-9:
        assert set(modes) == {("F",)}
        assert np.allclose(modes[("F",)].qdd, 0.0, atol=1e-12)
        assert modes[("F",)].forces[1] == pytest.approx(-push)  # friction balances the push
    else:
        letter = ("R",) if push > 0 else ("L",)
        assert letter in modes
        assert modes[letter].qdd[0] == pytest.approx((push - np.sign(push) * limit) / m, rel=1e-12)
        assert set(modes) == {letter}


def test_block_sliding_right_keeps_kinetic_friction():
    e = ex.block(mu=0.5, push_N=1.0, speed_m_s=0.3)
    modes, _ = feasible_modes(e.snapshot)
    assert set(modes) == {("S",), ("R",)}
    (c,) = modes_consistent_with(e.snapshot, e.tau)
    assert c.mode == ("R",) and c.qdd[0] == pytest.approx(1.0 - 0.5 * G)  # decelerates


def test_two_link_three_fixed_contacts_rank8_two_ambiguities_zero_acceleration():
    e = ex.two_link(mu=0.8, elbow_torque_Nm=-0.5)
    kin = classify_contacts(e.snapshot)
    sol = solve_mode(e.snapshot, kin, ("F", "F", "F"))
    assert sol.shape == (10, 10) and sol.rank == 8 and sol.n_w == 2
    assert sol.case is RankCase.AMBIGUOUS_RESTRICTED
    assert not sol.acceleration_ambiguous()  # only forces are ambiguous (compression along each link)
    for tau in (-2.0, -0.5, 0.0, 0.7):  # admissible for every τ (U⊥ᵀ(Bτ + b) = 0)
        assert np.allclose(sol.tau_eq @ [tau], sol.tau_eq_rhs, atol=1e-10)
    cons = {c.mode: c for c in modes_consistent_with(e.snapshot, e.tau)}
    assert ("F", "F", "F") in cons
    assert np.allclose(cons[("F", "F", "F")].qdd, 0.0, atol=1e-10)
    # null space = compression along the links: it moves forces but leaves the body force balance untouched
    assert np.allclose(e.snapshot.J.T @ sol.null_basis[4:], 0.0, atol=1e-10)


def test_two_link_sliding_p1_with_others_fixed_is_kinematically_infeasible():
    e = ex.two_link()
    modes, _ = feasible_modes(e.snapshot)
    assert ("L", "F", "F") not in modes and ("R", "F", "F") not in modes
    assert ("F", "F", "F") in modes


def test_table_one_dimensional_null_space_of_opposing_tangential_forces():
    e = ex.table(mu=0.5, push_N=1.0)
    sol = solve_mode(e.snapshot, classify_contacts(e.snapshot), ("F", "F"))
    assert sol.shape == (7, 7) and sol.rank == 6 and sol.n_w == 1  # square: rank-deficient both ways
    assert sol.tau_eq.shape[0] == 0  # ... yet every push is admissible
    nb = sol.null_basis[:, 0]
    assert np.allclose(nb[:3], 0) and np.allclose(nb[[3, 5]], 0)  # no q̈, no normal forces
    assert nb[4] == pytest.approx(-nb[6])  # opposing tangential forces
    (c,) = [c for c in modes_consistent_with(e.snapshot, e.tau) if c.mode == ("F", "F")]
    assert np.allclose(c.qdd, 0.0, atol=1e-12)


def test_bearing_all_sliding_ambiguous_in_forces_and_acceleration():
    e = ex.bearing(mu=0.3)
    analysis = analyse(e.snapshot)
    (ma,) = [m for m in analysis.modes if m.mode == ("R",) * 4]
    assert ma.solution.n_w == 2 and ma.within_mode_ambiguity
    assert ma.solution.acceleration_ambiguous(coords=[2])  # spin acceleration depends on w
    assert not ma.solution.acceleration_ambiguous(coords=[0, 1])  # the centre does not move


@pytest.mark.parametrize("theta_deg", [40.0, np.degrees(np.arctan(2.0)), 75.0])
def test_painleve_no_consistent_mode_above_critical_mu(theta_deg):
    crit = ex.painleve_critical_mu(np.radians(theta_deg))
    high = ex.painleve(mu=crit * 1.05, theta_deg=theta_deg)
    assert modes_consistent_with(high.snapshot, high.tau) == []
    low = ex.painleve(mu=0.2, theta_deg=theta_deg)
    cons = modes_consistent_with(low.snapshot, low.tau)
    assert [c.mode for c in cons] == [("L",)]
    assert contact_violation(low.snapshot, ("L",), cons[0].z_at_tau) < 1e-9


def test_painleve_minimum_critical_mu_is_four_thirds_at_tan_two():
    assert ex.painleve_critical_mu(np.arctan(2.0)) == pytest.approx(4.0 / 3.0)
    grid = np.linspace(0.2, 1.4, 400)
    assert min(ex.painleve_critical_mu(t) for t in grid) >= 4.0 / 3.0 - 1e-12


def _domain_samples(ma, rng, n=300, spread=3.0):
    D = ma.domain
    center, radius = chebyshev_ball(D)
    scale = spread * max(1.0, min(radius, 50.0))
    center = np.clip(center, -100.0, 100.0)  # unbounded domains: sample near the bounded part
    return center + rng.uniform(-scale, scale, size=(n, D.dim)), D


@pytest.mark.parametrize("name", ["two_link", "table", "bearing", "block"])
def test_points_inside_a_domain_satisfy_the_mode_and_points_outside_violate_it(name):
    rng = np.random.default_rng(7)
    e = ex.EXAMPLES[name]()
    analysis = analyse(e.snapshot, between_modes=False)
    checked_in = checked_out = 0
    for ma in analysis.consistent():
        sol = ma.solution
        pts, D = _domain_samples(ma, rng)
        t = sol.n_tau
        for x in pts:
            tau, w = x[:t], x[t:]
            if sol.tau_eq.shape[0]:  # stay on the admissible torque subspace
                if np.abs(sol.tau_eq @ tau - sol.tau_eq_rhs).max() > 1e-9:
                    continue
            z = sol.response(tau, w)
            size = 1.0 + np.abs(z).max() + np.abs(x).max()
            assert dynamics_residual(e.snapshot, tau, z) < 1e-12 * size
            viol = contact_violation(e.snapshot, sol.mode, z)
            if D.contains(x, tol=1e-9):
                assert viol < 1e-9 * size
                checked_in += 1
            else:
                assert viol > 1e-10
                checked_out += 1
    assert checked_in > 20 and checked_out > 20


def test_torque_projection_agrees_with_lp_feasibility():
    rng = np.random.default_rng(11)
    e = ex.two_link(mu=0.6)
    analysis = analyse(e.snapshot, between_modes=False)
    for ma in analysis.consistent():
        if ma.solution.n_w == 0:
            continue
        t = ma.solution.n_tau
        for tau in rng.uniform(-20, 20, size=(40, t)):
            assert ma.torque_domain.contains(tau, tol=1e-7) == project_by_lp(ma.domain, list(range(t)), tau)


def test_results_do_not_depend_on_the_null_space_basis():
    rng = np.random.default_rng(5)
    e = ex.two_link(mu=0.6)
    sol = solve_mode(e.snapshot, classify_contacts(e.snapshot), ("F", "F", "F"))
    Q, _ = np.linalg.qr(rng.normal(size=(2, 2)))
    rotated = sol.null_basis @ Q  # another orthonormal basis of N(A)
    t = sol.n_tau
    D = sol.domain
    # domain in the rotated coordinates w' = Qᵀ w:  N_τ τ + N_w Q w' >= e
    from sim.planar_contact.polytope import HPolytope, fourier_motzkin

    D2 = HPolytope.from_arrays(np.hstack([D.N[:, :t], D.N[:, t:] @ Q]), D.e, D.A_eq, D.b_eq)
    T1, T2 = fourier_motzkin(D, [0]), fourier_motzkin(D2, [0])
    for tau in rng.uniform(-30, 30, size=(60, 1)):
        assert T1.contains(tau) == T2.contains(tau)
    # the same physical family: any z of one basis is reproduced by the other
    w = rng.normal(size=2)
    z1 = sol.Z_tau @ [1.0] + sol.z_0 + sol.null_basis @ w
    w2 = np.linalg.lstsq(rotated, z1 - sol.Z_tau @ [1.0] - sol.z_0, rcond=None)[0]
    assert np.allclose(sol.Z_tau @ [1.0] + sol.z_0 + rotated @ w2, z1, atol=1e-12)


def test_physical_equality_resolves_the_table_ambiguity():
    """A physical constraint (eq. 12) 'both legs carry the same friction' removes the null space."""
    from dataclasses import replace

    from sim.planar_contact.system import LinearConstraints

    e = ex.table(mu=0.5, push_N=1.0)
    snap = e.snapshot
    row = np.zeros((1, snap.n_z))
    row[0, snap.n_q + 1], row[0, snap.n_q + 3] = 1.0, -1.0  # f_t(left) − f_t(right) = 0
    phys = LinearConstraints(row, np.zeros((1, 1)), np.zeros(1), np.zeros((0, snap.n_z)), np.zeros((0, 1)), np.zeros(0))
    snap2 = replace(snap, physical=phys)
    sol = solve_mode(snap2, classify_contacts(snap2), ("F", "F"))
    assert sol.n_w == 0 and sol.case is RankCase.RESTRICTED and sol.tau_eq.shape[0] == 0
    z = sol.response(e.tau)
    assert np.allclose(z[[4, 6]], -0.5)  # each leg resists half of the 1 N push
    assert np.allclose(z[:3], 0.0, atol=1e-12)


def test_parse_mode_names_the_allowed_letters():
    from sim.planar_contact.modes import parse_mode
    from sim.planar_contact.system import ContactModelError

    assert parse_mode("f s l", 3) == ("F", "S", "L")
    with pytest.raises(ContactModelError, match="3 letters from FSLR"):
        parse_mode("FX", 3)
