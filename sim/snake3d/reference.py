"""Plain-numpy reference step: the paper's time-stepping (Sec. VII) written with the full W matrices.

One step of length Δt:
1. midpoint q_M = q_A + Δt/2 F(q_A) u_A (eq. 72; the erratum evaluates F at q_A), quaternions renormalised;
2. active contacts I = {a | g_N,a(q_M) ≤ 0} (eq. 49, evaluated at the midpoint);
3. W_ΞM = W_Ξ(q_M), h_M = h(q_M, u_A), τ_C from the joint torques at q_M;
4. the prox iteration (eq. 84–93): the joint impulses P_J are solved directly from W_JMᵀ u_E = 0 each time the
   contact impulses change (eq. 84 corrected as in the notes), u_E from eq. 86, then each active contact's
   P_N, P_T, P_V are updated by eq. 87–89. We sweep contacts Gauss–Seidel (each update sees the velocity produced by
   the previous ones) instead of the paper's Jacobi sweep: same fixed point, faster and more robust convergence.
   Sweeps stop on eq. 93 or on a small velocity change (see :class:`SnakeModel`), and the step is accepted only if
   the contact laws then hold to ``residual_tolerance_m_s``; otherwise r is halved and the step retried, then it
   raises with the time and the links of the worst contacts;
5. q_E = q_M + Δt/2 F(q_M) u_E (eq. 83), then the projection of Sec. VII-C (quaternion norms, joint gaps).

Friction on the ellipse C_T (eq. 58) uses a diagonal prox parameter R_T = c·diag(μ_x², μ_y²). The prox of eq. 61
holds for any positive definite R when the projection is taken in the R⁻¹ metric, and in that metric the projection
onto the ellipse is a radial scaling, so the anisotropic law stays exact without a root-finding projection.

This module is slow on purpose (clarity first); :mod:`sim.snake3d.fast` is the numba path the simulator uses, and
the tests require both to give the same step to ~1e-12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from sim.snake3d import kinematics as kin
from sim.snake3d.constraints import normalize_quaternions, project_joint_constraints
from sim.snake3d.model import CONTRACTING, ContactNotConvergedError, SnakeModel, SnakeState
from sim.snake3d.rotations import quat_rate


@dataclass(frozen=True)
class StepInfo:
    iterations: int
    retries: int
    active_contacts: np.ndarray  # indices a of the active contacts
    impulses: np.ndarray  # (n_all_contacts, 4) impulses [N, T1, T2, V] of this step (N s), 0 for open contacts
    joint_impulses: np.ndarray  # (n−1, 4) P_J of eq. 84


def pack_velocity(state: SnakeState) -> np.ndarray:
    return np.hstack([state.velocity_m_s, state.omega_body_rad_s]).reshape(-1)


def _max_eig_2x2(A: np.ndarray) -> float:
    half_trace = 0.5 * (A[0, 0] + A[1, 1])
    det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    return half_trace + math.sqrt(max(half_trace * half_trace - det, 0.0))


def prox_parameters(model: SnakeModel, A_block: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray, float]:
    """r_N, R_T (2,), r_V for one contact from its 4×4 Delassus block (local mode) or the paper's constants.

    ``mu`` = [μ_1, μ_2, μ_V] of the contact (its friction ellipse semi-axes per unit normal impulse)."""
    mu2 = mu[:2] ** 2
    if model.prox_mode == "paper":
        return model.r_n, model.r_t * mu2 / (mu[0] * mu[1]), model.r_v
    r_n = model.prox_scale_n / A_block[0, 0]
    c = model.prox_scale_t / _max_eig_2x2(A_block[1:3, 1:3] * np.outer(mu[:2], mu[:2]))
    r_v = model.prox_scale_v / A_block[3, 3] if A_block[3, 3] > 0 else 0.0  # obstacles have no rolling row
    return r_n, c * mu2, r_v


def prox_ellipse(y: np.ndarray, ax: float, ay: float) -> np.ndarray:
    """Projection onto {x²/ax² + y²/ay² ≤ 1} in the metric diag(ax², ay²)⁻¹ (a radial scaling); 0 if ax = 0."""
    if ax <= 0.0 or ay <= 0.0:
        return np.zeros(2)
    s = math.sqrt((y[0] / ax) ** 2 + (y[1] / ay) ** 2)
    return y / s if s > 1.0 else y.copy()


INNER_TOLERANCE_FACTOR = 1e-2


def solve_contact(
    model: SnakeModel,
    gamma0: np.ndarray,
    A_block: np.ndarray,
    P0: np.ndarray,
    params: tuple[float, np.ndarray, float],
    mu: np.ndarray,
    scale: float,
) -> np.ndarray:
    """Eq. 87–89 for one contact, iterated on its own 4×4 Delassus block until it settles.

    The tangential and rolling laws of one contact are strongly coupled (a rolling cylinder moves its contact
    point), which makes a single prox pass per outer sweep converge very slowly; iterating the contact's local
    problem with γ = γ0 + A_aa (P − P0) first is the block Gauss–Seidel of the same fixed point."""
    r_n, R_t, r_v = params
    mux, muy, muv = mu
    P = P0.copy()
    for _ in range(model.contact_inner_iterations):
        before = P.copy()
        gamma = gamma0 + A_block @ (P - P0)
        P[0] = max(0.0, P[0] - scale * r_n * gamma[0])  # eq. 87
        gamma = gamma0 + A_block @ (P - P0)
        P[1:3] = prox_ellipse(P[1:3] - scale * R_t * gamma[1:3], mux * P[0], muy * P[0])  # eq. 88
        gamma = gamma0 + A_block @ (P - P0)
        P[3] = min(muv * P[0], max(-muv * P[0], P[3] - scale * r_v * gamma[3]))  # eq. 89
        if np.sum(np.abs(P - before)) < INNER_TOLERANCE_FACTOR * model.tolerance:
            break
    return P


def contact_residual(
    WC: np.ndarray, u: np.ndarray, P: np.ndarray, params: list[tuple[float, np.ndarray, float]], mus: np.ndarray
) -> float:
    """Violation of eq. 87–89 in m/s at the impulses P: max over contacts of ‖P − prox(P − rγ)‖ / r."""
    residual = 0.0
    for k, ((r_n, R_t, r_v), mu) in enumerate(zip(params, mus, strict=True)):
        Pk = P[4 * k : 4 * k + 4]
        gamma = WC[:, 4 * k : 4 * k + 4].T @ u
        res = abs(max(0.0, Pk[0] - r_n * gamma[0]) - Pk[0]) / r_n
        t = prox_ellipse(Pk[1:3] - R_t * gamma[1:3], mu[0] * Pk[0], mu[1] * Pk[0])
        res = max(res, float(np.linalg.norm((t - Pk[1:3]) / R_t)))
        if r_v > 0.0:
            bound = mu[2] * Pk[0]
            res = max(res, abs(min(bound, max(-bound, Pk[3] - r_v * gamma[3])) - Pk[3]) / r_v)
        residual = max(residual, res)
    return residual


def midpoint(model: SnakeModel, state: SnakeState) -> tuple[np.ndarray, np.ndarray]:
    half = 0.5 * model.dt_s
    pos = state.position_m + half * state.velocity_m_s
    quat = np.array([p + half * quat_rate(p, w) for p, w in zip(state.quaternion, state.omega_body_rad_s, strict=True)])
    normalize_quaternions(quat)
    return pos, quat


def pd_torques(
    model: SnakeModel,
    quat: np.ndarray,
    omega_body: np.ndarray,
    ref_angle: np.ndarray,
    ref_rate: np.ndarray,
    gains: np.ndarray,
    feedforward_nm: np.ndarray,
) -> np.ndarray:
    """Joint torques (n−1, 2): feed-forward + K_p(α_r − α) + K_d(α̇_r − α̇) (eq. 68–69 with the sign fixed).

    ``gains`` = [K_hp, K_hd, K_vp, K_vd]; zero gains give pure external torques (HIL). With
    ``model.joint_pd == "implicit"`` this is only the explicit part of the trapezoidal PD law (see
    :func:`implicit_pd_damping`): α ≈ α_M + Δt/4 (α̇_E − α̇_A) and α̇ ≈ (α̇_A + α̇_E)/2, without the α̇_E terms."""
    angle = kin.joint_angles(quat)
    rate = kin.joint_rates(quat, omega_body)
    tau = feedforward_nm.copy()
    if model.joint_pd == "implicit":
        q = 0.25 * model.dt_s
        tau[:, 0] += gains[0] * (ref_angle[:, 0] - angle[:, 0] + q * rate[:, 0]) + gains[1] * (
            ref_rate[:, 0] - 0.5 * rate[:, 0]
        )
        tau[:, 1] += gains[2] * (ref_angle[:, 1] - angle[:, 1] + q * rate[:, 1]) + gains[3] * (
            ref_rate[:, 1] - 0.5 * rate[:, 1]
        )
        return tau
    tau[:, 0] += gains[0] * (ref_angle[:, 0] - angle[:, 0]) + gains[1] * (ref_rate[:, 0] - rate[:, 0])
    tau[:, 1] += gains[2] * (ref_angle[:, 1] - angle[:, 1]) + gains[3] * (ref_rate[:, 1] - rate[:, 1])
    return tau


def implicit_pd_damping(model: SnakeModel, quat: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """The α̇_E terms of the trapezoidal PD law as a matrix added to M (6n × 6n): Δt Σ_j c_j d_j d_jᵀ with d_jᵀ u = α̇_j
    (the joint rate of :func:`kinematics.joint_rates`) and c = Δt/4 K_p + K_d/2 per axis. Zero for "explicit"."""
    n = quat.shape[0]
    D = np.zeros((6 * n, 6 * n))
    if model.joint_pd != "implicit":
        return D
    R = kin.rotation_matrices(quat)
    dt = model.dt_s
    for j in range(n - 1):
        for axis, (kp, kd) in enumerate(((gains[0], gains[1]), (gains[2], gains[3]))):
            e = R[j, :, 1] if axis == 0 else R[j + 1, :, 0]
            d = np.zeros(6 * n)
            d[6 * j + 3 : 6 * j + 6] = -R[j].T @ e
            d[6 * j + 9 : 6 * j + 12] = R[j + 1].T @ e
            D += dt * (0.25 * dt * kp + 0.5 * kd) * np.outer(d, d)
    return D


def reference_step(
    model: SnakeModel,
    state: SnakeState,
    ref_angle: np.ndarray,
    ref_rate: np.ndarray,
    gains: np.ndarray,
    feedforward_nm: np.ndarray,
) -> StepInfo:
    """Advance ``state`` in place by one step; raise :class:`ContactNotConvergedError` (state untouched) if the
    iteration fails."""
    dt = model.dt_s
    n = model.n_links
    pos_M, quat_M = midpoint(model, state)
    u_A = pack_velocity(state)
    gaps, links, dirs, mus = kin.all_contacts(model, pos_M, quat_M)
    active = np.flatnonzero(gaps <= 0.0)

    mass = model.mass_diagonal()
    WJ = kin.W_joint(model, pos_M, quat_M)
    h = kin.smooth_forces(model, state.omega_body_rad_s)
    tau_joint = pd_torques(model, quat_M, state.omega_body_rad_s, ref_angle, ref_rate, gains, feedforward_nm)
    tau_C = kin.joint_torque_forces(quat_M, tau_joint)
    f = (h + tau_C) * dt
    # M' = M + the implicit PD terms (dense then; M itself when the PD law is explicit), and its inverse
    damping = implicit_pd_damping(model, quat_M, gains)
    M_eff = np.diag(mass) + damping
    Minv_eff = np.linalg.inv(M_eff) if np.any(damping) else np.diag(1.0 / mass)
    b0 = mass * u_A + f  # M u_A + (h + τ_C) Δt
    G = scipy.linalg.cho_factor(WJ.T @ Minv_eff @ WJ)

    def joint_impulses(S: np.ndarray) -> np.ndarray:
        # eq. 84 corrected: P_J = −(W_Jᵀ M⁻¹ W_J)⁻¹ W_Jᵀ M⁻¹ (M u_A + h Δt + S + τ_C Δt)  (M → M')
        return -scipy.linalg.cho_solve(G, WJ.T @ (Minv_eff @ (b0 + S)))

    def velocity(S: np.ndarray) -> np.ndarray:
        return Minv_eff @ (b0 + S + WJ @ joint_impulses(S))  # eq. 86

    m = len(active)
    WC = np.zeros((6 * n, 4 * m))
    for k, a in enumerate(active):
        link = links[a]
        WC[6 * link : 6 * link + 6, 4 * k : 4 * k + 4] = dirs[a].T
    # Delassus matrix with the joints eliminated, used only for the local prox parameters
    mob_WC = Minv_eff @ WC
    mob_WC -= Minv_eff @ (WJ @ scipy.linalg.cho_solve(G, WJ.T @ mob_WC))
    A = WC.T @ mob_WC
    blocks = [A[4 * k : 4 * k + 4, 4 * k : 4 * k + 4] for k in range(m)]
    params = [prox_parameters(model, block, mus[a]) for block, a in zip(blocks, active, strict=True)]

    scale = 1.0
    iterations = 0
    reductions = 0
    restart = True
    for _attempt in range(model.max_retries + 1):  # same schedule as fast.step (see model.CONTRACTING)
        if restart:
            P = np.array([state.impulse_cache[a] for a in active]).reshape(-1)
        converged = False
        change = np.zeros(m)
        residual_mid = math.inf
        for sweep in range(model.max_iterations):
            iterations += 1
            u_before = velocity(WC @ P)
            sq = np.zeros(3)
            for k in range(m):
                old = P[4 * k : 4 * k + 4].copy()
                gamma0 = WC[:, 4 * k : 4 * k + 4].T @ velocity(WC @ P)
                P[4 * k : 4 * k + 4] = solve_contact(model, gamma0, blocks[k], old, params[k], mus[active[k]], scale)
                d = P[4 * k : 4 * k + 4] - old
                sq += [d[0] ** 2, d[1] ** 2 + d[2] ** 2, d[3] ** 2]
                change[k] = np.linalg.norm(d)
            err = math.sqrt(sq[0]) + math.sqrt(sq[1]) + math.sqrt(sq[2])
            if not np.all(np.isfinite(P)):
                break
            du = velocity(WC @ P) - u_before
            kinetic_norm = math.sqrt(du @ (M_eff @ du) / (model.n_links * model.link_mass_kg))
            if sweep == model.max_iterations // 2:
                residual_mid = contact_residual(WC, velocity(WC @ P), P, params, mus[active])
            if (
                err < model.tolerance  # eq. 93
                or kinetic_norm < model.velocity_tolerance_m_s
            ) and contact_residual(WC, velocity(WC @ P), P, params, mus[active]) <= model.residual_tolerance_m_s:
                converged = True
                break
        if converged:
            break
        finite = np.all(np.isfinite(P))
        residual = contact_residual(WC, velocity(WC @ P), P, params, mus[active]) if finite else math.inf
        restart = not (math.isfinite(residual) and residual < CONTRACTING * residual_mid)
        if restart:
            scale *= 0.5
            reductions += 1
    else:
        worst = active[np.argsort(change)[::-1][:3]] if m else np.array([], dtype=int)
        bad_links = tuple(sorted({int(links[a]) + 1 for a in worst}))
        raise ContactNotConvergedError(
            f"snake3d: contact iteration did not converge at t = {state.t_s:.6f} s after {iterations} sweeps "
            f"and {reductions} reductions of r; contacts {worst.tolist()} on links {list(bad_links)}",
            state.t_s,
            bad_links,
            sweeps=iterations,
            reductions=reductions,
        )

    S = WC @ P
    u_E = velocity(S)
    P_J = joint_impulses(S)
    impulses = np.zeros((model.n_all_contacts, 4))
    for k, a in enumerate(active):
        impulses[a] = P[4 * k : 4 * k + 4]
        state.impulse_cache[a] = impulses[a]

    u = u_E.reshape(n, 6)
    state.velocity_m_s[:] = u[:, :3]
    state.omega_body_rad_s[:] = u[:, 3:]
    half = 0.5 * dt
    state.position_m[:] = pos_M + half * state.velocity_m_s
    state.quaternion[:] = np.array(
        [p + half * quat_rate(p, w) for p, w in zip(quat_M, state.omega_body_rad_s, strict=True)]
    )
    project_joint_constraints(state.position_m, state.quaternion, model.link_length_m)
    state.t_s += dt
    state.check_finite()
    return StepInfo(iterations, reductions, active, impulses, P_J.reshape(n - 1, 4))
