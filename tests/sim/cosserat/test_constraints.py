"""Point constraints along the rod (Lagrange multipliers in the one nonlinear system): propped cantilever,
clamped–clamped beam, input checks, and the constraint residual in dynamics."""

import numpy as np
import pytest

from sim.cosserat import RodParameterError, build_model, initial_state, step, uniform_rod
from sim.cosserat.constraints import PointConstraint, constraint_jacobian, constraint_residual
from sim.cosserat.forces import energy, kinematics
from sim.cosserat.statics import solve_statics

L, R, E, RHO = 1.0, 0.01, 1e7, 1000.0
ROD = uniform_rod(L, R, E, RHO, poisson_ratio=0.3)
EI = ROD.bending_stiffness_n_m2()
GA = ROD.material.shear_modulus_pa * np.pi * R**2
G_SMALL = 1e-3  # gravity small enough for the linear (small-deflection) regime
Q = RHO * np.pi * R**2 * G_SMALL  # load per length (N/m)


def test_propped_cantilever_deflection_and_pin_reaction():
    """Clamped at X = 0, pinned at X = L: max deflection qL⁴/EI · 0.0054160 at X = 0.5785 L, pin reaction 3qL/8."""
    probes = tuple(np.linspace(0.40, 0.75, 351))
    pin = PointConstraint(L, "position", (L, 0.0, 0.0))
    model = build_model(ROD, 8, gravity_m_s2=(0, 0, -G_SMALL), extra_points_m=probes, constraints=(pin,))
    res = solve_statics(model)
    z = kinematics(model, res.q).p[model.grid.extra_index[: len(probes)], 2]
    k = int(np.argmin(z))
    # Euler–Bernoulli: w(x) = q x²(3L² − 5Lx + 2x²)/(48 EI), maximal at x* = (15 − √33)/16 L
    x_star = (15 - np.sqrt(33)) / 16
    delta_exact = Q * L**4 / (48 * EI) * (3 * x_star**2 - 5 * x_star**3 + 2 * x_star**4)
    assert delta_exact * EI / (Q * L**4) == pytest.approx(0.0054160, rel=1e-4)
    assert -z[k] == pytest.approx(delta_exact, rel=0.01)  # bar 1 % (shear adds ~0.2 % here)
    assert probes[k] == pytest.approx(0.5785 * L, abs=0.005 * L)
    reaction = res.constraint_multipliers
    assert reaction[2] == pytest.approx(3 * Q * L / 8, rel=0.01)
    assert abs(reaction[1]) < 1e-12


def test_clamped_clamped_midspan_deflection_and_end_moment():
    """Both ends fixed: midspan qL⁴/(384 EI) (+ the shear term qL²/(8GA) this Timoshenko rod also has),
    end reactions qL/2 and qL²/12."""
    tip = PointConstraint(L, "fixed", (L, 0.0, 0.0))
    model = build_model(ROD, 8, gravity_m_s2=(0, 0, -G_SMALL), extra_points_m=(0.5 * L,), constraints=(tip,))
    res = solve_statics(model)
    mid = -kinematics(model, res.q).p[model.grid.extra_index[0], 2]
    bending = Q * L**4 / (384 * EI)
    assert mid == pytest.approx(bending, rel=0.01)  # the brief's bar
    assert mid == pytest.approx(bending + Q * L**2 / (8 * GA), rel=1e-3)
    force, moment = res.constraint_multipliers[:3], res.constraint_multipliers[3:]
    assert force[2] == pytest.approx(Q * L / 2, rel=1e-3)
    assert abs(moment[1]) == pytest.approx(Q * L**2 / 12, rel=1e-3)
    np.testing.assert_allclose(res.tip_rotation, np.eye(3), atol=1e-10)
    np.testing.assert_allclose(res.tip_position_m, [L, 0, 0], atol=1e-10 * L)


def test_pinned_point_inside_the_span_holds_under_a_large_load():
    """A pin at mid-length under a load far outside the linear regime: the point stays put, the rest moves."""
    pin = PointConstraint(0.5 * L, "position", (0.5 * L, 0.0, 0.0))
    model = build_model(ROD, 8, gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -2 * EI / L**2), constraints=(pin,))
    res = solve_statics(model, load_steps=2)
    kin = kinematics(model, res.q)
    np.testing.assert_allclose(kin.p[model.constraint_index[0]], [0.5 * L, 0, 0], atol=1e-9 * L)
    assert -res.tip_position_m[2] > 0.05 * L


def test_constraint_jacobian_matches_finite_differences():
    tip = PointConstraint(0.7 * L, "fixed", (0.6, 0.1, -0.2), rotation=np.eye(3))
    model = build_model(ROD, 4, constraints=(tip,))
    rng = np.random.default_rng(3)
    q = np.concatenate([rng.normal(0, 0.3, 6), model.xi_ref_nodes.ravel() + rng.normal(0, 0.5, model.n_dof - 6)])

    def g(qq):
        kin = kinematics(model, qq)
        return constraint_residual(model.constraints, model.constraint_index, kin.R, kin.p)

    kin = kinematics(model, q)
    jac = constraint_jacobian(model.constraints, model.constraint_index, kin.R, kin.J)
    fd = np.zeros_like(jac)
    for j in range(model.n_dof):
        e = np.zeros(model.n_dof)
        e[j] = 1e-6
        fd[:, j] = (g(q + e) - g(q - e)) / 2e-6
    np.testing.assert_allclose(jac, fd, atol=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"x_m": 0.5, "kind": "hinge", "position_m": (0, 0, 0)}, "kind"),
        ({"x_m": 0.0, "kind": "position", "position_m": (0, 0, 0)}, "x_m"),
        ({"x_m": 0.5, "kind": "fixed", "position_m": (0, 0, 0), "rotation": 2 * np.eye(3)}, "rotation"),
        ({"x_m": 0.5, "kind": "position", "position_m": (0, 0)}, "position_m"),
    ],
)
def test_bad_constraints_are_rejected(kwargs, match):
    with pytest.raises(RodParameterError, match=match):
        PointConstraint(**kwargs)


def test_constraint_beyond_the_rod_is_rejected():
    with pytest.raises(RodParameterError, match="beyond the rod length"):
        build_model(ROD, 4, constraints=(PointConstraint(1.5 * L, "position", (1.5, 0, 0)),))


@pytest.mark.parametrize("kind", ["position", "fixed"])
def test_dynamics_holds_the_constraint_and_never_gains_energy(kind):
    """Clamped base, tip constraint, released from straight under full gravity: over 0.5 s the constraint
    residual stays below 1e-8 m (1e-8 rad) at every step, and the ideal (workless) constraint never adds
    energy to the undamped rod (implicit Euler only dissipates)."""
    rod = uniform_rod(L, R, 1e6, RHO)
    model = build_model(rod, 6, constraints=(PointConstraint(L, kind, (L, 0.0, 0.0)),))
    state = initial_state(model)
    weight = rod.mass_kg() * 9.81
    worst, e_prev, reactions = 0.0, energy(model, state.q, state.v)["total"], []
    while state.t_s < 0.5 - 1e-12:
        info = step(model, state, 0.005)
        kin = kinematics(model, state.q)
        g = constraint_residual(model.constraints, model.constraint_index, kin.R, kin.p)
        worst = max(worst, float(np.max(np.abs(g))))
        e = energy(model, state.q, state.v)["total"]
        assert e <= e_prev + 1e-9 * weight * L
        e_prev = e
        reactions.append(info.constraint_multipliers[2])
    assert worst < 1e-8
    assert -kinematics(model, state.q).p[:, 2].min() > 0  # the rod did sag between the supports
    assert 0 < np.mean(reactions[-20:]) < weight  # the tip support carries part of the weight


def test_damped_dynamics_settles_on_the_constrained_statics():
    """Same residual in both solvers: a Kelvin–Voigt damped propped cantilever (L = 0.3 m, tip sag ≈ 6 % L)
    released under gravity comes to rest within 0.5 s on the statics solution, reaction included."""
    length = 0.3
    rod = uniform_rod(length, 0.01, 1e6, RHO, damping_time_s=0.05)
    model = build_model(rod, 6, constraints=(PointConstraint(length, "position", (length, 0.0, 0.0)),))
    reference = solve_statics(model)
    state = initial_state(model)
    while state.t_s < 0.5 - 1e-12:
        info = step(model, state, 0.005)
    z_static = kinematics(model, reference.q).p[:, 2]
    z_dynamic = kinematics(model, state.q).p[:, 2]
    assert np.max(np.abs(z_dynamic - z_static)) < 1e-4 * np.max(np.abs(z_static))  # measured 9e-7
    np.testing.assert_allclose(info.constraint_multipliers, reference.constraint_multipliers, rtol=1e-4, atol=1e-12)


def test_step_newton_matrix_constraint_blocks_match_finite_differences():
    """The kept blocks are exact: ∂(momentum rows)/∂λ and ∂(g rows)/∂q̇ against central differences."""
    from sim.cosserat.step_problem import StepProblem

    model = build_model(ROD, 4, constraints=(PointConstraint(0.8 * L, "fixed", (0.8 * L, 0.0, 0.0)),))
    state = initial_state(model)
    rng = np.random.default_rng(7)
    state.q[6:] = rng.normal(0, 0.05, model.n_dof - 6)
    problem = StepProblem(model, state, 0.005, None)
    v = np.zeros(model.n_dof)
    v[6:] = rng.normal(0, 0.5, model.n_dof - 6)
    x = problem.pack(v, state.slack, rng.normal(0, 0.01, 6))
    jac = problem.jacobian(x)
    nf, nc = problem.n_free, problem.n_c
    fd = np.zeros_like(jac)
    for j in range(len(x)):
        e = np.zeros(len(x))
        e[j] = 1e-5 * max(1.0, abs(x[j]))  # q moves by h·e: smaller steps drown in round-off
        fd[:, j] = (problem.residual(x + e) - problem.residual(x - e)) / (2 * e[j])
    scale = np.max(np.abs(fd[:nf, nf:]))
    np.testing.assert_allclose(jac[:nf, nf:], fd[:nf, nf:], atol=1e-7 * scale)
    scale = np.max(np.abs(fd[nf:, :nf]))
    np.testing.assert_allclose(jac[nf:, :nf], fd[nf:, :nf], atol=1e-7 * scale)
    assert nc == 6


def test_fixed_tip_at_a_quarter_circle_pose_bends_the_unloaded_rod_into_the_arc():
    """No loads; the tip is clamped at the end pose of a quarter circle (reached by continuation of the
    target, 16 steps): the exact answer is uniform curvature π/(2L), zero reaction force, moment EI·π/(2L)."""
    from sim.lie import exp_so3

    k = np.pi / (2 * L)
    tip = PointConstraint(L, "fixed", (1 / k, 0.0, 1 / k), rotation=exp_so3(np.array([0.0, -np.pi / 2, 0.0])))
    model = build_model(ROD, 8, gravity_m_s2=(0, 0, 0), constraints=(tip,))
    res = solve_statics(model, load_steps=16)
    np.testing.assert_allclose(res.q[6:].reshape(-1, 6)[:, 1], -k, rtol=1e-9)
    np.testing.assert_allclose(res.constraint_multipliers[:3], 0.0, atol=1e-10 * EI / L**2)
    assert res.constraint_multipliers[4] == pytest.approx(-EI * k, rel=1e-9)
