"""The implicit-Euler step of one rod (`step`): the quasi-Newton solve of the step problem
(`sim.cosserat.step_problem`), two half steps where it does not converge, and the continuation rescue; a step is
never accepted unconverged (`ConvergenceError`, the state untouched).

The step problem (unknowns, residual, Newton matrix) is described in `sim.cosserat.step_problem`; the forces in
`sim.cosserat.forces`, the contact in `sim.cosserat.contact`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np

from sim.cosserat._slack_kernels import regular_from_slack, trigonometric_slack_from_regular
from sim.cosserat.compiled_step import compiled_step, compiled_step_applies
from sim.cosserat.model import RodModel, RodState
from sim.cosserat.newton import (
    ConvergenceError,
    NewtonResult,
    NewtonSettings,
    finite_difference_jacobian,
    solve,
    solve_error_oriented,
)
from sim.cosserat.step_problem import (
    NewtonIterate,
    StepInfo,
    StepProblem,
    predicted_slack,
    regular_law,
    step_info,
)

log = logging.getLogger(__name__)

_DEFAULT_NEWTON = NewtonSettings()


def step(
    model: RodModel,
    state: RodState,
    dt_s: float,
    settings: NewtonSettings = _DEFAULT_NEWTON,
    base_alpha_next: np.ndarray | None = None,
    max_halvings: int = 5,
    on_newton_iterate: Callable[[NewtonIterate], None] | None = None,
) -> StepInfo:
    """Advance `state` by one implicit-Euler step of dt_s (in place).

    1. The quasi-Newton `solve` from the warm start.
    2. Else two half steps, recursively, at most `max_halvings` deep. What a halved step reports is what the
       full step would: its contact forces and base wrench are the sub-steps' impulses over dt (their mean over
       time), not the last sub-step's. (The last sub-step's force of a landing node is its impulse over a 32nd of
       the step: whether a step was halved, which the last bit of a BLAS sum can decide, changed the reported
       landing force 20-fold.)
    3. Else, if `settings.exact_jacobian_rescue`, the full step by continuation in its length
       (`_continued_step`: stages h = s·dt from the state, each by the quasi-Newton and then the exact-Jacobian
       error-oriented Newton), which the whipping release of a held rod needs. Its answer is the root of the
       full-step equations, the same to 2e-9 of the step whatever path reached it
       (benchmarks/cosserat_release_reproducibility.py). It is not the first resort: the IX-C landing has folds
       in the step length that continuation cannot pass, and its exact Jacobian made the rod_on_plane drop 4×
       slower.
    If nothing converges, ConvergenceError is raised and the state is left untouched. What remains rounding-
    sensitive is the decision to halve: a step that converges whole on one machine and halved on another is a
    different discretisation (measured: the IX-C pinned sigmoid run, 1 of 4 runs from 1e-14-perturbed states
    halved 22 instead of 18 steps and rested 1.9 mm away; rod_on_plane: 1e-14 m).
    `on_newton_iterate` (off by default) sees every Newton iterate, also of attempts that were then halved. It
    selects the reference step (the compiled one runs its iterations without Python): a hooked run is bitwise the
    run with `settings.compiled_step=False`, and equal to the compiled run to the Newton tolerance.
    """
    if not dt_s > 0:
        raise ValueError(f"dt_s must be > 0, got {dt_s!r}")
    try:
        return _step_or_halve(model, state, dt_s, settings, base_alpha_next, max_halvings, on_newton_iterate)
    except ConvergenceError as failure:
        if not settings.exact_jacobian_rescue:
            raise
        log.debug("t=%.4f s: step %.2e s failed with halvings (%s); continuation rescue", state.t_s, dt_s, failure)
        stepper = _StepSolver(model, state, dt_s, settings, base_alpha_next, on_newton_iterate)
        try:
            problem, result, stages = _continued_rescue(stepper, max(max_halvings, settings.continuation_depth))
        except ConvergenceError as rescue_failure:
            raise ConvergenceError(f"{failure}; continuation rescue at the full step: {rescue_failure}") from None
        info = stepper.commit(problem, result)
        info.continuation_stages = stages
        return info


def _step_or_halve(
    model, state, dt_s, settings, base_alpha_next, max_halvings, on_newton_iterate, reuse: bool = True
) -> StepInfo:
    """The quasi-Newton step, else two half steps (recursively); the state is untouched on ConvergenceError. Each
    half step has the inertial slack scales of its own length, as the step solved whole would.

    The compiled step first reuses the Newton matrix's factors of earlier steps (`reuse`); where that fails it solves
    the step again with the matrix rebuilt at every iterate, the reference's iteration, and so do the half steps: a
    step hard enough to fail is solved as the reference solves it (measured: the bench_stick drop's first steps,
    where the two iterations reach different roots of the halved step and the trajectories part)."""
    compiled = compiled_step_applies(model, settings, on_newton_iterate)
    try:
        if compiled:
            try:
                return compiled_step(model, state, dt_s, settings, base_alpha_next, reuse)
            except ConvergenceError:
                if not reuse:
                    raise
                reuse = False
                return compiled_step(model, state, dt_s, settings, base_alpha_next, reuse)
        stepper = _StepSolver(model, state, dt_s, settings, base_alpha_next, on_newton_iterate)
        return stepper.commit(*stepper.accept(stepper.direct()))
    except ConvergenceError:
        if max_halvings <= 0:
            raise
    log.debug("t=%.4f s: step %.2e s did not converge; two half steps", state.t_s, dt_s)
    backup = state.copy()
    mid = None if base_alpha_next is None else 0.5 * (state.q[0:6] + np.asarray(base_alpha_next, float))
    halves = (0.5 * dt_s, settings)
    try:
        first = _step_or_halve(model, state, *halves, mid, max_halvings - 1, on_newton_iterate, reuse)
        second = _step_or_halve(model, state, *halves, base_alpha_next, max_halvings - 1, on_newton_iterate, reuse)
    except ConvergenceError:
        state.t_s, state.q, state.v, state.slack = backup.t_s, backup.q, backup.v, backup.slack
        raise
    return joined_halves(first, second)


def joined_halves(first: StepInfo, second: StepInfo) -> StepInfo:
    """Two equal half steps as one: forces and wrenches averaged over the step (impulse / dt, what one full step
    reports), the end state's gaps, slips and multipliers, the iterations and sub-steps of both."""
    return dataclasses.replace(
        second,
        iterations=first.iterations + second.iterations,
        substeps=first.substeps + second.substeps,
        matrix_refreshes=first.matrix_refreshes + second.matrix_refreshes,
        residual_evaluations=first.residual_evaluations + second.residual_evaluations,
        used_fallback=True,
        base_wrench=0.5 * (first.base_wrench + second.base_wrench),
        contact_force_n=0.5 * (first.contact_force_n + second.contact_force_n),
    )


class _StepSolver:
    """The pieces of one step of dt_s: the step problem at any length h ≤ dt_s (with the slack scales of dt_s, so a
    continuation stage has the full step's contact law), its warm start, its solution by either Newton, and the
    commit of the full-length solution to the state."""

    def __init__(self, model, state, dt_s, settings, base_alpha_next, on_newton_iterate):
        self.model, self.state, self.dt_s, self.settings = model, state, dt_s, settings
        self.base_alpha_next = None if base_alpha_next is None else np.asarray(base_alpha_next, float)
        self.on_newton_iterate = on_newton_iterate
        self.regular = _uses_regular_coordinates(model, settings)
        self.law, self.start_slack = None, state.slack
        if self.regular:
            # Iterate on the Heaviside maps in y = (Λ_n − δ_n, v_t − Λ_t): the same forces, gaps and slips as the
            # trigonometric maps (see `slack.regular_slack`) without their singular columns at the corners.
            smoothing, mu = model.contact.smoothing, model.contact.friction_coefficient
            self.law = regular_law(smoothing)
            self.start_slack = regular_from_slack(smoothing, mu, state.slack)

    def problem(self, h_s: float) -> StepProblem:
        """The step problem of length h_s from the state; a clamped base moves along the straight line to its
        pose at dt (the same velocity at every h)."""
        alpha = self.base_alpha_next
        if alpha is not None and h_s != self.dt_s:
            alpha = self.state.q[0:6] + (h_s / self.dt_s) * (alpha - self.state.q[0:6])
        problem = StepProblem(self.model, self.state, h_s, alpha, self.law, scale_dt_s=self.dt_s)
        problem.frame_terms = self.settings.contact_frame_terms
        return problem

    def warm_start(self, problem: StepProblem, v: np.ndarray, slack: np.ndarray, multipliers=None) -> np.ndarray:
        v_guess = v.copy()
        if self.model.base == "clamped":
            v_guess[0:6] = problem.v_fixed[0:6]
        return problem.pack(v_guess, predicted_slack(problem, slack, v_guess), multipliers)

    def solve(self, problem: StepProblem, x0: np.ndarray, exact: bool) -> NewtonResult:
        report = _iterate_reporter(problem, self.state.t_s, problem.h, self.on_newton_iterate)
        if exact:
            return solve_error_oriented(
                problem.residual, problem.exact_jacobian, x0, self.settings, report, problem.error_norm
            )
        fallback = None
        if self.settings.exact_jacobian_fallback:
            fallback = lambda x: finite_difference_jacobian(problem.residual, x)  # noqa: E731
        return solve(problem.residual_and_lazy_jacobian, x0, self.settings, fallback, report, problem.error_norm)

    def direct(self) -> tuple[StepProblem, NewtonResult]:
        problem = self.problem(self.dt_s)
        return problem, self.solve(problem, self.warm_start(problem, self.state.v, self.start_slack), exact=False)

    def accept(self, solved: tuple[StepProblem, NewtonResult]) -> tuple[StepProblem, NewtonResult]:
        """A full-length solution in the model's own slacks (mapped back and checked for an exact smoothing)."""
        problem, result = solved
        if self.regular:
            return _back_to_model_slacks(self, problem, result)
        return problem, result

    def commit(self, problem: StepProblem, result: NewtonResult) -> StepInfo:
        v, slack = problem.unpack(result.x)
        multipliers = problem.multipliers(result.x)
        r_dyn, contact, kin = problem.evaluate(result.x)
        state, dt_s = self.state, self.dt_s
        state.q = state.q + dt_s * v
        state.v = v
        state.slack = slack.copy()
        state.t_s += dt_s
        return step_info(self.model, state.q, result, r_dyn, dt_s, kin, contact, multipliers)


def _continued_rescue(stepper: _StepSolver, depth: int) -> tuple[StepProblem, NewtonResult, int]:
    """`_continued_step` from the last step's slacks, else once more with the tangential slacks zeroed (every node
    starts stuck without friction force). Why: a held rod has nodes at the edge of the friction cone (|u_t| ≈ μu_n,
    the corner of the Coulomb graph); measured on the released IX-C rod, perturbed by 1e-14, 1 start in 35 made
    both Newton iterations stall there at the first stage, however small, while the zeroed start converged."""
    try:
        return _continued_step(stepper, depth)
    except ConvergenceError as failure:
        stepper.start_slack = stepper.start_slack.copy()
        stepper.start_slack[:, 1:] = 0.0
        try:
            return _continued_step(stepper, depth)
        except ConvergenceError as again:
            raise ConvergenceError(f"{failure}; from zero tangential slacks: {again}") from None


def _continued_step(stepper: _StepSolver, depth: int) -> tuple[StepProblem, NewtonResult, int]:
    """Solve the full step by continuation in its length: stages h = s·dt, s = i/2^depth, the increment
    of s doubled after a converged stage and halved after a failed one; each stage starts from the last converged
    one (the solution moves continuously with h, from the state's own velocity at h = 0). A stage that fails
    the quasi-Newton iteration gets the exact-Jacobian error-oriented Newton (`settings.exact_jacobian_rescue`).
    Returns the accepted full-length (problem, result) and the number of converged stages."""
    settings = stepper.settings
    finest = 2**depth  # s in units of 1/finest
    s, ds = 0, finest // 2
    v, slack, multipliers = stepper.state.v, stepper.start_slack, None
    stages, iterations, last_failure = 0, 0, "no stage tried (depth 0)"
    while ds >= 1:
        s_try = min(finest, s + ds)
        problem = stepper.problem(stepper.dt_s * s_try / finest)
        x0 = stepper.warm_start(problem, v, slack, multipliers)
        try:
            result = _solve_stage(stepper, problem, x0, settings)
            if s_try == finest:
                problem, result = stepper.accept((problem, result))
        except ConvergenceError as failure:
            last_failure = f"at s = {s_try}/{finest}: {failure}"
            ds //= 2
            continue
        stages += 1
        iterations += result.iterations
        if s_try == finest:
            result.iterations = iterations
            result.used_fallback = True
            return problem, result, stages
        s = s_try
        v, slack = problem.unpack(result.x)
        multipliers = problem.multipliers(result.x) if problem.n_c else None
        ds = min(2 * ds, finest - s)
    raise ConvergenceError(f"no stage converged with an increment ≥ 1/{finest} of the step ({last_failure})")


def _solve_stage(stepper: _StepSolver, problem: StepProblem, x0: np.ndarray, settings: NewtonSettings):
    try:
        return stepper.solve(problem, x0, exact=False)
    except ConvergenceError as quasi_failure:
        if not settings.exact_jacobian_rescue:
            raise
        try:
            return stepper.solve(problem, x0, exact=True)
        except ConvergenceError as exact_failure:
            raise ConvergenceError(f"{quasi_failure}; exact Jacobian: {exact_failure}") from None


def _uses_regular_coordinates(model: RodModel, settings: NewtonSettings) -> bool:
    c = model.contact
    return c is not None and settings.regular_slack_coordinates and c.smoothing.kind == "trigonometric"


def _iterate_reporter(problem: StepProblem, t_s: float, dt_s: float, callback):
    """Adapt `NewtonIterate` callbacks to the solver's on_iterate(x, ‖r‖∞): the contact forces come from the
    problem's evaluation cache (the solver has just evaluated the residual at x), so reporting costs no sweep."""
    if callback is None or problem.model.contact is None:
        return None
    count = [0]

    def report(x: np.ndarray, residual: float) -> None:
        force = problem.evaluate(x)[1]["force"]
        callback(NewtonIterate(t_s, dt_s, count[0], residual, force.copy()))
        count[0] += 1

    return report


def _back_to_model_slacks(stepper: _StepSolver, problem: StepProblem, result: NewtonResult):
    """Map a regular-coordinate solution to the model's (trigonometric) slacks and check it there: the step is
    accepted only if the model's own residual, with the same row scale, meets the tolerance."""
    regular = problem.unpack(result.x)[1]
    c, settings = stepper.model.contact, stepper.settings
    slack = trigonometric_slack_from_regular(c.smoothing.sharpness, c.friction_coefficient, regular)
    own = StepProblem(stepper.model, stepper.state, stepper.dt_s, stepper.base_alpha_next)
    own._row_scale = problem._row_scale
    x = result.x.copy()  # same velocities and (scaled) constraint multipliers
    x[own.n_free : own.n_free + 3 * own.k] = slack.reshape(-1)
    residual = own.error_norm(x, own.residual(x))
    if residual > settings.tolerance:
        raise ConvergenceError(
            f"the {c.smoothing.kind} residual at the mapped regular-coordinate solution is {residual:.3e} > "
            f"tolerance {settings.tolerance:.1e}"
        )
    return own, NewtonResult(x, result.iterations, residual, result.used_fallback)
