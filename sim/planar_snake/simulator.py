"""Hybrid simulation of the planar snake among obstacles (paper 001, Sec. V): flow (46–47) with the contact LCP
(32), jumps (37, 43–44) with the impact LCP (36) at impacts and α ← 0 at detachments, with event location.

One step of length h (``model.time_step_s``):

1. Joint servos turn the held references into torques u (PD, saturated), integrated linearly implicitly.
2. Flow map: ``q̈ = M⁻¹(f_u + (C̄ᵀ − μ_o Λ) λ)`` with λ from LCP (32), solved by Lemke; the LCP matrix is checked
   for the P-property (Tsatsomeros–Li) whenever it is formed, and the smallest principal minor is kept.
3. Ground friction enters implicitly at velocity level (see ``ground_friction``), split from the flow: f_u of the
   LCP uses the ground friction force of the previous step. Semi-implicit Euler: q̇⁺ = q̇ + h q̈ + M⁻¹ G P.
   If this leaves a contacted link moving into its obstacle (O(h) splitting error), the impact LCP (36) on the
   current contacts projects the velocity (an inelastic correction, counted as ``velocity_projections``).
4. q moves linearly, q(σ) = q + σ q̇⁺. Event location: the first σ ∈ (0, h] at which a free link's gap to an
   obstacle reaches zero is found by a compiled bracketed secant/bisection (Brent's method in the reference
   path); there the jump map applies (α_i ← α̃(i), impact LCP (36) for all contacted links), and the rest of
   the step continues with the post-impact velocity.
5. Detachment (40): a contacted link whose gap exceeds ``detach_gap_m`` gets α_i = 0.
6. Constraint drift: contacted links with a (tiny) negative gap are projected back onto g = 0 by a Newton step
   along M⁻¹ C̄ᵀ (post-stabilisation). ``max_drift_before_projection_m`` reports what it removed;
   ``max_penetration_m`` is the deepest overlap of any link with any obstacle in the state after each step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numba
import numpy as np
from scipy.optimize import brentq

from sim.lcp import LCPStatus, complementarity_residual, p_matrix_test, solve_lcp
from sim.planar_snake.contact import ContactTerms, all_gaps, contact_terms, first_contact, link_gaps_to
from sim.planar_snake.ground_friction import solve_ground_friction
from sim.planar_snake.model import (
    PlanarSnakeError,
    PlanarSnakeModel,
    joint_angles,
    link_jacobians,
)

__all__ = ["PlanarSnakeState", "SimulationError", "SimulationStats", "initial_state", "step"]

log = logging.getLogger(__name__)

_EVENT_XTOL_S = 1e-13
# Approach velocities below this after the friction split are left to the position projection: over one step
# they move a contact by < 1e-9 m, while projecting them would cost an impact LCP nearly every step.
_PROJECTION_TOL_M_S = 1e-6
_PROJECTION_GAP_TOL_M = 1e-13  # overlaps below this are round-off, not drift


class SimulationError(RuntimeError):
    """The hybrid model could not be continued (e.g. LCP (32) without solution)."""


@dataclass
class SimulationStats:
    """Solver statistics and the physical checks (gaps, complementarity), accumulated over a run."""

    steps: int = 0
    impacts: int = 0
    detachments: int = 0
    flow_lcp_solves: int = 0
    flow_lcp_pivots: int = 0
    impact_lcp_solves: int = 0
    velocity_projections: int = 0
    p_matrix_checks: int = 0
    p_matrix_failures: int = 0
    smallest_principal_minor: float = float("inf")
    near_singular_lcp_solves: int = 0  # LCP (32) matrices with a principal minor below 1e-6 (still P)
    max_complementarity_residual: float = 0.0
    min_lambda: float = float("inf")
    min_post_impact_normal_velocity_m_s: float = float("inf")
    max_penetration_m: float = 0.0  # deepest overlap of any link with any obstacle in the state after a step
    max_drift_before_projection_m: float = 0.0  # contact drift the position projection removed (integrator)
    ground_friction_sweeps: int = 0
    max_contacts: int = 0

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        out["flow_lcp_pivots_mean"] = self.flow_lcp_pivots / self.flow_lcp_solves if self.flow_lcp_solves else 0.0
        out["ground_friction_sweeps_mean"] = self.ground_friction_sweeps / self.steps if self.steps else 0.0
        for k, v in out.items():
            if isinstance(v, float) and not np.isfinite(v):
                out[k] = None
        return out


@dataclass
class PlanarSnakeState:
    """Mutable state x = (q, q̇, α) of eq. 38, plus the obstacle each contacted link touches and solver memory."""

    t_s: float
    q: np.ndarray
    qd: np.ndarray
    alpha: np.ndarray  # (n,) int: 0 free, ±1 side of the contact force (eq. 15)
    contact_obstacle: np.ndarray  # (n,) int: obstacle index, −1 when free
    ground_impulse: np.ndarray  # (3n,) last ground-friction impulses (PGS warm start)
    ground_force: np.ndarray  # (n+2,) last ground-friction generalised force (enters f_u of LCP 32)
    joint_torque_nm: np.ndarray  # (n−1,) last applied torques u
    stats: SimulationStats = field(default_factory=SimulationStats)
    last_lambda: np.ndarray = field(default_factory=lambda: np.zeros(0))  # λ of the last LCP (32), N
    last_lambda_links: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # its links


def initial_state(model: PlanarSnakeModel, q0: np.ndarray, qd0: np.ndarray | None = None) -> PlanarSnakeState:
    """A state at rest (or with ``qd0``) that must not intersect any obstacle."""
    n = model.n_links
    q0 = np.array(q0, dtype=float)
    if q0.shape != (n + 2,):
        raise PlanarSnakeError(f"q0 must have n_links + 2 = {n + 2} entries (θ_1..θ_n, p_x, p_y), got {q0.shape}")
    qd0 = np.zeros(n + 2) if qd0 is None else np.array(qd0, dtype=float)
    gaps = all_gaps(model, q0)
    if gaps.size and gaps.min() <= 0.0:
        i, j = np.unravel_index(np.argmin(gaps), gaps.shape)
        raise PlanarSnakeError(f"initial pose intersects obstacle {j} with link {i + 1} (gap {gaps[i, j]:.3g} m)")
    return PlanarSnakeState(
        t_s=0.0,
        q=q0,
        qd=qd0,
        alpha=np.zeros(n, dtype=int),
        contact_obstacle=np.full(n, -1, dtype=int),
        ground_impulse=np.zeros(3 * n),
        ground_force=np.zeros(n + 2),
        joint_torque_nm=np.zeros(n - 1),
    )


def joint_torques(
    model: PlanarSnakeModel,
    q: np.ndarray,
    qd: np.ndarray,
    angle_ref_rad: np.ndarray,
    rate_ref_rad_s: np.ndarray,
) -> np.ndarray:
    """Joint servo: u = sat(K_p (φ_ref − φ) + K_d (φ̇_ref − φ̇)); Dᵀu then drives φ towards φ_ref."""
    n = model.n_links
    phi = joint_angles(model, q)
    phid = model.D @ qd[:n]
    u = model.joint_kp_nm_rad * (angle_ref_rad - phi) + model.joint_kd_nms_rad * (rate_ref_rad_s - phid)
    return np.clip(u, -model.joint_torque_limit_nm, model.joint_torque_limit_nm)


def _implicit_servo(
    model: PlanarSnakeModel,
    q: np.ndarray,
    qd: np.ndarray,
    angle_ref_rad: np.ndarray,
    rate_ref_rad_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linearly implicit joint servo. Explicit PD is unstable for the chain's zig-zag mode (inertia J only, so
    4 K_d h / J > 2 already at h = 1 ms, K_d = 1). With φ⁺ = φ + h φ̇⁺ and u⁺ = K_p(φ_r − φ⁺) + K_d(φ̇_r − φ̇⁺),
    M (q̇⁺ − q̇) = h (f + Dᵀu⁺) becomes M_eff q̈ = f + Dᵀu' with
    M_eff = M + h (h K_p + K_d) Dᵀ S D  and  u' = u − h K_p φ̇ on the unsaturated joints S (saturated ones keep
    their limit torque). Returns (torque reported, u' for the right-hand side, the stiffness term of M_eff)."""
    n, h = model.n_links, model.time_step_s
    kp, kd, limit = model.joint_kp_nm_rad, model.joint_kd_nms_rad, model.joint_torque_limit_nm
    phi = joint_angles(model, q)
    phid = model.D @ qd[:n]
    u = kp * (angle_ref_rad - phi) + kd * (rate_ref_rad_s - phid)
    free = np.abs(u) < limit
    u_applied = np.clip(u, -limit, limit)
    u_rhs = np.where(free, u - h * kp * phid, u_applied)
    D = model.D
    stiffness = np.zeros((n + 2, n + 2))
    stiffness[:n, :n] = h * (h * kp + kd) * (D.T * free) @ D
    return u_applied, u_rhs, stiffness


def _ground_operator(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    """G (n+2, 3n): generalised force of link CM forces (x, y) and link torques (eq. 12)."""
    n = model.n_links
    Jx, Jy = link_jacobians(model, q)
    G = np.zeros((n + 2, 3 * n))
    G[:, :n] = Jx.T
    G[:, n : 2 * n] = Jy.T
    G[np.arange(n), 2 * n + np.arange(n)] = 1.0
    return G


def _independent_contacts(terms: ContactTerms) -> ContactTerms:
    """Drop duplicate constraints. Two adjacent links touching one obstacle at their shared joint constrain the
    same material point along the same normal, so their rows coincide and C̄ M⁻¹ C̄ᵀ would be singular (the
    paper's CM-based rows never coincide, ours are exact gap gradients). One row represents both."""
    m = terms.links.size
    if m < 2:
        return terms
    keep = np.ones(m, dtype=bool)
    for a in range(m):
        for b in range(a + 1, m):
            if keep[b] and terms.obstacles[a] == terms.obstacles[b]:
                diff = np.linalg.norm(terms.rows[a] - terms.rows[b])
                if diff <= 1e-9 * (1.0 + np.linalg.norm(terms.rows[a])):
                    keep[b] = False
    if keep.all():
        return terms
    return ContactTerms(
        terms.links[keep], terms.obstacles[keep], terms.rows[keep], terms.bias[keep],
        terms.friction_map[:, keep], terms.gaps[keep], terms.side[keep], terms.tangential_velocity[keep],
    )  # fmt: skip


def _flow_contact_force(
    model: PlanarSnakeModel, state: PlanarSnakeState, Minv: np.ndarray, f_u: np.ndarray, active: np.ndarray
) -> np.ndarray:
    """λ from LCP (32) for the contacted links and the generalised contact force (C̄ᵀ − μ_o Λ) λ."""
    stats = state.stats
    terms = _independent_contacts(contact_terms(model, state.q, state.qd, active, state.contact_obstacle[active]))
    B = terms.rows.T - model.obstacle_mu * terms.friction_map
    A = terms.rows @ Minv @ B
    a = terms.rows @ (Minv @ f_u) + terms.bias
    if model.check_p_matrix:
        check = p_matrix_test(A)
        stats.p_matrix_checks += 1
        stats.smallest_principal_minor = min(stats.smallest_principal_minor, check.smallest_minor)
        stats.near_singular_lcp_solves += int(check.smallest_minor < 1e-6)
        if not check.is_p_matrix:
            stats.p_matrix_failures += 1
            log.debug("t=%.4f s: LCP (32) matrix is not a P-matrix (minor %.3g)", state.t_s, check.smallest_minor)
    result = solve_lcp(A, a, "lemke", check_input=False)
    stats.flow_lcp_solves += 1
    stats.flow_lcp_pivots += result.iterations
    if result.status is not LCPStatus.SOLVED:
        raise SimulationError(f"t = {state.t_s:.6f} s: contact LCP (32) {result.status.value}: {result.message}")
    lam = result.z
    stats.max_complementarity_residual = max(stats.max_complementarity_residual, result.residual)
    stats.min_lambda = min(stats.min_lambda, float(lam.min()))
    state.last_lambda = lam
    state.last_lambda_links = terms.links
    return B @ lam, terms.rows


def _impact(
    model: PlanarSnakeModel,
    state: PlanarSnakeState,
    q: np.ndarray,
    qd: np.ndarray,
    Minv: np.ndarray,
    rows: np.ndarray | None = None,
):
    """Impact LCP (36) on all contacted links: v̄⁺ = v̄⁻ + C̄ M⁻¹ C̄ᵀ λ ≥ 0 ⊥ λ ≥ 0; returns q̇⁺ (eq. 37).
    ``rows`` (C̄ at q of the current contacts, duplicates removed) may be passed when already known."""
    if rows is None:
        active = np.flatnonzero(state.alpha)
        rows = _independent_contacts(contact_terms(model, q, qd, active, state.contact_obstacle[active])).rows
    v_minus = rows @ qd
    result = solve_lcp(rows @ Minv @ rows.T, v_minus, "lemke", check_input=False)
    state.stats.impact_lcp_solves += 1
    if result.status is not LCPStatus.SOLVED:  # cannot happen for full-rank C̄ (Proposition 15)
        raise SimulationError(f"t = {state.t_s:.6f} s: impact LCP (36) {result.status.value}: {result.message}")
    qd_plus = qd + Minv @ (rows.T @ result.z)
    v_plus = rows @ qd_plus
    return qd_plus, float(v_plus.min()), complementarity_residual(result.z, v_plus)


def _first_impact(model: PlanarSnakeModel, state: PlanarSnakeState, q0: np.ndarray, v: np.ndarray, span: float):
    """Earliest σ ∈ [0, span] at which a free link touches an obstacle along q(σ) = q0 + σ v, or None.
    Compiled bracketed root finding on each gap that closes within the span (``first_contact``); the
    Brent-method reference is :func:`_first_impact_reference`."""
    return first_contact(model, q0, v, span, state.alpha == 0, _EVENT_XTOL_S)


def _first_impact_reference(model: PlanarSnakeModel, state: PlanarSnakeState, q0: np.ndarray, v: np.ndarray,
                            span: float):  # fmt: skip
    gaps = all_gaps(model, q0 + span * v)
    if gaps.size == 0:
        return None
    gaps[state.alpha != 0, :] = np.inf
    links, obstacles = np.nonzero(gaps <= 0.0)
    if links.size == 0:
        return None
    best = (np.inf, -1, -1)
    for i, j in zip(links, obstacles, strict=True):
        g = lambda sigma, i=i, j=j: float(link_gaps_to(model, q0 + sigma * v, [i], [j])[0])  # noqa: E731
        sigma = 0.0 if g(0.0) <= 0.0 else brentq(g, 0.0, span, xtol=_EVENT_XTOL_S)
        if sigma < best[0]:
            best = (sigma, i, j)
    return best


def _stabilise_positions(model: PlanarSnakeModel, state: PlanarSnakeState, Minv: np.ndarray) -> None:
    active = np.flatnonzero(state.alpha)
    if active.size == 0:
        return
    obstacles = state.contact_obstacle[active]
    gaps = link_gaps_to(model, state.q, active, obstacles)
    state.stats.max_drift_before_projection_m = max(state.stats.max_drift_before_projection_m, float(-gaps.min()))
    for _ in range(3):  # Newton steps on the negative gaps; one is nearly always enough
        neg = gaps < -_PROJECTION_GAP_TOL_M
        if not np.any(neg):
            return
        terms = _independent_contacts(contact_terms(model, state.q, state.qd, active[neg], obstacles[neg]))
        C, targets = terms.rows, -terms.gaps
        # Truncated least squares: two adjacent links touching one obstacle near their joint give nearly
        # coincident rows; an exact solve would amplify the tiny difference of their gaps into a large jump of
        # q (seen: 0.5 mm, enough to push a free link into another obstacle).
        correction, *_ = np.linalg.lstsq(C @ Minv @ C.T, targets, rcond=1e-6)
        state.q = state.q + Minv @ C.T @ correction
        gaps = link_gaps_to(model, state.q, active, obstacles)


@numba.njit(cache=True)
def _inverse_mass_kernel(q, V, l, m, J):  # pragma: no cover - compiled
    """M(q)⁻¹ of eq. 12 (reference: ``np.linalg.inv(mass_matrix(model, q))``)."""
    n = q.size - 2
    M = np.zeros((n + 2, n + 2))
    for a in range(n):
        for b in range(n):
            M[a, b] = m * l * l * V[a, b] * np.cos(q[a] - q[b])
        M[a, a] += J
    M[n, n] = n * m
    M[n + 1, n + 1] = n * m
    return np.linalg.inv(M)


@numba.njit(cache=True)
def _free_dynamics_kernel(q, qd, Nt, V, l, m, J, kp, kd, limit, h, angle_ref, rate_ref):  # pragma: no cover
    """Everything of a step that does not involve contacts, compiled: servo torques (linearly implicit, see
    :func:`_implicit_servo`), M⁻¹ of the effective and of the true mass matrix (eq. 10, 12), the free
    generalised force [Wθ̇² + Dᵀu'; 0; 0] and the ground-friction operator G with M_eff⁻¹G and Gᵀ M_eff⁻¹ G.
    The numpy functions of ``model`` are its reference (compared in the tests)."""
    n = qd.size - 2
    ml2 = m * l * l
    M = np.zeros((n + 2, n + 2))
    f = np.zeros(n + 2)
    for a in range(n):
        for b in range(n):
            M[a, b] = ml2 * V[a, b] * np.cos(q[a] - q[b])
            f[a] += ml2 * V[a, b] * np.sin(q[b] - q[a]) * qd[b] * qd[b]
        M[a, a] += J
    M[n, n] = n * m
    M[n + 1, n + 1] = n * m
    Minv = np.linalg.inv(M)
    u = np.empty(n - 1)
    stiff = h * (h * kp + kd)
    for i in range(n - 1):
        phi = q[i] - q[i + 1]
        phid = qd[i] - qd[i + 1]
        ui = kp * (angle_ref[i] - phi) + kd * (rate_ref[i] - phid)
        if abs(ui) < limit:
            u_rhs = ui - h * kp * phid
            u[i] = ui
            M[i, i] += stiff
            M[i + 1, i + 1] += stiff
            M[i, i + 1] -= stiff
            M[i + 1, i] -= stiff
        else:
            u_rhs = limit if ui > 0 else -limit
            u[i] = u_rhs
        f[i] += u_rhs
        f[i + 1] -= u_rhs
    Minv_eff = np.linalg.inv(M)
    G = np.zeros((n + 2, 3 * n))
    for i in range(n):
        for k in range(n):
            G[k, i] = l * Nt[i, k] * np.sin(q[k])
            G[k, n + i] = -l * Nt[i, k] * np.cos(q[k])
        G[n, i] = 1.0
        G[n + 1, n + i] = 1.0
        G[i, 2 * n + i] = 1.0
    MinvG = Minv_eff @ G
    H = G.T @ MinvG
    return u, Minv_eff, Minv, f, G, MinvG, H


def step(
    model: PlanarSnakeModel, state: PlanarSnakeState, angle_ref_rad: np.ndarray, rate_ref_rad_s: np.ndarray
) -> None:
    """Advance ``state`` by one time step with the joint servos tracking the given references (held)."""
    n, h = model.n_links, model.time_step_s
    stats = state.stats
    q, qd = state.q, state.qd
    # Minv: effective mass of the linearly implicit step; Minv_impact: the true M, since impacts are impulsive
    # and servo forces stay finite
    u, Minv, Minv_impact, f_free, G, MinvG, H = _free_dynamics_kernel(
        q, qd, model._Nt, model.V, model.link_half_length_m, model.link_mass_kg, model.link_inertia_kgm2,  # type: ignore[attr-defined]
        model.joint_kp_nm_rad, model.joint_kd_nms_rad, model.joint_torque_limit_nm, h,
        np.asarray(angle_ref_rad, dtype=float), np.asarray(rate_ref_rad_s, dtype=float),
    )  # fmt: skip
    state.joint_torque_nm = u
    active = np.flatnonzero(state.alpha)
    f_contact = np.zeros(n + 2)
    rows = None
    if active.size:
        stats.max_contacts = max(stats.max_contacts, int(active.size))
        f_contact, rows = _flow_contact_force(model, state, Minv, f_free + state.ground_force, active)
    else:
        state.last_lambda = np.zeros(0)
        state.last_lambda_links = np.zeros(0, dtype=int)
    qd_free = qd + h * (Minv @ (f_free + f_contact))

    # implicit set-valued ground friction
    force_limit, torque_limit = model._ground_impulse_limits  # type: ignore[attr-defined]
    P, sweeps = solve_ground_friction(H, G.T @ qd_free, state.ground_impulse, force_limit, torque_limit)
    stats.ground_friction_sweeps += sweeps
    state.ground_impulse = P
    state.ground_force = G @ P / h
    v = qd_free + MinvG @ P

    if rows is not None:  # the constraint rows depend on q only: those of the flow LCP
        if np.min(rows @ v) < -_PROJECTION_TOL_M_S:
            v, _, _ = _impact(model, state, q, v, Minv_impact, rows)
            stats.velocity_projections += 1

    # position update with event location (impacts of free links)
    q_start, remaining = q, h
    while True:
        event = _first_impact(model, state, q_start, v, remaining)
        if event is None:
            q_start = q_start + remaining * v
            break
        sigma, i, j = event
        q_start = q_start + sigma * v
        remaining -= sigma
        state.q = q_start
        terms_new = contact_terms(model, q_start, v, np.array([i]), np.array([j]))
        if float(terms_new.rows[0] @ v) < 0.0:  # jump set (39): α̃(i) C_i q̇ < 0
            state.alpha[i] = int(terms_new.side[0])
            state.contact_obstacle[i] = j
            Minv_e = _inverse_mass_kernel(q_start, model.V, model.link_half_length_m, model.link_mass_kg,
                                          model.link_inertia_kgm2)  # fmt: skip
            v, v_min, _ = _impact(model, state, q_start, v, Minv_e)
            stats.impacts += 1
            stats.min_post_impact_normal_velocity_m_s = min(stats.min_post_impact_normal_velocity_m_s, v_min)
        else:  # grazing touch with separating velocity: becomes a contact without a velocity jump
            state.alpha[i] = int(terms_new.side[0])
            state.contact_obstacle[i] = j
        if remaining <= 0.0:
            break
    state.q, state.qd = q_start, v
    state.t_s += h
    stats.steps += 1

    # detachment (40)
    active = np.flatnonzero(state.alpha)
    if active.size:
        gaps = link_gaps_to(model, state.q, active, state.contact_obstacle[active])
        gone = active[gaps > model.detach_gap_m]
        if gone.size:
            state.alpha[gone] = 0
            state.contact_obstacle[gone] = -1
            stats.detachments += int(gone.size)
        _stabilise_positions(model, state, Minv_impact)
    if model.obstacle_radii_m.size:
        state.stats.max_penetration_m = max(state.stats.max_penetration_m, float(-all_gaps(model, state.q).min()))
