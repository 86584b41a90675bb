"""The compiled step of one rod (`sim.cosserat._step_kernels`): when it applies, how a model is packed for it, and the
step itself (`compiled_step`), with the same contract as the reference step of `dynamics`: the state advanced in
place and a `StepInfo`, or `ConvergenceError` with the state untouched.

The Newton matrix's factorisation is reused across steps (`_step_kernels` docstring); it lives on the state
(`RodState.solver_cache`), so a trajectory depends on its initial state only: a copy of a state starts with none.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import numba
import numpy as np

from sim.cosserat._lie_extra import so3_left_jacobian
from sim.cosserat._obstacle_kernels import pack_obstacles
from sim.cosserat._slack_kernels import regular_from_slack, smoothing_arguments
from sim.cosserat._step_kernels import (
    CONVERGED,
    MAPPED_RESIDUAL,
    NOT_CONVERGED,
    NOT_FINITE,
    SINGULAR,
    STALLED,
    evaluate,
    newton_direction,
    refresh_geometry,
    solve_step,
    workspace,
)
from sim.cosserat.contact import contact_scales
from sim.cosserat.model import RodModel, RodState
from sim.cosserat.newton import ConvergenceError, NewtonSettings
from sim.cosserat.obstacles import Plane
from sim.cosserat.step_problem import StepInfo, regular_law

_DEFAULT_NEWTON = NewtonSettings()

_REASONS = {
    NOT_CONVERGED: "no convergence within the iteration limit",
    STALLED: "no descent along a fresh Newton direction",
    NOT_FINITE: "a non-finite residual",
    SINGULAR: "a singular Newton matrix",
    MAPPED_RESIDUAL: "the trigonometric residual at the mapped regular-coordinate solution misses the tolerance",
}


def compiled_step_applies(model: RodModel, settings: NewtonSettings, on_newton_iterate) -> bool:
    """The compiled step covers the rod with any base, tip load, obstacle and smoothing; the reference step keeps
    point constraints, per-iterate callbacks, the finite-difference fallback and the frame-turning terms of curved
    obstacles (each a diagnostic or a rare setting)."""
    if not settings.compiled_step or on_newton_iterate is not None or settings.exact_jacobian_fallback:
        return False
    if model.constraints:
        return False
    if model.contact is not None and settings.contact_frame_terms:
        if any(not isinstance(ob, Plane) for ob in model.contact.obstacles):
            return False
    return _packed(model) is not None


@dataclass
class _Packed:
    """A model's constant arrays in the kernel's layout (`_step_kernels.evaluate` unpacks `arrays`)."""

    arrays: tuple
    n_points: int
    n_cand: int


_PACKED: weakref.WeakKeyDictionary[RodModel, _Packed | None] = weakref.WeakKeyDictionary()


def _bands(matrix: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(diagonal (n+1,6), first off-diagonal (n,6)) of a block-tridiagonal matrix with diagonal 6×6 blocks, or None
    if it has other entries."""
    diag = np.diag(matrix).reshape(n_nodes, 6).copy()
    off = np.diag(matrix, 6).reshape(n_nodes - 1, 6).copy()
    rebuilt = np.diag(diag.reshape(-1)) + np.diag(off.reshape(-1), 6) + np.diag(off.reshape(-1), -6)
    return (diag, off) if np.array_equal(rebuilt, matrix) else None


def _packed(model: RodModel) -> _Packed | None:
    if model in _PACKED:
        return _PACKED[model]
    g = model.grid
    n_nodes = model.n_sections + 1
    k_bands, d_bands = _bands(model.stiffness, n_nodes), _bands(model.damping, n_nodes)
    packed = None
    if k_bands is not None and d_bands is not None:
        if model.contact is not None:
            kinds, params = pack_obstacles(model.contact.obstacles)
            n_cand = model.n_contact_nodes
        else:
            kinds, params, n_cand = np.zeros(0, dtype=np.int64), np.zeros((0, 10)), 0
        tip_loaded = bool(np.any(model.tip_force_n != 0) or np.any(model.tip_moment_n_m != 0))
        arrays = (
            model.xi_ref_nodes,
            g.x_nodes,
            g.x_points,
            g.section_of_point,
            g.node_index,
            g.quad_index,
            np.ascontiguousarray(g.section_of_point[g.quad_index]),
            g.quad_weight_m,
            model.quad_inertia,
            np.ascontiguousarray(g.contact_index),
            np.ascontiguousarray(model.contact_radius_m, dtype=float),
            kinds,
            params,
            k_bands[0],
            k_bands[1],
            d_bands[0],
            d_bands[1],
            model.gravity_m_s2,
            int(g.node_index[-1]) if tip_loaded else -1,
            model.tip_force_n,
            model.tip_moment_n_m,
        )
        packed = _Packed(arrays, len(g.x_points), n_cand)
    _PACKED[model] = packed
    return packed


class SolverCache:
    """What a trajectory's compiled steps reuse, per step length (halved steps get their own): the Newton matrix's
    factors, the contact law's arguments and the work arrays."""

    def __init__(self) -> None:
        self.by_step: dict[float, _StepBuffers] = {}

    def buffers(self, model: RodModel, packed: _Packed, settings: NewtonSettings, dt_s: float) -> _StepBuffers:
        key = dt_s
        found = self.by_step.get(key)
        if found is None or found.model is not model or found.settings != settings:
            if len(self.by_step) >= 4:  # a run's own dt and a few halvings
                self.by_step.pop(next(iter(self.by_step)))
            found = self.by_step[key] = _StepBuffers(model, packed, settings, dt_s)
        return found


class _StepBuffers:
    def __init__(self, model: RodModel, packed: _Packed, settings: NewtonSettings, dt_s: float) -> None:
        self.model, self.settings = model, settings
        self.n_fixed = 0 if model.base == "free" else 6
        nf = model.n_dof - self.n_fixed
        nz = 3 * packed.n_cand
        self.factors = (
            np.zeros((nf, nf)),  # Cholesky factor of A
            np.zeros((nf, nz)),  # G = A⁻¹E
            np.zeros((nz, nz)),  # W = C G
            np.zeros((nz, nf)),  # C
            np.zeros(nf),  # diag A
            np.zeros(2),  # valid, h
        )
        self.workspace = workspace(model.n_dof, packed.n_points, packed.n_cand)
        self.x = np.zeros(nf + nz)
        self.stats = np.zeros(4, dtype=np.int64)
        self.v_base = np.zeros(6)
        self.g_norm_dt = float(np.linalg.norm(model.gravity_m_s2)) * dt_s
        self.v_floor = 1e-6 * model.rod.length_m / dt_s
        self.regular_from = None  # the smoothing whose regular coordinates are iterated
        if model.contact is not None:
            scales = contact_scales(model, dt_s)
            smoothing = model.contact.smoothing
            iterated = regular_law(smoothing) if settings.regular_slack_coordinates else None
            if iterated is not None:
                self.law = _law_tuple(iterated, model, scales)
                self.check = _law_tuple(smoothing, model, scales)
                self.regular_from = smoothing
            else:
                self.law = _law_tuple(smoothing, model, scales)
                self.check = (-1, *self.law[1:])
        else:
            self.law = (0, 1.0, 1e-9, 0.0, 1.0, 1.0, 1.0)
            self.check = (-1, *self.law[1:])
        self.run = (settings.tolerance, settings.max_iterations, settings.nonmonotone_steps, settings.line_search_steps)


def _law_tuple(smoothing, model: RodModel, scales) -> tuple:
    kind, sharpness, eps = smoothing_arguments(smoothing)
    mu = model.contact.friction_coefficient
    return (kind, sharpness, eps, mu, scales.force_n, scales.gap_m, scales.slip_m_s)


def compiled_step(
    model: RodModel,
    state: RodState,
    dt_s: float,
    settings: NewtonSettings,
    base_alpha_next: np.ndarray | None,
    reuse: bool = True,
) -> StepInfo:
    """One step by the compiled kernel (`compiled_step_applies(model, …)` must hold). `reuse`: start from the
    factors of the trajectory's last step of this length and rebuild them only on poor contraction; False: build
    them at the warm start and at every accepted iterate (the reference's quasi-Newton iteration)."""
    packed = _packed(model)
    assert packed is not None
    if state.solver_cache is None:
        state.solver_cache = SolverCache()
    buf = state.solver_cache.buffers(model, packed, settings, dt_s)
    n_fixed = buf.n_fixed
    nf = model.n_dof - n_fixed
    v_base = buf.v_base
    v_ref = max(buf.g_norm_dt, float(np.abs(state.v).max()), buf.v_floor)  # the method: a third of np.max's call
    if n_fixed:
        if base_alpha_next is not None:
            np.subtract(base_alpha_next, state.q[0:6], out=v_base)
            v_base /= dt_s
        else:
            v_base[:] = 0.0
        v_ref = max(v_ref, float(np.abs(v_base).max()))
    start_slack = state.slack
    if buf.regular_from is not None:
        start_slack = regular_from_slack(buf.regular_from, model.contact.friction_coefficient, state.slack)
    if not reuse:
        buf.factors[5][0] = 0.0
    x = buf.x
    x[:nf] = state.v[n_fixed:]
    ws = buf.workspace
    norm = solve_step(
        packed.arrays,
        buf.law,
        buf.check,
        float(dt_s),
        state.q,
        state.v,
        n_fixed,
        v_base,
        start_slack,
        v_ref,
        (*buf.run, settings.refresh_ratio if reuse else 0.0),
        *buf.factors,
        ws,
        x,
        buf.stats,
    )
    stats = buf.stats
    if stats[0] != CONVERGED:
        raise ConvergenceError(
            f"compiled step: {_REASONS.get(int(stats[0]), 'failure')}: error norm {norm:.3e} (tolerance "
            f"{settings.tolerance:.1e}) after {int(stats[1])} iterations"
        )
    v = ws[0].copy()
    state.q = state.q + dt_s * v
    state.v = v
    state.slack = x[nf:].reshape(-1, 3).copy()
    state.t_s += dt_s
    return StepInfo(
        iterations=int(stats[1]),
        residual=float(norm),
        used_fallback=False,
        base_wrench=base_wrench_kernel(state.q, ws[11], dt_s) if n_fixed else np.zeros(6),
        contact_force_n=ws[17].copy(),
        contact_gap_m=ws[12].copy(),
        contact_slip_m_s=ws[16].copy(),
        matrix_refreshes=int(stats[2]),
        residual_evaluations=int(stats[3]),
    )


@numba.njit(cache=True)
def base_wrench_kernel(q, reaction_impulse, dt_s):
    """`step_problem.base_wrench` without a sweep: with J(0) = blkdiag(Rᵀ J_l(φ), Rᵀ) the world wrench [moment
    about p0; force] of the generalized reaction r = impulse / dt is [J_l(φ)⁻ᵀ r_φ; r_p]."""
    jl = so3_left_jacobian(q[0:3].copy())
    out = np.empty(6)
    b = reaction_impulse[0:3] / dt_s
    # solve J_lᵀ m = b by Cramer's rule (3×3)
    a = jl.T.copy()
    det = (
        a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
        - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
        + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0])
    )
    for c in range(3):
        m = a.copy()
        for r in range(3):
            m[r, c] = b[r]
        out[c] = (
            m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1])
            - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
            + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0])
        ) / det
    for c in range(3):
        out[3 + c] = reaction_impulse[3 + c] / dt_s
    return out


def residual_and_direction(
    model: RodModel,
    state: RodState,
    dt_s: float,
    base_alpha_next: np.ndarray | None,
    x: np.ndarray,
    row_scale: np.ndarray,
    settings: NewtonSettings = _DEFAULT_NEWTON,
    weak_coupling: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's scaled residual at x (`StepProblem`'s unknowns and row scale) and its Newton direction with the
    matrix built at x: what the tests compare with `StepProblem.residual` and a dense solve of
    `StepProblem.jacobian` (with the model's own smoothing, as `StepProblem` without a law). ``weak_coupling``: 0, the
    exact direction; the step's `WEAK_COUPLING` gives the direction the step uses (`newton_direction`)."""
    packed = _packed(model)
    assert packed is not None
    buf = _StepBuffers(model, packed, dataclasses.replace(settings, regular_slack_coordinates=False), dt_s)
    n_fixed = buf.n_fixed
    nf = model.n_dof - n_fixed
    if n_fixed and base_alpha_next is not None:
        buf.v_base[:] = (np.asarray(base_alpha_next, float) - state.q[0:6]) / dt_s
    ws = buf.workspace
    v = ws[0]
    v[:n_fixed] = buf.v_base[:n_fixed]
    v[n_fixed:] = x[:nf]
    if not refresh_geometry(packed.arrays, buf.law, float(dt_s), state.q, n_fixed, x, v, *buf.factors):
        raise ConvergenceError("the Newton matrix is not positive definite at x")
    x = np.array(x, dtype=float)
    r = np.zeros_like(x)
    evaluate(
        packed.arrays,
        buf.law,
        float(dt_s),
        state.q,
        state.v,
        n_fixed,
        buf.v_base,
        row_scale,
        x,
        np.empty((0, 3)),
        ws,
        r,
    )
    dx = np.zeros_like(x)
    chol, gmat, wmat, cmat = buf.factors[:4]
    if not newton_direction(float(dt_s), nf, r, row_scale, chol, gmat, wmat, cmat, ws, dx, weak_coupling):
        raise ConvergenceError("singular Schur complement at x")
    return r, dx
