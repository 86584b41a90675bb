"""Implicit-Euler dynamics: first bending frequency, energy never gained, base reaction, Newton Jacobian."""

import numpy as np
import pytest

from sim.cosserat import build_model, energy, initial_state, kinematics, step, uniform_rod
from sim.cosserat.newton import finite_difference_jacobian
from sim.cosserat.statics import solve_statics
from sim.cosserat.step_problem import StepProblem

L, R, E, RHO = 1.0, 0.01, 1e7, 1000.0
ROD = uniform_rod(L, R, E, RHO)


def test_first_bending_frequency_within_two_percent():
    EI, rho_a = ROD.bending_stiffness_n_m2(), RHO * np.pi * R**2
    omega_1 = 1.8751**2 / L**2 * np.sqrt(EI / rho_a)
    pre = build_model(ROD, 8, gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -0.01 * EI / L**2))
    model = build_model(ROD, 8, gravity_m_s2=(0, 0, 0))
    state = initial_state(model)
    state.q = solve_statics(pre).q
    h = 0.01  # ω₁h ≈ 0.018: implicit Euler's period error (ω₁h)²/3 ≈ 1e-4
    z, t = [], []
    for _ in range(450):
        step(model, state, h)
        z.append(kinematics(model, state.q).p[-1, 2])
        t.append(state.t_s)
    z, t = np.array(z), np.array(t)
    i = np.where((z[:-1] < 0) & (z[1:] >= 0))[0]
    crossings = t[i] - z[i] * (t[i + 1] - t[i]) / (z[i + 1] - z[i])
    omega = 2 * np.pi / np.mean(np.diff(crossings))
    assert omega == pytest.approx(omega_1, rel=0.02)


def test_undamped_contact_free_motion_never_gains_energy():
    model = build_model(ROD, 6, base="clamped", gravity_m_s2=(0, 0, -9.81))
    state = initial_state(model)
    x = model.grid.x_nodes / L
    # a smooth bent and twisted shape, moving smoothly (rough nodal data excite the stiff modes, see docs)
    state.q[6::6], state.q[7::6], state.q[8::6] = 0.2, 0.5 * np.cos(np.pi * x), 0.3 + 0 * x
    state.v[7::6], state.v[8::6] = 0.4 * np.sin(np.pi * x), -0.3 * x
    energies = [energy(model, state.q, state.v)["total"]]
    for _ in range(60):
        step(model, state, 0.005)
        energies.append(energy(model, state.q, state.v)["total"])
    increase = np.diff(energies)
    assert np.all(increase <= 1e-9 * abs(energies[0])), increase.max()
    assert energies[-1] < energies[0]  # implicit Euler dissipates, it never creates energy


def test_clamped_rod_at_rest_carries_its_weight_at_the_base():
    stiff = uniform_rod(L, R, 1e10, RHO)  # qL³/EI ≈ 0.04: a slight sag
    model = build_model(stiff, 6, gravity_m_s2=(0, 0, -9.81))
    state = initial_state(model)
    state.q = solve_statics(model).q
    info = step(model, state, 0.001)
    weight = stiff.mass_kg() * 9.81
    np.testing.assert_allclose(info.base_wrench[3:6], [0, 0, weight], rtol=1e-6, atol=1e-9 * weight)
    # moment about the base of the (slightly sagged) rod's weight: ≈ weight · L/2 about +y
    assert info.base_wrench[1] == pytest.approx(-weight * L / 2, rel=2e-2)


def test_newton_matrix_equals_the_exact_jacobian_at_rest_without_loads():
    """The kept terms M + hD + h²K are the whole Jacobian when q̇ = 0 and there is no gravity or load."""
    model = build_model(uniform_rod(L, R, E, RHO, damping_time_s=0.01), 4, base="free", gravity_m_s2=(0, 0, 0))
    state = initial_state(model)
    state.q[6:] = np.random.default_rng(2).normal(size=model.n_dof - 6) * 0.1
    state.v[:] = 0.0
    problem = StepProblem(model, state, 0.01, None)
    x = problem.pack(state.v, state.slack)
    _, jac = problem.residual_and_jacobian(x)
    fd = finite_difference_jacobian(problem.residual, x)
    # force-free, so the only configuration dependence left is the O(h·K·Δq) geometric term of K θ
    np.testing.assert_allclose(jac, fd, atol=1e-4 * np.max(np.abs(jac)))


def test_free_spinning_rod_energy_drift_is_a_vanishing_discretisation_effect():
    """With the paper's exponential-coordinate base, implicit Euler in q̇ is not strictly dissipative for a
    spinning free body (M depends on φ); the per-step energy change must vanish like h² and stay tiny."""
    model = build_model(ROD, 4, base="free", gravity_m_s2=(0, 0, 0))
    gains = []
    for h in (0.005, 0.0005):
        state = initial_state(model, base_velocity=np.array([0.5, -1.0, 2.0, 0.3, 0.1, 1.0]))
        e = [energy(model, state.q, state.v)["total"]]
        for _ in range(10):
            step(model, state, h)
            e.append(energy(model, state.q, state.v)["total"])
        gains.append(np.max(np.diff(e)) / e[0])
    assert gains[0] < 2e-4
    assert gains[1] < gains[0] / 50


def test_a_halved_step_reports_the_mean_force_over_the_step_and_the_end_state_of_the_second_half():
    """Two half steps joined (`dynamics.joined_halves`) report what one whole step would: contact forces and base wrench
    as impulse / dt (the mean of the halves, not the last half's), gaps, slips and multipliers of the end state,
    the iterations and sub-steps of both."""
    import dataclasses

    from sim.cosserat.dynamics import joined_halves
    from sim.cosserat.step_problem import StepInfo

    def half(force: float, gap: float, iterations: int) -> StepInfo:
        return StepInfo(
            iterations=iterations,
            residual=1e-9,
            used_fallback=False,
            base_wrench=np.full(6, force),
            contact_force_n=np.full((3, 3), force),
            contact_gap_m=np.full(3, gap),
            contact_slip_m_s=np.full((3, 2), gap),
            constraint_multipliers=np.array([gap]),
        )

    first, second = half(4.0, 1.0, 3), dataclasses.replace(half(0.0, 2.0, 5), substeps=2)
    joined = joined_halves(first, second)
    np.testing.assert_array_equal(joined.contact_force_n, np.full((3, 3), 2.0))
    np.testing.assert_array_equal(joined.base_wrench, np.full(6, 2.0))
    np.testing.assert_array_equal(joined.contact_gap_m, second.contact_gap_m)
    np.testing.assert_array_equal(joined.contact_slip_m_s, second.contact_slip_m_s)
    np.testing.assert_array_equal(joined.constraint_multipliers, second.constraint_multipliers)
    assert (joined.iterations, joined.substeps, joined.used_fallback) == (8, 3, True)
