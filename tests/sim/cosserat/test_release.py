"""The release of a held rod (issue 9): the first free step of the IX-C rod (`experiments/rod/smoothing_ixc.toml`,
n = m = 30, dt = 0.01 s, the thick end clamped, then let go) and the exact-Jacobian rescue that solves it, plus
the error-oriented Newton it uses. Numbers and the diagnosis: docs/cosserat.md ("Known limits", "Numerics")."""

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat import ConvergenceError, step
from sim.cosserat.forces import energy
from sim.cosserat.newton import NewtonSettings, finite_difference_jacobian, solve_error_oriented
from sim.cosserat.scenario import released_model
from sim.cosserat.step_problem import StepProblem, predicted_slack

EXPERIMENT = Path(__file__).resolve().parents[3] / "experiments" / "rod" / "smoothing_ixc.toml"
RELEASES_S = (0.5, 0.8, 1.0)


def test_error_oriented_newton_converges_where_the_full_newton_step_diverges():
    """arctan: the undamped Newton iteration diverges from |x0| > 1.39; the natural monotonicity test damps
    the first steps and then takes full steps (quadratic convergence to the root 0)."""
    seen = []
    result = solve_error_oriented(
        np.arctan,
        lambda x, r: np.diag(1.0 / (1.0 + x**2)),
        np.array([3.0]),
        NewtonSettings(tolerance=1e-12),
        on_iterate=lambda x, r: seen.append(r),
    )
    assert abs(result.x[0]) <= 1e-12 and result.used_fallback
    assert result.iterations <= 8 and len(seen) == result.iterations + 1
    full = 3.0
    for _ in range(3):
        full -= np.arctan(full) * (1.0 + full**2)
    assert abs(full) > 100.0  # what the undamped iteration does


def test_error_oriented_newton_raises_instead_of_accepting_a_non_root():
    with pytest.raises(ConvergenceError, match="exact-Jacobian Newton did not converge"):
        solve_error_oriented(lambda x: x**2 + 1.0, lambda x, r: np.diag(2.0 * x), np.array([0.5]), NewtonSettings())


@functools.cache
def _held_states() -> dict[float, object]:
    """The clamped phase run once to the last release time (the states at each release time)."""
    sc = load_rod_experiment(EXPERIMENT)
    state = sc.initial_state.copy()
    out = {}
    for k in range(1, int(round(max(RELEASES_S) / sc.dt_s)) + 1):
        step(sc.model, state, sc.dt_s, sc.newton, None, sc.max_halvings)
        for t in RELEASES_S:
            if k == int(round(t / sc.dt_s)):
                out[t] = state.copy()
    return out


def _free(sc):
    return released_model(sc.model)


@pytest.mark.parametrize("release_s", RELEASES_S)
def test_released_rod_steps_on_within_the_halving_budget(release_s):
    """Released at 0.5, 0.8 or 1.0 s, the first free step converges with the experiment's budget (5 halvings,
    then the rescue) and so do the next 0.1 s; the step dissipates (implicit Euler, friction): the total
    energy does not rise. Measured: first step 6 sub-steps (0.5 s); at 0.8 and 1.0 s the halvings fail and the
    continuation rescue solves the full step in 2–6 stages."""
    sc = load_rod_experiment(EXPERIMENT)
    free = _free(sc)
    state = _held_states()[release_s].copy()
    before = energy(free, state.q, state.v)["total"]
    first = step(free, state, sc.dt_s, sc.newton, None, sc.max_halvings)
    assert first.residual <= sc.newton.tolerance and first.substeps <= 8
    assert energy(free, state.q, state.v)["total"] <= before
    assert np.max(np.abs(state.q[6:].reshape(-1, 6)[0, 1:3])) < 1.0  # the held end's 20 /m bend let go
    for _ in range(10):
        info = step(free, state, sc.dt_s, sc.newton, None, sc.max_halvings)
        assert info.residual <= sc.newton.tolerance
    assert state.t_s == pytest.approx(release_s + 0.11)


@pytest.mark.parametrize("release_s", (0.8, 1.0))
def test_the_released_step_is_the_same_whichever_path_the_solver_takes(release_s):
    """Another BLAS kernel changes the last bits of the state; the accepted step must not change with them. From the
    held state perturbed by 1e-14 (relative, random) the step converges every time (the continuation rescue takes
    2–6 stages, a different path each time) and accepts the same root of the full-step equations: measured
    1.5e-9 of the step's displacement, asserted 1e-6. Before the error norm was relative to the step's own
    speed, 2 of 10 such perturbations ended in ConvergenceError."""
    sc = load_rod_experiment(EXPERIMENT)
    free = _free(sc)
    held = _held_states()[release_s]
    reference = held.copy()
    step(free, reference, sc.dt_s, sc.newton, None, sc.max_halvings)
    displacement = np.max(np.abs(reference.q - held.q))
    rng = np.random.default_rng(7)
    for _ in range(3):
        state = held.copy()
        state.q = state.q * (1.0 + 1e-14 * rng.standard_normal(state.q.shape))
        state.v = state.v * (1.0 + 1e-14 * rng.standard_normal(state.v.shape))
        info = step(free, state, sc.dt_s, sc.newton, None, sc.max_halvings)
        assert info.residual <= sc.newton.tolerance
        assert np.max(np.abs(state.q - reference.q)) <= 1e-6 * displacement


def test_without_the_rescue_the_release_at_1_s_fails_and_leaves_the_state_untouched():
    sc = load_rod_experiment(EXPERIMENT)
    state = _held_states()[1.0].copy()
    q, v, slack = state.q.copy(), state.v.copy(), state.slack.copy()
    settings = dataclasses.replace(sc.newton, exact_jacobian_rescue=False)
    with pytest.raises(ConvergenceError):
        step(_free(sc), state, sc.dt_s, settings, None, 8)
    assert np.array_equal(state.q, q) and np.array_equal(state.v, v) and np.array_equal(state.slack, slack)


def test_exact_jacobian_matches_central_differences_where_the_quasi_newton_matrix_does_not():
    """At the solution of the first free step (1.0 s: the held end whips, generalized velocities ~1e3) the
    rescue's matrix equals central differences of the whole residual to 1e-5 of its largest entry, while the
    quasi-Newton matrix (no h·∂(Cq̇)/∂q̇, ∂M/∂q, geometric stiffness) is off by more than 1 % there."""
    sc = load_rod_experiment(EXPERIMENT)
    free = _free(sc)
    held = _held_states()[1.0]
    state = held.copy()
    step(free, state, sc.dt_s, sc.newton, None, sc.max_halvings)
    problem = StepProblem(free, held, sc.dt_s, None)
    problem.residual(problem.pack(held.v, predicted_slack(problem, held.slack, held.v)))
    x = problem.pack(state.v, state.slack)
    assert problem.error_norm(x, problem.residual(x)) <= sc.newton.tolerance
    reference = finite_difference_jacobian(problem.residual, x)
    scale = np.max(np.abs(reference))
    assert np.max(np.abs(problem.exact_jacobian(x) - reference)) <= 1e-5 * scale
    assert np.max(np.abs(problem.jacobian(x) - reference)) > 1e-2 * scale


def test_a_failed_rescue_raises_with_every_reason_and_leaves_the_state_untouched():
    """Never an unconverged step: with 2 quasi-Newton and 1 exact-Jacobian iteration per attempt and continuation
    stages no smaller than dt/4, the released step cannot converge (it needs 2–10 stages of up to 20 iterations),
    so the step raises, naming the halvings', the continuation's and its restart's failure, and the state stays
    bitwise as it was, also after the stages that did converge."""
    sc = load_rod_experiment(EXPERIMENT)
    state = _held_states()[1.0].copy()
    q, v, slack, t = state.q.copy(), state.v.copy(), state.slack.copy(), state.t_s
    settings = dataclasses.replace(sc.newton, max_iterations=2, rescue_iterations=1, continuation_depth=2)
    with pytest.raises(
        ConvergenceError,
        match="compiled step: .*continuation rescue at the full step.*from zero tangential slacks",
    ):
        step(_free(sc), state, sc.dt_s, settings, None, 2)
    assert np.array_equal(state.q, q) and np.array_equal(state.v, v) and np.array_equal(state.slack, slack)
    assert state.t_s == t
