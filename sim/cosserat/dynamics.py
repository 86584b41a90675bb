"""Implicit-Euler dynamics of the PLS Cosserat rod with smoothed frictional contact (paper 004, eq. 55, 60).

Unknowns of one step: q̇_k (the free generalized velocities) and the contact slacks u = [u_n, u_t1, u_t2] at
each contact node. With q_k = q_{k−1} + h q̇_k, the residual is

  M(q_k)(q̇_k − q̇_{k−1}) + h C(q_k, q̇_k) q̇_k + h (K θ_k + D θ̇_k) − h (P(q_k) + Σ_j J_c,jᵀ F_j) = 0
  δ_n,j(q_k)/σ_δ − f*(u_n,j) = 0,        v_t,j(q_k, q̇_k)/σ_v − W*(u_t,j) u_t,j = 0

with F_j = σ_λ (n f(u_n) + [t1 t2] W(u_t) u_t). The inertial term is evaluated as ∫Jᵀ[ℳ(J Δq̇ + h J̇q̇) −
h ad_ηᵀℳη] dX, where J̇q̇ comes exactly from one complex-step sweep at q_k + iεq̇_k (no C matrix is formed).

Newton uses the analytic Jacobian of every term except the configuration dependence of M, C and of the
contact/gravity/point-load geometry (i.e. it keeps M + hD + h²K and the exact contact blocks in q̇ and u);
the dropped terms are O(h·|Δq̇|, h·|q̇|, h²·|P|), so the iteration converges fast at the time steps used here.
A Levenberg–Marquardt fallback with a finite-difference Jacobian guards the rest; an unconverged step raises.
The trigonometric smoothing is iterated in the regular (Heaviside) slack coordinates y = φ(u) and mapped back
(`NewtonSettings.regular_slack_coordinates`, `slack.regular_slack`): both maps are exact, so this is the same
step, without the trigonometric map's vanishing slack columns at the corners of the complementarity graphs.

Point constraints (sim.cosserat.constraints) add their multipliers λ as unknowns: the momentum rows get
−h Q_c(q_k, λ) (so hλ is the step's constraint impulse) and the rows g(q_k)/σ_g = 0 hold the constraint at
the end of every step (position level: no drift). Newton keeps the exact blocks ∂g/∂q̇ = h G and
∂Q_c/∂λ and drops ∂Q_c/∂q (O(h²λ), like the other geometry terms).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numba
import numpy as np

from sim.cosserat._mass import composite_mass_matrix
from sim.cosserat._slack_kernels import (
    contact_laws,
    regular_from_slack,
    smoothing_arguments,
    trigonometric_slack_from_regular,
)
from sim.cosserat.constraints import (
    constraint_force,
    constraint_force_map,
    constraint_jacobian,
    constraint_residual,
    multiplier_scales,
    n_constraint_rows,
    row_scales,
)
from sim.cosserat.kinematics import forward_sweep, forward_sweep_with_rates
from sim.cosserat.model import RodModel, RodState
from sim.cosserat.newton import (
    ConvergenceError,
    NewtonResult,
    NewtonSettings,
    finite_difference_jacobian,
    solve,
    solve_error_oriented,
)
from sim.cosserat.obstacles import Plane
from sim.cosserat.slack import Smoothing, friction_map, normal_map

log = logging.getLogger(__name__)

_COMPLEX_STEP = 1e-30
_DEFAULT_NEWTON = NewtonSettings()


@numba.njit(cache=True)
def _inertia_and_gravity(J, Jdot, R, v, dv, h, mdiag, weights, index, gravity):
    """Σ_w Jᵀ[ℳ(J dv + h J̇ v) − h ad_ηᵀ ℳ η] and Σ_w J_vᵀ ρA Rᵀ g over the quadrature points."""
    n_dof = v.shape[0]
    q_inertia = np.zeros(n_dof)
    q_gravity = np.zeros(n_dof)
    for a in range(index.shape[0]):
        i = index[a]
        Ji = J[i]
        eta = Ji @ v
        acc = Jdot[i] @ v
        deta = Ji @ dv
        mom = mdiag[a] * eta
        w = eta[0:3]
        lin = eta[3:6]
        m1 = mom[0:3]
        m2 = mom[3:6]
        adt = np.empty(6)
        adt[0:3] = np.cross(m1, w) + np.cross(m2, lin)
        adt[3:6] = np.cross(m2, w)
        f = mdiag[a] * (deta + h * acc) - h * adt
        q_inertia += weights[a] * (Ji.T @ f)
        g_body = R[i].T @ gravity
        q_gravity += (weights[a] * mdiag[a, 3]) * (Ji[3:6].T @ g_body)
    return q_inertia, q_gravity


@numba.njit(cache=True)
def _inertia_minus_gravity(J, eta, eta_dot, R, dv, h, mdiag, weights, index, gravity, section_of_point):
    """Σ_w Jᵀ[ℳ(J dv + h J̇q̇) − h ad_ηᵀℳη − h ρA (0, Rᵀg)] over the quadrature points, from the sweep's
    η = J q̇ and J̇ q̇ (allocation-free; `_inertia_and_gravity` is the reference). J at a point of section s is
    zero beyond column 18 + 6s (later strain nodes), so the loops stop there (same sums: only zeros skipped)."""
    n_dof = dv.shape[0]
    out = np.zeros(n_dof)
    f = np.empty(6)
    for a in range(index.shape[0]):
        i = index[a]
        Ji = J[i]
        w0, w1, w2 = eta[i, 0], eta[i, 1], eta[i, 2]
        l0, l1, l2 = eta[i, 3], eta[i, 4], eta[i, 5]
        m = mdiag[a]
        m0, m1, m2 = m[0] * w0, m[1] * w1, m[2] * w2
        n0, n1, n2 = m[3] * l0, m[4] * l1, m[5] * l2
        # ad_ηᵀℳη = [m_ω × ω + m_v × v; m_v × ω]
        adt0 = m1 * w2 - m2 * w1 + n1 * l2 - n2 * l1
        adt1 = m2 * w0 - m0 * w2 + n2 * l0 - n0 * l2
        adt2 = m0 * w1 - m1 * w0 + n0 * l1 - n1 * l0
        adt3 = n1 * w2 - n2 * w1
        adt4 = n2 * w0 - n0 * w2
        adt5 = n0 * w1 - n1 * w0
        Ri = R[i]
        gb0 = Ri[0, 0] * gravity[0] + Ri[1, 0] * gravity[1] + Ri[2, 0] * gravity[2]
        gb1 = Ri[0, 1] * gravity[0] + Ri[1, 1] * gravity[1] + Ri[2, 1] * gravity[2]
        gb2 = Ri[0, 2] * gravity[0] + Ri[1, 2] * gravity[1] + Ri[2, 2] * gravity[2]
        n_active = min(18 + 6 * section_of_point[i], n_dof)
        for r in range(6):
            acc = 0.0
            for n in range(n_active):
                acc += Ji[r, n] * dv[n]
            f[r] = m[r] * (acc + h * eta_dot[i, r])
        f[0] -= h * adt0
        f[1] -= h * adt1
        f[2] -= h * adt2
        f[3] -= h * (adt3 + m[3] * gb0)
        f[4] -= h * (adt4 + m[3] * gb1)
        f[5] -= h * (adt5 + m[3] * gb2)
        wa = weights[a]
        f0, f1, f2, f3, f4, f5 = wa * f[0], wa * f[1], wa * f[2], wa * f[3], wa * f[4], wa * f[5]
        for n in range(n_active):
            out[n] += Ji[0, n] * f0 + Ji[1, n] * f1 + Ji[2, n] * f2 + Ji[3, n] * f3 + Ji[4, n] * f4 + Ji[5, n] * f5
    return out


@dataclass
class Kinematics:
    """Real poses and Jacobians at the sweep points and, when a velocity was given, J̇ (reference path) or
    the twists η = J q̇ and J̇ q̇ (fast path)."""

    R: np.ndarray
    p: np.ndarray
    J: np.ndarray
    Jdot: np.ndarray | None = None
    eta: np.ndarray | None = None
    eta_dot: np.ndarray | None = None


def kinematics(model: RodModel, q: np.ndarray, v: np.ndarray | None = None) -> Kinematics:
    """Reference kinematics: the real sweep, or with v the complex-step sweep of the full J̇."""
    g = model.grid
    if v is None:
        R, p, J = forward_sweep(q, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point)
        return Kinematics(R, p, J)
    qc = q + 1j * _COMPLEX_STEP * v
    R, p, J = forward_sweep(qc, model.xi_ref_nodes.astype(complex), g.x_nodes, g.x_points, g.section_of_point)
    return Kinematics(R.real.copy(), p.real.copy(), J.real.copy(), J.imag / _COMPLEX_STEP)


def kinematics_with_rates(model: RodModel, q: np.ndarray, v: np.ndarray) -> Kinematics:
    """Fast kinematics of the step: real J and the twists η = J v, J̇ v (no complex J)."""
    g = model.grid
    R, p, J, eta, eta_dot = forward_sweep_with_rates(
        q, v, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point, _COMPLEX_STEP
    )
    return Kinematics(R, p, J, eta=eta, eta_dot=eta_dot)


def mass_matrix(model: RodModel, kin: Kinematics) -> np.ndarray:
    """M = ∫Jᵀ ℳ J dX by Gauss quadrature (symmetric positive definite for a free rod), assembled by composite
    inertias (`sim.cosserat._mass`; ≈ 4× faster than the plain product `mass_matrix_reference`)."""
    g = model.grid
    return composite_mass_matrix(
        kin.R,
        kin.p,
        kin.J,
        g.node_index,
        g.quad_index,
        g.section_of_point[g.quad_index],
        g.quad_weight_m,
        model.quad_inertia,
    )


def mass_matrix_reference(model: RodModel, kin: Kinematics) -> np.ndarray:
    """M = Bᵀ B with B = √(w ℳ) J stacked over the quadrature points: the reference of `mass_matrix`."""
    g = model.grid
    B = np.sqrt(g.quad_weight_m[:, None] * model.quad_inertia)[:, :, None] * kin.J[g.quad_index]
    B = B.reshape(-1, model.n_dof)
    return B.T @ B


def point_load_force(model: RodModel, kin: Kinematics) -> np.ndarray:
    """Generalized force of the dead tip force and moment (world frame)."""
    i = model.grid.node_index[-1]
    Rt = kin.R[i].T
    return kin.J[i, 3:6].T @ (Rt @ model.tip_force_n) + kin.J[i, 0:3].T @ (Rt @ model.tip_moment_n_m)


def gravity_force(model: RodModel, kin: Kinematics) -> np.ndarray:
    g = model.grid
    out = np.zeros(model.n_dof, dtype=kin.J.dtype)
    for a, i in enumerate(g.quad_index):
        out += g.quad_weight_m[a] * model.quad_inertia[a, 3] * (kin.J[i, 3:6].T @ (kin.R[i].T @ model.gravity_m_s2))
    return out


def elastic_force(model: RodModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(model.n_dof)
    out[6:] = model.stiffness @ q[6:] + model.damping @ v[6:]
    return out


def energy(model: RodModel, q: np.ndarray, v: np.ndarray) -> dict[str, float]:
    """Kinetic, elastic and gravitational energy (J) of the configuration."""
    kin = kinematics(model, q)
    g = model.grid
    kinetic = 0.5 * float(v @ mass_matrix(model, kin) @ v)
    elastic = 0.5 * float(q[6:] @ model.stiffness @ q[6:])
    heights = kin.p[g.quad_index] @ model.gravity_m_s2
    gravitational = -float(np.sum(g.quad_weight_m * model.quad_inertia[:, 3] * heights))
    return {
        "kinetic": kinetic,
        "elastic": elastic,
        "gravity": gravitational,
        "total": kinetic + elastic + gravitational,
    }


@dataclass
class ContactQuery:
    gap_m: np.ndarray  # (k,)
    normal: np.ndarray  # (k,3)
    t1: np.ndarray
    t2: np.ndarray
    jac_position: np.ndarray  # (k,3,N) world velocity of the centreline point
    jac_contact: np.ndarray  # (k,3,N) world velocity of the contact point p − r n


@numba.njit(cache=True)
def _contact_point_jacobians(R, J, index, offset, section_of_point):
    """World Jacobians of the centreline points p (jac_pos = R J_v) and of the contact points p + d
    (jac_c = R J_v − d̃ R J_ω) for K = n_obstacles·k contact candidates; candidate a sits on sweep point
    index[a % k] with offset d = offset[a]. Loops instead of einsum/cross/tile: this runs at every residual.
    J at a point of section s is zero beyond column 18 + 6s, so those columns are left at zero."""
    k = index.shape[0]
    n_cand = offset.shape[0]
    n_dof = J.shape[2]
    jac_pos = np.zeros((n_cand, 3, n_dof))
    jac_c = np.zeros((n_cand, 3, n_dof))
    for a in range(n_cand):
        i = index[a % k]
        Ri = R[i]
        d0, d1, d2 = offset[a, 0], offset[a, 1], offset[a, 2]
        for n in range(min(18 + 6 * section_of_point[i], n_dof)):
            v0 = Ri[0, 0] * J[i, 3, n] + Ri[0, 1] * J[i, 4, n] + Ri[0, 2] * J[i, 5, n]
            v1 = Ri[1, 0] * J[i, 3, n] + Ri[1, 1] * J[i, 4, n] + Ri[1, 2] * J[i, 5, n]
            v2 = Ri[2, 0] * J[i, 3, n] + Ri[2, 1] * J[i, 4, n] + Ri[2, 2] * J[i, 5, n]
            w0 = Ri[0, 0] * J[i, 0, n] + Ri[0, 1] * J[i, 1, n] + Ri[0, 2] * J[i, 2, n]
            w1 = Ri[1, 0] * J[i, 0, n] + Ri[1, 1] * J[i, 1, n] + Ri[1, 2] * J[i, 2, n]
            w2 = Ri[2, 0] * J[i, 0, n] + Ri[2, 1] * J[i, 1, n] + Ri[2, 2] * J[i, 2, n]
            jac_pos[a, 0, n] = v0
            jac_pos[a, 1, n] = v1
            jac_pos[a, 2, n] = v2
            # v_c = v_p + ω × d
            jac_c[a, 0, n] = v0 + w1 * d2 - w2 * d1
            jac_c[a, 1, n] = v1 + w2 * d0 - w0 * d2
            jac_c[a, 2, n] = v2 + w0 * d1 - w1 * d0
    return jac_pos, jac_c


def contact_query_reference(model: RodModel, kin: Kinematics) -> ContactQuery:
    """Plain-numpy version of `contact_query` (the tests compare the numba path against it)."""
    c = model.contact
    idx = model.grid.contact_index
    R, p, J = kin.R[idx], kin.p[idx], kin.J[idx]
    r = model.contact_radius_m
    jac_pos = np.einsum("kij,kjn->kin", R, J[:, 3:6])
    jac_rot = np.einsum("kij,kjn->kin", R, J[:, 0:3])
    parts = [ob.query(p, r) for ob in c.obstacles]
    gap = np.concatenate([x[0] for x in parts])
    normal = np.concatenate([x[1] for x in parts])
    t1 = np.concatenate([x[2] for x in parts])
    t2 = np.concatenate([x[3] for x in parts])
    n_obs = len(c.obstacles)
    jac_pos = np.tile(jac_pos, (n_obs, 1, 1))
    jac_rot = np.tile(jac_rot, (n_obs, 1, 1))
    d = -np.tile(r, n_obs)[:, None] * normal  # contact point offset from the centreline
    # v_c = v_p + ω × d = v_p − d̃ ω
    jac_c = jac_pos - np.cross(d[:, :, None], jac_rot, axis=1)
    return ContactQuery(gap, normal, t1, t2, jac_pos, jac_c)


@functools.lru_cache(maxsize=32)
def _constant_plane_frame(plane: Plane, k: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A plane's gap offset and its (constant) normal and tangents tiled over k nodes, from its own query at the
    origin (gap = p·n + gap(0) − r), so the residual does not re-tile them at every evaluation."""
    gap0, normal, t1, t2 = plane.query(np.zeros((1, 3)), np.zeros(1))
    tiled = tuple(np.ascontiguousarray(np.broadcast_to(x[0], (k, 3))) for x in (normal, t1, t2))
    for x in tiled:
        x.setflags(write=False)
    return (float(gap0[0]), *tiled)


def _obstacle_query(ob, p: np.ndarray, r: np.ndarray):
    if isinstance(ob, Plane):
        gap0, normal, t1, t2 = _constant_plane_frame(ob, p.shape[0])
        return p @ normal[0] + gap0 - r, normal, t1, t2
    return ob.query(p, r)


def contact_query(model: RodModel, kin: Kinematics) -> ContactQuery:
    c = model.contact
    idx = model.grid.contact_index
    p = kin.p[idx]
    r = model.contact_radius_m
    if len(c.obstacles) == 1:
        gap, normal, t1, t2 = _obstacle_query(c.obstacles[0], p, r)
        d = -r[:, None] * normal  # contact point offset from the centreline
    else:
        parts = [_obstacle_query(ob, p, r) for ob in c.obstacles]
        gap = np.concatenate([x[0] for x in parts])
        normal = np.concatenate([x[1] for x in parts])
        t1 = np.concatenate([x[2] for x in parts])
        t2 = np.concatenate([x[3] for x in parts])
        d = -np.tile(r, len(c.obstacles))[:, None] * normal
    jac_pos, jac_c = _contact_point_jacobians(kin.R, kin.J, idx, d, model.grid.section_of_point)
    return ContactQuery(gap, normal, t1, t2, jac_pos, jac_c)


@numba.njit(cache=True)
def _contact_generalized_force_and_slip(jac_c, force, basis_t, v):
    """Σ_j J_c,jᵀ F_j and the tangential slip velocities [t1 t2]ᵀ J_c,j v (same as the einsums of the
    reference `_contact_reference`)."""
    n_cand, _, n_dof = jac_c.shape
    gen = np.zeros(n_dof)
    slip = np.zeros((n_cand, 2))
    for a in range(n_cand):
        vel0 = 0.0
        vel1 = 0.0
        vel2 = 0.0
        for n in range(n_dof):
            j0, j1, j2 = jac_c[a, 0, n], jac_c[a, 1, n], jac_c[a, 2, n]
            gen[n] += j0 * force[a, 0] + j1 * force[a, 1] + j2 * force[a, 2]
            vel0 += j0 * v[n]
            vel1 += j1 * v[n]
            vel2 += j2 * v[n]
        for b in range(2):
            slip[a, b] = basis_t[a, b, 0] * vel0 + basis_t[a, b, 1] * vel1 + basis_t[a, b, 2] * vel2
    return gen, slip


@numba.njit(cache=True)
def _fill_contact_blocks(
    jac, free, jc, jp, normal, basis_t, df_dun, df_dut, row_scale, h, gap_m, slip_m_s, dgap_map, dslip_dun, dslip_du
):
    """Write the contact rows and columns of the Newton matrix (the plain-numpy reference is
    `StepProblem._jacobian_reference`)."""
    nf = free.shape[0]
    n_cand = jc.shape[0]
    for a in range(n_cand):
        c = nf + 3 * a
        for col in range(nf):
            n = free[col]
            j0, j1, j2 = jc[a, 0, n], jc[a, 1, n], jc[a, 2, n]
            # dynamic rows: −h s ∂(J_cᵀF)/∂u
            g = -h * row_scale[col]
            jac[col, c] = g * (j0 * df_dun[a, 0] + j1 * df_dun[a, 1] + j2 * df_dun[a, 2])
            jac[col, c + 1] = g * (j0 * df_dut[a, 0, 0] + j1 * df_dut[a, 1, 0] + j2 * df_dut[a, 2, 0])
            jac[col, c + 2] = g * (j0 * df_dut[a, 0, 1] + j1 * df_dut[a, 1, 1] + j2 * df_dut[a, 2, 1])
            # gap row: h nᵀ J_p / σ_δ; slip rows: [t1 t2]ᵀ J_c / σ_v
            jac[c, col] = (
                h * (normal[a, 0] * jp[a, 0, n] + normal[a, 1] * jp[a, 1, n] + normal[a, 2] * jp[a, 2, n]) / gap_m
            )
            for b in range(2):
                jac[c + 1 + b, col] = (basis_t[a, b, 0] * j0 + basis_t[a, b, 1] * j1 + basis_t[a, b, 2] * j2) / slip_m_s
        jac[c, c] = -dgap_map[a]
        for b in range(2):
            jac[c + 1 + b, c] = -dslip_dun[a, b]
            jac[c + 1 + b, c + 1] = -dslip_du[a, b, 0]
            jac[c + 1 + b, c + 2] = -dslip_du[a, b, 1]


@dataclass(frozen=True)
class ContactScales:
    force_n: float
    gap_m: float
    slip_m_s: float


def slack_scales(model: RodModel, settings, dt_s: float) -> ContactScales:
    """Scale factors σ_λ, σ_δ, σ_v of the contact nodes of `model` under `settings` (a `ContactSettings` or a
    pair contact: anything with m_sections and the three optional scales). Defaults are inertial: one node's
    weight, and the gap and slip that force produces on one node in one step (σ_λh²/m, σ_λh/m), so one slack
    unit moves every row comparably."""
    node_mass = model.rod.mass_kg() / settings.m_sections
    g_ref = max(float(np.linalg.norm(model.gravity_m_s2)), 1.0)
    force = settings.force_scale_n if settings.force_scale_n is not None else node_mass * g_ref
    gap = settings.gap_scale_m if settings.gap_scale_m is not None else force * dt_s**2 / node_mass
    slip = settings.slip_scale_m_s if settings.slip_scale_m_s is not None else force * dt_s / node_mass
    return ContactScales(force, gap, slip)


def contact_scales(model: RodModel, dt_s: float) -> ContactScales:
    return slack_scales(model, model.contact, dt_s)


@dataclass
class StepInfo:
    """What one step produced besides the new state."""

    iterations: int
    residual: float
    used_fallback: bool
    base_wrench: np.ndarray  # (6,) [moment; force] applied by the base support on the rod, world frame
    contact_force_n: np.ndarray  # (k,3) world nodal contact forces on the rod
    contact_gap_m: np.ndarray  # (k,)
    contact_slip_m_s: np.ndarray  # (k,2)
    substeps: int = 1  # the steps dt was split into by halving (`step`)
    # 1: solved directly; more: the converged stages of the continuation rescue (`step`)
    continuation_stages: int = 1
    # point-constraint reactions on the rod: world force (N) per constraint, then section-frame moment (N·m)
    # for "fixed" ones (model.constraints order)
    constraint_multipliers: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class NewtonIterate:
    """One Newton iterate of a step, for `step(..., on_newton_iterate=...)` (paper 004, Fig. 16: the contact
    load during the iterations). iteration 0 is the warm start; t_s and dt_s are those of the (sub)step."""

    t_s: float
    dt_s: float
    iteration: int
    residual: float
    contact_force_n: np.ndarray  # (k,3) world nodal contact forces at this iterate


class StepProblem:
    """The nonlinear system of one implicit-Euler step, as residual and (quasi-Newton) Jacobian of x."""

    def __init__(
        self,
        model: RodModel,
        state: RodState,
        dt_s: float,
        base_alpha_next: np.ndarray | None,
        law: Smoothing | None = None,
        scale_dt_s: float | None = None,
    ):
        """`law` replaces the model's smoothing in the contact laws (the regular-coordinate solve of an exact
        smoothing iterates on the Heaviside maps; see `step`). `scale_dt_s` (default dt_s) is the time step the
        inertial slack scales σ_δ, σ_v are computed for: the stages of a continued step (`step`) keep the
        scenario's dt there, so the smoothed contact law is one function of the physical gap and force whatever
        length of step the solver happens to solve."""
        self.model, self.h = model, dt_s
        self.smoothing = law if law is not None else (model.contact.smoothing if model.contact else None)
        self.q_prev, self.v_prev = state.q, state.v
        self.free = model.free_dofs
        self.v_fixed = np.zeros(model.n_dof)
        if model.base == "clamped" and base_alpha_next is not None:
            self.v_fixed[0:6] = (np.asarray(base_alpha_next, float) - state.q[0:6]) / dt_s
        self.n_free = len(self.free)
        self.k = model.n_contact_nodes
        self.n_c = n_constraint_rows(model.constraints)
        self.scales = contact_scales(model, scale_dt_s or dt_s) if model.contact is not None else None
        g_norm = float(np.linalg.norm(model.gravity_m_s2))
        # Reference speed of the dynamic rows' tolerance. It includes the prescribed base velocity: without it
        # a rod at rest without gravity (the tube insertion's first step) got v_ref = 1e-6·L/h and row scales
        # ~1e21 (rcond 1e-14 even with the friction bound fixed).
        self.v_ref = max(
            g_norm * dt_s,
            float(np.max(np.abs(state.v))),
            float(np.max(np.abs(self.v_fixed))),
            1e-6 * model.rod.length_m / dt_s,
        )
        if self.n_c:
            # multipliers in units of the rod's weight (moments × L); constraint rows in units of the step's
            # reference displacement v_ref·h (rotations / L), so the Newton tolerance 1e-8 holds g to 1e-8·v_ref·h
            g_ref = max(g_norm, 1.0)
            self.multiplier_scale = multiplier_scales(
                model.constraints, model.rod.mass_kg() * g_ref, model.rod.length_m
            )
            self.constraint_row_scale = row_scales(model.constraints, model.rod.length_m) * (
                model.rod.length_m / (self.v_ref * dt_s)
            )
        self._matrix = None
        self._elastic_block: np.ndarray | None = None
        self._all_free = False
        self.frame_terms = False  # NewtonSettings.contact_frame_terms
        self._row_scale = None
        self._kin_cache: tuple[bytes, Kinematics] | None = None
        self._eval_cache: tuple[bytes, tuple] | None = None
        self._tip_load = bool(np.any(model.tip_force_n != 0) or np.any(model.tip_moment_n_m != 0))
        # True: the complex sweep of the full J̇, the plain inertia kernel, the numpy contact laws and the plain
        # mass matrix (the reference path the tests compare the fast one with)
        self.reference_kinematics = False

    def kinematics_at(self, v: np.ndarray) -> Kinematics:
        """Kinematics at q_prev + h v with J̇ v (complex step), cached (the warm-start prediction, the first
        Newton evaluation and the step's outputs all need the same sweep)."""
        key = v.tobytes()
        if self._kin_cache is None or self._kin_cache[0] != key:
            sweep = kinematics if self.reference_kinematics else kinematics_with_rates
            self._kin_cache = (key, sweep(self.model, self.q_prev + self.h * v, v))
        return self._kin_cache[1]

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = self.v_fixed.copy()
        v[self.free] = x[: self.n_free]
        return v, x[self.n_free : self.n_free + 3 * self.k].reshape(-1, 3)

    def multipliers(self, x: np.ndarray) -> np.ndarray:
        """Constraint reactions (N, N·m) from the scaled unknowns at the end of x."""
        return x[self.n_free + 3 * self.k :] * self.multiplier_scale if self.n_c else np.zeros(0)

    def pack(self, v: np.ndarray, slack: np.ndarray, multipliers: np.ndarray | None = None) -> np.ndarray:
        z = np.zeros(self.n_c) if multipliers is None else multipliers / self.multiplier_scale
        return np.concatenate([v[self.free], slack.reshape(-1), z])

    def _iteration_matrix(self, kin: Kinematics) -> np.ndarray:
        """M(q) + hD + h²K on the free dofs at the current iterate.

        M is re-assembled at every iterate (composite inertias, `mass_matrix`): at an impact the warm start can be
        far from the solution in the strain rates (h·Δθ̇ of order one), and an M frozen there made the
        iteration stall. The row scale is fixed at the first iterate so the merit function stays the same
        throughout the step."""
        m = self.model
        if self._matrix is not None and self._matrix[0] is kin:  # the first iterate: row scale, then matrix
            return self._matrix[1]
        if self._elastic_block is None:  # hD + h²K: constant over the step, formed once
            self._elastic_block = self.h * m.damping + self.h**2 * m.stiffness
            self._all_free = len(self.free) == m.n_dof and bool(np.all(self.free == np.arange(m.n_dof)))
        A = (mass_matrix_reference if self.reference_kinematics else mass_matrix)(m, kin)
        A[6:, 6:] += self._elastic_block
        if not self._all_free:
            A = A[np.ix_(self.free, self.free)]
        if self._row_scale is None:
            self._row_scale = 1.0 / (np.diag(A) * self.v_ref)
        self._matrix = (kin, A)
        return A

    def generalized_residual(
        self, v: np.ndarray, slack: np.ndarray, kin: Kinematics | None = None, multipliers: np.ndarray | None = None
    ):
        """Unscaled dynamic residual on all dofs, the contact residuals and the pieces the Jacobian needs."""
        m, h = self.model, self.h
        q = self.q_prev + h * v
        if kin is None:
            kin = self.kinematics_at(v)
        g = m.grid
        if kin.Jdot is None:
            r_dyn = _inertia_minus_gravity(
                kin.J,
                kin.eta,
                kin.eta_dot,
                kin.R,
                v - self.v_prev,
                h,
                m.quad_inertia,
                g.quad_weight_m,
                g.quad_index,
                m.gravity_m_s2,
                g.section_of_point,
            )
            r_dyn += h * elastic_force(m, q, v)
            if self._tip_load:
                r_dyn -= h * point_load_force(m, kin)
        else:
            q_in, q_grav = _inertia_and_gravity(
                kin.J,
                kin.Jdot,
                kin.R,
                v,
                v - self.v_prev,
                h,
                m.quad_inertia,
                g.quad_weight_m,
                g.quad_index,
                m.gravity_m_s2,
            )
            r_dyn = q_in + h * (elastic_force(m, q, v) - q_grav - point_load_force(m, kin))
        contact = None
        if m.contact is not None:
            contact = self._contact(kin, v, slack)
            r_dyn -= h * contact["generalized_force"]
        if self.n_c and multipliers is not None:
            r_dyn -= h * constraint_force(m.constraints, m.constraint_index, kin.R, kin.J, multipliers)
        return r_dyn, contact, kin

    def _contact(self, kin: Kinematics, v: np.ndarray, slack: np.ndarray) -> dict:
        """Contact forces, gap and slip residuals and the per-node derivatives the Newton matrix needs (the
        laws in one numba kernel, `contact_laws`; `_contact_reference` is the plain-numpy version)."""
        if self.reference_kinematics:
            return self._contact_reference(kin, v, slack)
        m, sc = self.model, self.scales
        cq = contact_query(m, kin)
        kind, sharpness, eps = smoothing_arguments(self.smoothing)
        (
            lam_n,
            dlam_n,
            gap_map,
            dgap_map,
            dbound_dun,
            lam_t,
            dlt_da,
            slip_map,
            dslip_da,
            dlt_du,
            dslip_du,
            force,
            df_dun,
            df_dut,
        ) = contact_laws(
            kind, sharpness, eps, m.contact.friction_coefficient, sc.force_n, slack, cq.normal, cq.t1, cq.t2
        )
        result = self._contact_result(cq, force, v, gap_map, slip_map)
        result.update(
            lam_n=lam_n, dlam_n=dlam_n, dbound_dun=dbound_dun, lam_t=lam_t, dgap_map=dgap_map, dlt_du=dlt_du,
            dlt_da=dlt_da, dslip_du=dslip_du, dslip_da=dslip_da, df_dun=df_dun, df_dut=df_dut,
        )  # fmt: skip
        return result

    def _contact_reference(self, kin: Kinematics, v: np.ndarray, slack: np.ndarray) -> dict:
        """Plain-numpy contact laws (`slack.normal_map`, `slack.friction_map`): the reference of `_contact`."""
        m, sc = self.model, self.scales
        mu = m.contact.friction_coefficient
        cq = contact_query(m, kin)
        u_n, u_t = slack[:, 0], slack[:, 1:3]
        lam_n, dlam_n, gap_map, dgap_map = normal_map(self.smoothing, u_n)
        # Friction bound a = μ·max(Λ_n, 0): the sigmoid's Λ_n = u_n·D(u_n) is slightly *negative* at separated
        # nodes, and a negative bound turns the friction map into an anti-friction gain −a/|u_t| ≈ −a/ε
        # (ε = 1e-9) at u_t = 0: entries ~1e6 in the Newton matrix, rcond ≈ 1e-22 in the tube scenario.
        in_contact = lam_n > 0.0
        bound = mu * np.where(in_contact, lam_n, 0.0)
        dbound_dun = mu * np.where(in_contact, dlam_n, 0.0)
        lam_t, dlt_du, dlt_da, slip_map, dslip_du, dslip_da = friction_map(self.smoothing, u_t, bound)
        force = sc.force_n * (lam_n[:, None] * cq.normal + lam_t[:, 0:1] * cq.t1 + lam_t[:, 1:2] * cq.t2)
        result = self._contact_result(cq, force, v, gap_map, slip_map)
        result.update(
            lam_n=lam_n, dlam_n=dlam_n, dbound_dun=dbound_dun, lam_t=lam_t, dgap_map=dgap_map, dlt_du=dlt_du,
            dlt_da=dlt_da, dslip_du=dslip_du, dslip_da=dslip_da,
        )  # fmt: skip
        return result

    def _contact_result(self, cq, force: np.ndarray, v: np.ndarray, gap_map: np.ndarray, slip_map: np.ndarray) -> dict:
        """The part of a contact evaluation both law paths share: generalized force, slip and the gap and slip
        residual rows (gap / σ_δ − f*(u_n), v_t / σ_v − W*(u_t)u_t)."""
        sc = self.scales
        basis_t = np.stack([cq.t1, cq.t2], axis=1)  # (k,2,3)
        gen_force, slip = _contact_generalized_force_and_slip(cq.jac_contact, force, basis_t, v)
        return {
            "query": cq,
            "force": force,
            "generalized_force": gen_force,
            "slip": slip,
            "r_gap": cq.gap_m / sc.gap_m - gap_map,
            "r_slip": slip / sc.slip_m_s - slip_map,
            "basis_t": basis_t,
        }

    def evaluate(self, x: np.ndarray) -> tuple:
        """(r_dyn, contact, kin) at x, cached for the last x."""
        key = x.tobytes()
        if self._eval_cache is None or self._eval_cache[0] != key:
            v, slack = self.unpack(x)
            self._eval_cache = (key, self.generalized_residual(v, slack, multipliers=self.multipliers(x)))
        return self._eval_cache[1]

    def residual_and_jacobian(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.residual(x), self.jacobian(x)

    def residual_and_lazy_jacobian(self, x: np.ndarray) -> tuple[np.ndarray, Callable[[], np.ndarray]]:
        """The scaled residual now and its (quasi-Newton) Jacobian on demand: the Newton solver only needs
        the matrix at accepted iterates, not at the rejected trial points of the line search."""
        return self.residual(x), lambda: self.jacobian(x)

    def residual(self, x: np.ndarray) -> np.ndarray:
        r_dyn, contact, kin = self.evaluate(x)
        if self._row_scale is None:
            self._iteration_matrix(kin)
        parts = [r_dyn[self.free] * self._row_scale]
        if contact is not None:
            parts.append(np.column_stack([contact["r_gap"], contact["r_slip"]]).reshape(-1))
        if self.n_c:
            m = self.model
            g = constraint_residual(m.constraints, m.constraint_index, kin.R, kin.p)
            parts.append(g * self.constraint_row_scale)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def error_norm(self, x: np.ndarray, r: np.ndarray) -> float:
        """What must meet the Newton tolerance: ‖r‖∞, with the dynamic rows measured against the larger of v_ref
        and the iterate's own largest speed. The row scale is fixed at the first iterate from v_ref, the speeds
        before the step; where the step itself is far faster (the IX-C release: v_ref 6e-3, the released end's
        strain rates 6e4), a plain 1e-8 asks for velocities to 1e-15 of their size, below the rounding of the
        residual (measured: one-ulp changes of x moved it by 6e-7), so whether Newton "converged" was decided
        by the BLAS kernel. Relative to the solution's own speed the tolerance keeps its meaning everywhere."""
        nf = self.n_free
        speed_ratio = max(1.0, float(np.max(np.abs(x[:nf]))) / self.v_ref) if nf else 1.0
        dynamic = float(np.max(np.abs(r[:nf]))) / speed_ratio if nf else 0.0
        others = float(np.max(np.abs(r[nf:]))) if len(r) > nf else 0.0
        return max(dynamic, others)

    def _add_constraint_blocks(self, jac: np.ndarray, kin: Kinematics) -> None:
        """∂(momentum rows)/∂λ = −h Q_c-map and ∂(g rows)/∂q̇ = h G (both scaled)."""
        m, nf, h = self.model, self.n_free, self.h
        rows = slice(nf + 3 * self.k, nf + 3 * self.k + self.n_c)
        fmap = constraint_force_map(m.constraints, m.constraint_index, kin.R, kin.J)[self.free]
        jac[:nf, rows] = -h * self._row_scale[:, None] * fmap * self.multiplier_scale[None, :]
        G = constraint_jacobian(m.constraints, m.constraint_index, kin.R, kin.J)[:, self.free]
        jac[rows, :nf] = h * self.constraint_row_scale[:, None] * G

    def _matrix_without_contact(self, x: np.ndarray) -> tuple[np.ndarray, dict | None, Kinematics]:
        """The Newton matrix's dynamics and constraint blocks (shared by the fast and the reference assembly)."""
        r_dyn, contact, kin = self.evaluate(x)
        nf = self.n_free
        size = nf + 3 * self.k + self.n_c
        jac = np.zeros((size, size))
        jac[:nf, :nf] = self._iteration_matrix(kin) * self._row_scale[:, None]
        if self.n_c:
            self._add_constraint_blocks(jac, kin)
        return jac, contact, kin

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Newton matrix: exact contact blocks, M(q) + hD + h²K for the dynamics (see module docstring)."""
        jac, contact, kin = self._matrix_without_contact(x)
        if contact is None:
            return jac
        s = self._row_scale
        sc = self.scales
        cq = contact["query"]
        bt = contact["basis_t"]
        if "df_dun" in contact:  # from the contact-law kernel
            df_dun, df_dut = contact["df_dun"], contact["df_dut"]
        else:
            dlt_dun = contact["dlt_da"] * contact["dbound_dun"][:, None]
            df_dun = sc.force_n * (
                contact["dlam_n"][:, None] * cq.normal + dlt_dun[:, 0:1] * cq.t1 + dlt_dun[:, 1:2] * cq.t2
            )
            df_dut = sc.force_n * np.einsum("kai,kab->kib", bt, contact["dlt_du"])  # (k,3,2)
        _fill_contact_blocks(
            jac,
            self.free,
            cq.jac_contact,
            cq.jac_position,
            cq.normal,
            bt,
            df_dun,
            df_dut,
            s,
            self.h,
            sc.gap_m,
            sc.slip_m_s,
            contact["dgap_map"],
            contact["dslip_da"] * contact["dbound_dun"][:, None],
            contact["dslip_du"],
        )
        if self.frame_terms and any(not isinstance(ob, Plane) for ob in self.model.contact.obstacles):
            self._add_frame_rotation_terms(jac, contact, kin, self.unpack(x)[0])
        return jac

    def exact_jacobian(self, x: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
        """The Newton matrix with its velocity columns replaced by forward differences of the scaled residual
        (`r` = residual(x) if known): adds all the quasi-Newton matrix omits — h·∂(Cq̇)/∂q̇, h·∂M/∂q·Δq̇, the
        geometric stiffness of gravity, contact and constraint forces, the turning of J_c in the slip rows.
        The slack and multiplier columns are exact already and stay analytic (a difference across the friction
        map's ε = 1e-9 corner at u_t = 0 would be wrong there). Costs n_free residual evaluations: the rescue
        of a step that failed with halvings only (`dynamics.step`)."""
        jac = self.jacobian(x).copy()
        # Central differences with the step scaled to the iterate's largest speed: the residual's rounding is
        # relative to its largest terms, so a step relative to |x_j| alone (1.5e-8 for a velocity near 0 beside
        # strain rates of 1e4) made columns of noise (measured: the released IX-C rod, where the matrix's
        # condition is ~1e8, then stalled on some BLAS kernels and not others). eps^(1/3) balances truncation
        # and rounding of a central difference.
        speed = float(np.max(np.abs(x[: self.n_free]))) if self.n_free else 1.0
        for j in range(self.n_free):
            delta = 6e-6 * max(abs(float(x[j])), 1e-3 * speed, 1e-6)
            shifted = x.copy()
            shifted[j] += delta
            plus = self.residual(shifted)
            shifted[j] -= 2.0 * delta
            jac[:, j] = (plus - self.residual(shifted)) / (2.0 * delta)
        return jac

    def _obstacle_frame_derivatives(self, kin: Kinematics):
        """∂n/∂p, ∂t1/∂p, ∂t2/∂p (K,3,3) of the obstacles' contact frames at the centreline points, by central
        differences of the obstacle queries (cheap: 6 queries of k points)."""
        m = self.model
        p = kin.p[m.grid.contact_index]
        r = m.contact_radius_m
        delta = 1e-7 * m.rod.length_m
        out = [np.zeros((self.k, 3, 3)) for _ in range(3)]
        for e in range(3):
            dp = np.zeros(3)
            dp[e] = delta
            plus = [ob.query(p + dp, r) for ob in m.contact.obstacles]
            minus = [ob.query(p - dp, r) for ob in m.contact.obstacles]
            for f in range(3):
                hi = np.concatenate([x[1 + f] for x in plus])
                lo = np.concatenate([x[1 + f] for x in minus])
                out[f][:, :, e] = (hi - lo) / (2 * delta)
        return out

    def _add_frame_rotation_terms(self, jac, contact, kin, v):
        """Dependence of the contact frame (n, t1, t2) on the configuration, for a curved obstacle: the
        force Σ J_cᵀ F with F = σ(λ_n n + λ_t1 t1 + λ_t2 t2) turns with n(p), the slip tᵀ J_c v with t(p)."""
        dn, dt1, dt2 = self._obstacle_frame_derivatives(kin)
        sc, h, nf = self.scales, self.h, self.n_free
        cq = contact["query"]
        # Nodes in contact only: at a separated node the force is the sigmoid's tiny negative tail, and inside
        # a tube near its centreline the frame is singular (∂n/∂p ~ 1/distance).
        touching = (contact["lam_n"] > 0.0).astype(float)
        lam_n, lam_t = contact["lam_n"] * touching, contact["lam_t"] * touching[:, None]
        dforce = sc.force_n * (
            lam_n[:, None, None] * dn + lam_t[:, 0, None, None] * dt1 + lam_t[:, 1, None, None] * dt2
        )
        jp = cq.jac_position[:, :, self.free]
        jc = cq.jac_contact[:, :, self.free]
        geo = np.einsum("kin,kij,kjm->nm", jc, dforce, jp)
        jac[:nf, :nf] += -h * h * self._row_scale[:, None] * geo
        vel = np.einsum("kin,n->ki", cq.jac_contact, v)
        cols = nf + 3 * np.arange(self.k)
        for b, dt in enumerate((dt1, dt2)):
            jac[cols + 1 + b, :nf] += h * np.einsum("ki,kij,kjm->km", vel * touching[:, None], dt, jp) / sc.slip_m_s

    def _jacobian_reference(self, x: np.ndarray) -> np.ndarray:
        """Plain-numpy assembly of the Newton matrix (tests compare `jacobian` against it)."""
        jac, contact, kin = self._matrix_without_contact(x)
        if contact is None:
            return jac
        s = self._row_scale
        nf, k = self.n_free, self.k
        h, sc = self.h, self.scales
        cq = contact["query"]
        jc = cq.jac_contact[:, :, self.free]  # (k,3,nf)
        jp = cq.jac_position[:, :, self.free]
        bt = contact["basis_t"]
        dlam_n = contact["dlam_n"]
        # d(force_j)/d(u_n,j) and d(force_j)/d(u_t,j) in world coordinates
        dlt_dun = contact["dlt_da"] * contact["dbound_dun"][:, None]
        df_dun = sc.force_n * (dlam_n[:, None] * cq.normal + np.einsum("ka,kai->ki", dlt_dun, bt))
        df_dut = sc.force_n * np.einsum("kai,kab->kib", bt, contact["dlt_du"])  # (k,3,2)
        cols = nf + 3 * np.arange(k)
        rows_dyn = -h * s[:, None]
        jac[:nf, cols] = rows_dyn * np.einsum("kin,ki->nk", jc, df_dun)
        jtd = np.einsum("kin,kib->nkb", jc, df_dut)
        jac[:nf, cols + 1] = rows_dyn * jtd[:, :, 0]
        jac[:nf, cols + 2] = rows_dyn * jtd[:, :, 1]
        # gap rows
        jac[cols, :nf] = h * np.einsum("ki,kin->kn", cq.normal, jp) / sc.gap_m
        jac[cols, cols] = -contact["dgap_map"]
        # slip rows
        jt = np.einsum("kai,kin->kan", bt, jc) / sc.slip_m_s  # (k,2,nf)
        jac[cols + 1, :nf] = jt[:, 0]
        jac[cols + 2, :nf] = jt[:, 1]
        dslip_dun = contact["dslip_da"] * contact["dbound_dun"][:, None]
        for a in range(2):
            jac[cols + 1 + a, cols] = -dslip_dun[:, a]
            jac[cols + 1 + a, cols + 1] = -contact["dslip_du"][:, a, 0]
            jac[cols + 1 + a, cols + 2] = -contact["dslip_du"][:, a, 1]
        if self.frame_terms and any(not isinstance(ob, Plane) for ob in self.model.contact.obstacles):
            self._add_frame_rotation_terms(jac, contact, kin, self.unpack(x)[0])
        return jac


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
    `on_newton_iterate` (off by default) sees every Newton iterate, also of attempts that were then halved.
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


def _step_or_halve(model, state, dt_s, settings, base_alpha_next, max_halvings, on_newton_iterate) -> StepInfo:
    """The quasi-Newton step, else two half steps (recursively); the state is untouched on ConvergenceError. Each
    half step has the inertial slack scales of its own length, as the step solved whole would."""
    stepper = _StepSolver(model, state, dt_s, settings, base_alpha_next, on_newton_iterate)
    try:
        return stepper.commit(*stepper.accept(stepper.direct()))
    except ConvergenceError:
        if max_halvings <= 0:
            raise
    log.debug("t=%.4f s: step %.2e s did not converge; two half steps", state.t_s, dt_s)
    backup = state.copy()
    mid = None if base_alpha_next is None else 0.5 * (state.q[0:6] + np.asarray(base_alpha_next, float))
    halves = (0.5 * dt_s, settings)
    try:
        first = _step_or_halve(model, state, *halves, mid, max_halvings - 1, on_newton_iterate)
        second = _step_or_halve(model, state, *halves, base_alpha_next, max_halvings - 1, on_newton_iterate)
    except ConvergenceError:
        state.t_s, state.q, state.v, state.slack = backup.t_s, backup.q, backup.v, backup.slack
        raise
    return _joined(first, second)


def _joined(first: StepInfo, second: StepInfo) -> StepInfo:
    """Two equal half steps as one: forces and wrenches averaged over the step (impulse / dt, what one full step
    reports), the end state's gaps, slips and multipliers, the iterations and sub-steps of both."""
    return dataclasses.replace(
        second,
        iterations=first.iterations + second.iterations,
        substeps=first.substeps + second.substeps,
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
        return problem.pack(v_guess, _predicted_slack(problem, slack, v_guess), multipliers)

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


def _predicted_slack(problem: StepProblem, slack: np.ndarray, v_guess: np.ndarray) -> np.ndarray:
    """Warm start of the slacks: nodes separated at the last step get u_n = −δ_pred/σ_δ from the gap predicted
    at q + h q̇. That is exact while they stay separated and, for a node about to hit, the slack of the force
    that stops the predicted penetration in one step when σ_δ is the inertial default σ_λ h²/m_node (a set
    `gap_scale_m` makes that a rougher start) — Newton then starts with the right active set at an impact
    instead of discovering it node by node."""
    slack = slack.copy()
    if problem.model.contact is None:
        return slack
    separated = slack[:, 0] < 0
    if np.any(separated):
        cq = contact_query(problem.model, problem.kinematics_at(v_guess))
        slack[separated, 0] = -cq.gap_m[separated] / problem.scales.gap_m
    return slack


def regular_law(smoothing: Smoothing) -> Smoothing | None:
    """The Heaviside law that a trigonometric smoothing is iterated on (None: iterate the smoothing itself)."""
    if smoothing.kind != "trigonometric":
        return None
    return Smoothing("heaviside", tangent_epsilon=smoothing.tangent_epsilon)


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


def step_info(model: RodModel, q, result, r_dyn, dt_s: float, kin, contact, multipliers) -> StepInfo:
    """What a converged step reports (one rod): Newton's numbers, the base wrench, the contact field."""
    k = model.n_contact_nodes
    return StepInfo(
        iterations=result.iterations,
        residual=result.residual_norm,
        used_fallback=result.used_fallback,
        base_wrench=base_wrench(model, q, r_dyn / dt_s, kin),
        contact_force_n=contact["force"] if contact else np.zeros((k, 3)),
        contact_gap_m=contact["query"].gap_m if contact else np.zeros(k),
        contact_slip_m_s=contact["slip"] if contact else np.zeros((k, 2)),
        constraint_multipliers=multipliers,
    )


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


def base_wrench(
    model: RodModel, q: np.ndarray, reaction_generalized: np.ndarray, kin: Kinematics | None = None
) -> np.ndarray:
    """World wrench [moment about p0; force] the base support applies on the rod.

    The α rows of the unconstrained residual are the generalized reaction J_α(0)ᵀ W_body; inverting J_α(0)
    gives the body wrench, rotated into the world frame. (A force sensor at the flange reads its negative.)
    """
    if model.base == "free":
        return np.zeros(6)
    kin0 = kin if kin is not None else kinematics(model, q)
    j_alpha = kin0.J[0, :, 0:6]
    w_body = np.linalg.solve(j_alpha.T, reaction_generalized[0:6])
    R0 = kin0.R[0]
    return np.concatenate([R0 @ w_body[0:3], R0 @ w_body[3:6]])
