"""Damped Newton with a backtracking line search, an error-oriented exact-Jacobian Newton and a
Levenberg–Marquardt fallback.

A step is never accepted silently unconverged: `solve` and `solve_error_oriented` raise `ConvergenceError` (with
the residual reached) when they do not meet the tolerance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.linalg.lapack import dgesv as _dgesv

log = logging.getLogger(__name__)


class ConvergenceError(RuntimeError):
    """The nonlinear step did not converge; the state was not advanced."""


@dataclass(frozen=True)
class NewtonSettings:
    """tolerance bounds the caller-scaled residual (‖r‖∞); the dynamics scales its rows so that 1e-8 means
    velocities to 1e-8 of the step's reference speed and gaps to 1e-8·g·h²."""

    tolerance: float = 1e-8
    # Rod step only: the compiled whole step (`sim.cosserat.compiled_step`: residual, Newton matrix and loop in numba,
    # factorisations reused across iterations and steps). False: the readable reference step (`StepProblem` and
    # `solve` here), which the tests compare it with. Either way the same equations meet the same tolerance.
    compiled_step: bool = True
    max_iterations: int = 20  # then two half steps; 30 → 20 saves ~14 % of evaluations in the drop (n = 16…24)
    # Compiled rod step only: an accepted iterate must cut ‖r‖ to this fraction, else the frozen Newton matrix (reused
    # across iterations and steps) is rebuilt there. Lower refreshes sooner: fewer iterations where the configuration
    # moves every step (bench_stick, base driven: 0.5 → 0.2 cut 4.7 → 3.6 iterations per step at tolerance 1e-6),
    # more dense refreshes where it hardly matters (rod_on_plane's landing pays for its refreshes: kept at 0.5).
    refresh_ratio: float = 0.5
    exact_jacobian_fallback: bool = False  # finite-difference Newton + LM before giving up (costly)
    max_lm_iterations: int = 60
    line_search_steps: int = 12
    nonmonotone_steps: int = 4
    quasi_newton_iterations: int = 20  # before switching to the exact (fallback) Jacobian
    # Rod step only: add the turning of a curved obstacle's contact frame, ∂n/∂p and ∂t/∂p, to the Newton
    # matrix. Measured: the tube insertion's first 0.1 s needs 8 instead of 50 halved steps; on the bar it
    # halves the error of the dynamic block, but μ = 0.2 then ends in a ConvergenceError (chaotic impact), so
    # it is off by default.
    contact_frame_terms: bool = False
    # Rod step only: solve an exact smoothing (trigonometric) in the regular slack coordinates of the Heaviside
    # maps, y = (Λ_n − δ_n, v_t − Λ_t), and map back (`slack.slack_from_regular`). Same forces, gaps and slips,
    # but no singular columns where a node sits at a corner (u_n = 0 or |u_t| = μΛ_n): there the trigonometric
    # maps are cubic in u. False iterates in the trigonometric slacks themselves (the paper's formulation).
    regular_slack_coordinates: bool = True
    # Rod step only: when a step fails even after its halvings, solve the full step by continuation in its length
    # (stages h = s·dt, each by the quasi-Newton and then `solve_error_oriented` with the exact Jacobian) before
    # raising. Cost only on such steps (the IX-C release: 2–6 stages, ≈ 1–4 s at n = 30).
    exact_jacobian_rescue: bool = True
    # the rescue's smallest stage is dt / 2**continuation_depth: a released stiff rod relaxes its held bend in far
    # less than dt / 32, so the first stage must be able to get that small
    continuation_depth: int = 10
    rescue_iterations: int = 40


ErrorNorm = Callable[[np.ndarray, np.ndarray], float]
"""error_norm(x, r): the number that must meet NewtonSettings.tolerance at x, where r = r(x). A caller whose rows
are scaled once per solve can weigh them by magnitudes that only the iterate knows, so the tolerance stays
relative to the solution instead of demanding more digits than double precision holds."""


def max_norm(x: np.ndarray, r: np.ndarray) -> float:
    """‖r‖∞, the default error norm."""
    return float(np.max(np.abs(r)))


@dataclass
class NewtonResult:
    x: np.ndarray
    iterations: int
    residual_norm: float
    used_fallback: bool


def _matrix(jac) -> np.ndarray:
    """`fun` may return the Jacobian as a zero-argument callable, evaluated only where it is used."""
    return jac() if callable(jac) else jac


def _solve_dense(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LAPACK gesv called directly: no condition estimate (scipy.linalg.solve adds ~25 % to these ~200 × 200
    solves) and ~15 % less overhead than numpy.linalg.solve. Raises LinAlgError for an exactly singular a."""
    _, _, x, info = _dgesv(a, b, overwrite_a=False, overwrite_b=False)
    if info != 0:
        raise np.linalg.LinAlgError(f"dense solve failed: LAPACK gesv info = {info}")
    return x


def _merit(r: np.ndarray) -> float:
    return 0.5 * float(r @ r)


def solve(
    fun: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | Callable[[], np.ndarray]]],
    x0: np.ndarray,
    settings: NewtonSettings = NewtonSettings(),
    fallback_jacobian: Callable[[np.ndarray], np.ndarray] | None = None,
    on_iterate: Callable[[np.ndarray, float], None] | None = None,
    error_norm: ErrorNorm | None = None,
) -> NewtonResult:
    """Find x with ‖r(x)‖∞ ≤ tolerance, where fun(x) -> (r, dr/dx) and r is already scaled by the caller.

    The Jacobian may be approximate (quasi-Newton); `fallback_jacobian` (e.g. finite differences) is used
    by the Levenberg–Marquardt fallback when the plain iteration stalls. `on_iterate(x, ‖r‖∞)`, if given, sees
    the start point and every accepted iterate (a diagnostic: the iterate history of paper 004's Fig. 16).
    `error_norm(x, r)` (default ‖r‖∞) is what must meet the tolerance (see `ErrorNorm`).
    """
    norm = error_norm or max_norm
    x = np.array(x0, dtype=float)
    r, jac = fun(x)
    if on_iterate is not None:
        on_iterate(x, norm(x, r))
    iterations = 0
    free_steps = settings.nonmonotone_steps
    best = (x, r, jac)
    budget = settings.max_iterations if fallback_jacobian is None else settings.quasi_newton_iterations
    for iterations in range(1, budget + 1):
        if norm(x, r) <= settings.tolerance:
            return NewtonResult(x, iterations - 1, norm(x, r), False)
        try:
            dx = _solve_dense(_matrix(jac), -r)
        except (np.linalg.LinAlgError, ValueError):
            break
        f0 = _merit(r)
        x_try = x + dx
        r_try, jac_try = fun(x_try)
        finite = bool(np.all(np.isfinite(r_try)))
        accepted = (x_try, r_try, jac_try) if finite and _merit(r_try) < f0 else None
        if accepted is None and finite and free_steps > 0 and _merit(r_try) < 1e4 * _merit(best[1]):
            # With an approximate Jacobian the full Newton step need not descend the merit function far from
            # the solution; a few non-monotone full steps avoid creeping along a poor direction.
            free_steps -= 1
            accepted = (x_try, r_try, jac_try)
        step = 0.5
        for _ in range(settings.line_search_steps if accepted is None else 0):
            x_try = x + step * dx
            r_try, jac_try = fun(x_try)
            if np.all(np.isfinite(r_try)) and _merit(r_try) < f0:
                accepted = (x_try, r_try, jac_try)
                break
            step *= 0.5
        if accepted is None:
            break
        x, r, jac = accepted
        if on_iterate is not None:
            on_iterate(x, norm(x, r))
        if _merit(r) < _merit(best[1]):
            best = (x, r, jac)
    if norm(x, r) <= settings.tolerance:
        return NewtonResult(x, iterations, norm(x, r), False)
    if fallback_jacobian is None:
        raise ConvergenceError(
            f"Newton did not converge: |r|_inf = {norm(x, r):.3e} > tolerance {settings.tolerance:.1e} "
            f"after {iterations} iterations"
        )
    if _merit(best[1]) < _merit(r):
        x, r, jac = best
    if fallback_jacobian is not None:
        # The quasi-Newton matrix was not good enough: restart from the warm start with the exact
        # (finite-difference) Jacobian before resorting to Levenberg-Marquardt.
        log.debug("quasi-Newton stalled at |r|=%.3e after %d iterations", norm(x, r), iterations)
        try:
            result = solve(
                lambda z: (fun(z)[0], fallback_jacobian(z)),
                np.array(x0, dtype=float),
                settings,
                None,
                on_iterate,
                error_norm,
            )
            result.iterations += iterations
            result.used_fallback = True
            return result
        except ConvergenceError:
            pass
    log.debug("Newton stalled at |r|=%.3e; Levenberg-Marquardt", norm(x, r))
    return _levenberg_marquardt(fun, x, settings, fallback_jacobian, iterations, on_iterate, norm)


def _levenberg_marquardt(
    fun, x, settings, fallback_jacobian, iterations_so_far, on_iterate=None, norm=None
) -> NewtonResult:
    norm = norm or max_norm
    r, jac = fun(x)
    jac = fallback_jacobian(x) if fallback_jacobian is not None else _matrix(jac)
    mu = 1e-3 * float(np.max(np.abs(np.diag(jac.T @ jac)))) + 1e-12
    for it in range(1, settings.max_lm_iterations + 1):
        if norm(x, r) <= settings.tolerance:
            return NewtonResult(x, iterations_so_far + it - 1, norm(x, r), True)
        jtj = jac.T @ jac
        g = jac.T @ r
        dx = scipy.linalg.solve(jtj + mu * np.diag(np.diag(jtj) + 1e-12), -g, assume_a="pos", check_finite=False)
        r_try, jac_try = fun(x + dx)
        if np.all(np.isfinite(r_try)) and _merit(r_try) < _merit(r):
            x = x + dx
            r = r_try
            if on_iterate is not None:
                on_iterate(x, norm(x, r))
            jac = fallback_jacobian(x) if fallback_jacobian is not None else _matrix(jac_try)
            mu = max(mu / 3.0, 1e-15)
        else:
            mu *= 4.0
    if norm(x, r) <= settings.tolerance:
        return NewtonResult(x, iterations_so_far + settings.max_lm_iterations, norm(x, r), True)
    raise ConvergenceError(
        f"nonlinear solve did not converge: |r|_inf = {norm(x, r):.3e} > tolerance "
        f"{settings.tolerance:.1e} after {iterations_so_far} Newton and {settings.max_lm_iterations} "
        "Levenberg-Marquardt iterations; reduce the time step or use a smoother contact law"
    )


def solve_error_oriented(
    residual: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x0: np.ndarray,
    settings: NewtonSettings = NewtonSettings(),
    on_iterate: Callable[[np.ndarray, float], None] | None = None,
    error_norm: ErrorNorm | None = None,
) -> NewtonResult:
    """Find x with ‖r(x)‖∞ ≤ tolerance by Newton with an exact `jacobian(x, r(x))` and error-oriented damping.

    Deuflhard's natural monotonicity test (NLEQ-ERR; Deuflhard, *Newton Methods for Nonlinear Problems*,
    2004, §3.3) accepts the damped step x + λΔx, Δx = −J(x)⁻¹r(x), when the simplified Newton correction there,
    Δx̄ = −J(x)⁻¹r(x + λΔx), satisfies ‖Δx̄‖₂ ≤ (1 − λ/4)‖Δx‖₂; otherwise λ is halved (down to 1e-4). The test
    measures the distance to the root in the unknowns, not ‖r‖: on the released IX-C rod the path from the
    warm start to the root crosses residuals 1e3–1e4 times the initial one (the velocity-quadratic inertia
    forces of the whipping held end), which a line search on ½‖r‖² refuses and this test accepts. λ starts at
    1 and grows fourfold after an accepted step. Hand-written: scipy's root finders have no affine-covariant
    (error-oriented) globalisation. `error_norm` as in `solve`.
    """
    norm = error_norm or max_norm
    x = np.array(x0, dtype=float)
    r = residual(x)
    if on_iterate is not None:
        on_iterate(x, norm(x, r))
    lam = 1.0
    for iteration in range(settings.rescue_iterations + 1):
        error = norm(x, r)
        if error <= settings.tolerance:
            return NewtonResult(x, iteration, error, True)
        if iteration == settings.rescue_iterations:
            break
        jac = jacobian(x, r)
        if not np.all(np.isfinite(jac)):
            break
        try:
            lu = scipy.linalg.lu_factor(jac, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            break
        dx = -scipy.linalg.lu_solve(lu, r, check_finite=False)
        size = float(np.linalg.norm(dx))
        accepted = None
        while lam >= 1e-4:
            r_try = residual(x + lam * dx)
            if np.all(np.isfinite(r_try)):
                simplified = float(np.linalg.norm(scipy.linalg.lu_solve(lu, r_try, check_finite=False)))
                if simplified <= (1.0 - 0.25 * lam) * size:
                    accepted = (x + lam * dx, r_try)
                    break
            lam *= 0.5
        if accepted is None:
            break
        x, r = accepted
        if on_iterate is not None:
            on_iterate(x, norm(x, r))
        lam = min(1.0, 4.0 * lam)
    raise ConvergenceError(
        f"exact-Jacobian Newton did not converge: |r|_inf = {norm(x, r):.3e} > tolerance "
        f"{settings.tolerance:.1e} (damping factor {lam:.1e})"
    )


def finite_difference_jacobian(residual: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Central differences; the checked fallback (tests compare it with the analytic Jacobians)."""
    r0 = residual(x)
    out = np.zeros((len(r0), len(x)))
    for j in range(len(x)):
        h = 1e-6 * max(1.0, abs(x[j]))
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        out[:, j] = (residual(xp) - residual(xm)) / (2 * h)
    return out
