"""The numba step: the reference step of :mod:`sim.snake3d.reference` in a faster but equivalent form.

`step` runs the reference's phases as one function each, in order: the midpoint (`_midpoint`), the joint torques
(`_joint_torques`), the joints' null space (`_null_space`), the reduced system and its factor (`_reduced_factor`), the
active contacts and their rows (`_active_contacts`, `_contact_rows`), the prox iteration (`_prox_iteration`) and the
end-of-step state (`_finish`); `step` itself only lays out their work arrays in two buffers.

Instead of solving for the joint impulses P_J each time the contact impulses change (eq. 84), the joint constraints
are eliminated once per step: the admissible velocities W_JMᵀ u = 0 are spanned by the 6 + 2(n−1) columns of N
(link 1's twist and the joint rates, propagated down the chain with exactly the kinematics W_J encodes), and
u_E = N z with (Nᵀ M N) z = Nᵀ (M u_A + h Δt + τ_C Δt + S). This is the same M-orthogonal projection that eq. 84/86
perform, so the iterates of the prox iteration are identical up to rounding. With Nᵀ M N = U Uᵀ and ẑ = Uᵀ z each
contact row becomes Ŷ = W_aᵀ N U⁻ᵀ and a contact update costs O(n) instead of a joint solve.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.snake3d.constraints import project_joint_constraints
from sim.snake3d.contact_kernels import _active_contacts, _contact_rows, _prox_iteration
from sim.snake3d.parameters import (
    P_DT,
    P_GX,
    P_GY,
    P_GZ,
    P_HALVINGS,
    P_L,
    P_M,
    P_PDIMPLICIT,
    P_TH1,
    P_TH3,
    STATUS_NOT_CONVERGED,
    STATUS_NOT_FINITE,
    STATUS_OK,
)
from sim.snake3d.rotations import quat_to_matrix_into


@njit(cache=True)
def _quat_rate_into(p, omega_body, out):
    """rotations.quat_rate written into ``out`` (same formulas, no allocation)."""
    w, x, y, z = p[0], p[1], p[2], p[3]
    ox, oy, oz = omega_body[0], omega_body[1], omega_body[2]
    out[0] = 0.5 * (-x * ox - y * oy - z * oz)
    out[1] = 0.5 * (w * ox + y * oz - z * oy)
    out[2] = 0.5 * (w * oy + z * ox - x * oz)
    out[3] = 0.5 * (w * oz + x * oy - y * ox)


@njit(cache=True)
def reduced_system_dense(R, omg, vel, torque_body, Nv, Nw, mass, theta, grav, dt, half_L, Mr, rhs):
    """Mr = Jᵀ J and rhs = Jᵀ f with J = M^½ N as a dense product (BLAS): the plain form of :func:`reduced_system`,
    O(n³); kept for the tests, which check the two agree."""
    n = R.shape[0]
    nz = Mr.shape[0]
    J = np.zeros((6 * n, nz))
    f = np.empty(6 * n)
    sqrt_m = math.sqrt(mass)
    sqrt_theta = np.sqrt(theta)
    gyro = np.empty(3)
    tw = np.empty(3)
    for i in range(n):
        width = min(nz, 6 + 2 * i)
        w0, w1, w2 = omg[i, 0], omg[i, 1], omg[i, 2]
        t0, t1, t2 = theta[0] * w0, theta[1] * w1, theta[2] * w2
        gyro[0] = -(w1 * t2 - w2 * t1)
        gyro[1] = -(w2 * t0 - w0 * t2)
        gyro[2] = -(w0 * t1 - w1 * t0)
        tw[0], tw[1], tw[2] = t0, t1, t2
        for k in range(3):
            f[6 * i + k] = (mass * vel[i, k] + dt * mass * grav[k]) / sqrt_m
            f[6 * i + 3 + k] = (tw[k] + dt * (gyro[k] + torque_body[i, k])) / sqrt_theta[k]
        for c in range(width):
            for k in range(3):
                J[6 * i + k, c] = sqrt_m * Nv[i, k, c]
                # body-frame angular velocity row k: (R_iᵀ Nw)_k
                J[6 * i + 3 + k, c] = sqrt_theta[k] * (
                    R[i, 0, k] * Nw[i, 0, c] + R[i, 1, k] * Nw[i, 1, c] + R[i, 2, k] * Nw[i, 2, c]
                )
    Jt = np.ascontiguousarray(J.T)
    Mr[:, :] = Jt @ J
    rhs[:] = Jt @ f


@njit(cache=True)
def reduced_system(R, omg, vel, torque_body, Nv, Nw, mass, theta, grav, dt, half_L, Mr, rhs):
    """Mr = Nᵀ M N (its lower triangle) and rhs = Nᵀ (M u_A + Δt (h + τ_C)) in O(n²) by composite rigid bodies
    (Featherstone's CRBA).

    Coordinate c enters the chain at link k(c) (k = 0 for link 1's twist, k = j + 1 for joint j's two rates) and
    moves links k.. n−1 rigidly with the twist (ω_c, v_c at the point o_k), o_k = p_k − h_k the rear end of link k
    (h_k = L/2 e_z of link k). With the links k.. n−1 lumped about o_k (mass m_S, first moment h_S, inertia K_S, a
    backward recursion), Mr[c', c] = v_c'(o_k)·(m_S v_c + ω_c × h_S) + ω_c'·(K_S ω_c + h_S × v_c) for c' ≤ c.
    The dense product Jᵀ J (:func:`reduced_system_dense`) costs 6n·nz² multiply-adds (45 000 for n = 11), this
    ~2 000; every shift in the recursion is by one link length, so nothing large cancels."""
    n = R.shape[0]
    nz = Mr.shape[0]
    # composite bodies about o_k, from the tail: m_S (scalar), h_S = Σ m (p_i − o_k), K_S = Σ I_i + m [p_i − o_k]ᵀ[...]
    mS = np.empty(n)
    hS = np.empty((n, 3))
    KS = np.empty((n, 3, 3))
    hk = np.empty((n, 3))
    for k in range(n):
        for a in range(3):
            hk[k, a] = half_L * R[k, a, 2]
    for k in range(n - 1, -1, -1):
        # link k alone about its rear end: offset h_k; world inertia R Θ Rᵀ + m (|h|² E − h hᵀ)
        h0, h1, h2 = hk[k, 0], hk[k, 1], hk[k, 2]
        hh = h0 * h0 + h1 * h1 + h2 * h2
        for a in range(3):
            for b in range(3):
                KS[k, a, b] = (
                    R[k, a, 0] * theta[0] * R[k, b, 0] + R[k, a, 1] * theta[1] * R[k, b, 1]
                    + R[k, a, 2] * theta[2] * R[k, b, 2] - mass * hk[k, a] * hk[k, b]
                )  # fmt: skip
            KS[k, a, a] += mass * hh
            hS[k, a] = mass * hk[k, a]
        mS[k] = mass
        if k + 1 < n:
            # links k+1.. about o_{k+1} = o_k + d, d = 2 h_k: shift by d and add
            d0, d1, d2 = 2.0 * h0, 2.0 * h1, 2.0 * h2
            dd = d0 * d0 + d1 * d1 + d2 * d2
            g0, g1, g2 = hS[k + 1, 0], hS[k + 1, 1], hS[k + 1, 2]
            ms = mS[k + 1]
            gd = g0 * d0 + g1 * d1 + g2 * d2
            d = (d0, d1, d2)
            g = (g0, g1, g2)
            for a in range(3):
                for b in range(3):
                    KS[k, a, b] += KS[k + 1, a, b] - g[a] * d[b] - d[a] * g[b] - ms * d[a] * d[b]
                KS[k, a, a] += 2.0 * gd + ms * dd
                hS[k, a] += g[a] + ms * d[a]
            mS[k] += ms
    # the velocity of o_k under each coordinate c < width_k: V = Nv_k − Nw_k × h_k (zero for the joint's own rates)
    V = np.empty((3, nz))
    f = np.empty(3)
    t = np.empty(3)
    for k in range(n):
        width = min(nz, 6 + 2 * k)
        first = 0 if k == 0 else width - 2
        h0, h1, h2 = hk[k, 0], hk[k, 1], hk[k, 2]
        for c in range(width):
            w0, w1, w2 = Nw[k, 0, c], Nw[k, 1, c], Nw[k, 2, c]
            V[0, c] = Nv[k, 0, c] - (w1 * h2 - w2 * h1)
            V[1, c] = Nv[k, 1, c] - (w2 * h0 - w0 * h2)
            V[2, c] = Nv[k, 2, c] - (w0 * h1 - w1 * h0)
        ms = mS[k]
        g0, g1, g2 = hS[k, 0], hS[k, 1], hS[k, 2]
        for c in range(first, width):
            v0, v1, v2 = V[0, c], V[1, c], V[2, c]
            w0, w1, w2 = Nw[k, 0, c], Nw[k, 1, c], Nw[k, 2, c]
            f[0] = ms * v0 + (w1 * g2 - w2 * g1)
            f[1] = ms * v1 + (w2 * g0 - w0 * g2)
            f[2] = ms * v2 + (w0 * g1 - w1 * g0)
            for a in range(3):
                t[a] = KS[k, a, 0] * w0 + KS[k, a, 1] * w1 + KS[k, a, 2] * w2
            t[0] += g1 * v2 - g2 * v1
            t[1] += g2 * v0 - g0 * v2
            t[2] += g0 * v1 - g1 * v0
            for c1 in range(c + 1):
                value = (
                    V[0, c1] * f[0] + V[1, c1] * f[1] + V[2, c1] * f[2]
                    + Nw[k, 0, c1] * t[0] + Nw[k, 1, c1] * t[1] + Nw[k, 2, c1] * t[2]
                )  # fmt: skip
                Mr[c, c1] = value  # lower triangle only: the Cholesky reads no other (a mirrored store is strided)
    # rhs[c] = Σ_{i ≥ k(c)} Nv_i[:, c]·(m v_i + Δt m g) + Nw_i[:, c]·R_i (Θ ω_i + Δt (gyro + τ_i))
    for c in range(nz):
        rhs[c] = 0.0
    for i in range(n):
        width = min(nz, 6 + 2 * i)
        w0, w1, w2 = omg[i, 0], omg[i, 1], omg[i, 2]
        t0, t1, t2 = theta[0] * w0, theta[1] * w1, theta[2] * w2
        b0 = t0 + dt * (-(w1 * t2 - w2 * t1) + torque_body[i, 0])
        b1 = t1 + dt * (-(w2 * t0 - w0 * t2) + torque_body[i, 1])
        b2 = t2 + dt * (-(w0 * t1 - w1 * t0) + torque_body[i, 2])
        F0 = mass * vel[i, 0] + dt * mass * grav[0]
        F1 = mass * vel[i, 1] + dt * mass * grav[1]
        F2 = mass * vel[i, 2] + dt * mass * grav[2]
        T0 = R[i, 0, 0] * b0 + R[i, 0, 1] * b1 + R[i, 0, 2] * b2
        T1 = R[i, 1, 0] * b0 + R[i, 1, 1] * b1 + R[i, 1, 2] * b2
        T2 = R[i, 2, 0] * b0 + R[i, 2, 1] * b1 + R[i, 2, 2] * b2
        for c in range(width):
            rhs[c] += (
                Nv[i, 0, c] * F0 + Nv[i, 1, c] * F1 + Nv[i, 2, c] * F2
                + Nw[i, 0, c] * T0 + Nw[i, 1, c] * T1 + Nw[i, 2, c] * T2
            )  # fmt: skip


@njit(cache=True)
def _midpoint(pos, quat, vel, omg, dt, posM, quatM, R, dq):
    """Step 1: the midpoint configuration (eq. 72 with F(q_A)), its rotation matrices in R."""
    n = pos.shape[0]
    # 1. midpoint (eq. 72 with F(q_A))
    for i in range(n):
        _quat_rate_into(quat[i], omg[i], dq)
        s = 0.0
        for k in range(4):
            quatM[i, k] = quat[i, k] + 0.5 * dt * dq[k]
            s += quatM[i, k] ** 2
        s = math.sqrt(s)
        for k in range(4):
            quatM[i, k] /= s
        for k in range(3):
            posM[i, k] = pos[i, k] + 0.5 * dt * vel[i, k]
        quat_to_matrix_into(quatM[i], R[i])


@njit(cache=True)
def _joint_torques(R, omg, ref_angle, ref_rate, gains, feedforward, dt, pd_implicit, torque_body, joint_damping):
    """Step 2: the joints' PD torques (with the fixed sign) and feed-forward, as body torques per link; with the
    implicit PD, the damping each joint adds to the reduced mass matrix (`joint_damping`)."""
    nj = R.shape[0] - 1
    # 2. joint torques (PD with the fixed sign + feed-forward), as body torques per link
    torque_body[:, :] = 0.0
    for j in range(nj):
        # (R_jᵀ R_{j+1}) entries [2,0], [2,1], [2,2]: row 2 of R_jᵀ is column 2 of R_j
        rel20 = R[j, 0, 2] * R[j + 1, 0, 0] + R[j, 1, 2] * R[j + 1, 1, 0] + R[j, 2, 2] * R[j + 1, 2, 0]
        rel21 = R[j, 0, 2] * R[j + 1, 0, 1] + R[j, 1, 2] * R[j + 1, 1, 1] + R[j, 2, 2] * R[j + 1, 2, 1]
        rel22 = R[j, 0, 2] * R[j + 1, 0, 2] + R[j, 1, 2] * R[j + 1, 1, 2] + R[j, 2, 2] * R[j + 1, 2, 2]
        ah = -math.asin(min(1.0, max(-1.0, rel20)))
        av = math.atan2(rel21, rel22)
        # relative angular velocity R_{j+1} ω_{j+1} − R_j ω_j, then its components on the joint axes a, b
        rate_h = 0.0
        rate_v = 0.0
        for k in range(3):
            w_next = R[j + 1, k, 0] * omg[j + 1, 0] + R[j + 1, k, 1] * omg[j + 1, 1] + R[j + 1, k, 2] * omg[j + 1, 2]
            w_rel = w_next - (R[j, k, 0] * omg[j, 0] + R[j, k, 1] * omg[j, 1] + R[j, k, 2] * omg[j, 2])
            rate_h += w_rel * R[j, k, 1]
            rate_v += w_rel * R[j + 1, k, 0]
        if pd_implicit:
            # trapezoidal (Crank–Nicolson) PD: α ≈ α_M + Δt/4 (α̇_E − α̇_A), α̇ ≈ (α̇_A + α̇_E)/2; the α̇_E parts go
            # into the reduced mass matrix below (joint_damping), the rest is this explicit torque
            tau_h = (
                feedforward[j, 0] + gains[0] * (ref_angle[j, 0] - ah + 0.25 * dt * rate_h)
                + gains[1] * (ref_rate[j, 0] - 0.5 * rate_h)
            )  # fmt: skip
            tau_v = (
                feedforward[j, 1] + gains[2] * (ref_angle[j, 1] - av + 0.25 * dt * rate_v)
                + gains[3] * (ref_rate[j, 1] - 0.5 * rate_v)
            )  # fmt: skip
            joint_damping[j, 0] = dt * (0.25 * dt * gains[0] + 0.5 * gains[1])
            joint_damping[j, 1] = dt * (0.25 * dt * gains[2] + 0.5 * gains[3])
        else:
            tau_h = feedforward[j, 0] + gains[0] * (ref_angle[j, 0] - ah) + gains[1] * (ref_rate[j, 0] - rate_h)
            tau_v = feedforward[j, 1] + gains[2] * (ref_angle[j, 1] - av) + gains[3] * (ref_rate[j, 1] - rate_v)
        T0 = tau_h * R[j, 0, 1] + tau_v * R[j + 1, 0, 0]
        T1 = tau_h * R[j, 1, 1] + tau_v * R[j + 1, 1, 0]
        T2 = tau_h * R[j, 2, 1] + tau_v * R[j + 1, 2, 0]
        for k in range(3):
            torque_body[j, k] -= R[j, 0, k] * T0 + R[j, 1, k] * T1 + R[j, 2, k] * T2
            torque_body[j + 1, k] += R[j + 1, 0, k] * T0 + R[j + 1, 1, k] * T1 + R[j + 1, 2, k] * T2


@njit(cache=True)
def _null_space(R, half_L, Nv, Nw):
    """Step 3: the columns N = (Nv, Nw) spanning the velocities the joints admit (each link's linear and angular
    velocity per coordinate z)."""
    nj = R.shape[0] - 1
    # 3. null space of W_Jᵀ: z = [v_1, ω_1 (B_1), (α̇_h, α̇_v) per joint]
    Nv[0, :, :6] = 0.0
    Nw[0, :, :6] = 0.0
    for k in range(3):
        Nv[0, k, k] = 1.0
        for c in range(3):
            Nw[0, k, 3 + c] = R[0, k, c]
    for j in range(nj):
        width = 6 + 2 * j
        for k in range(3):  # link j does not move with joint j's rates (read below as zero columns)
            Nv[j, k, width] = 0.0
            Nv[j, k, width + 1] = 0.0
            Nw[j, k, width] = 0.0
            Nw[j, k, width + 1] = 0.0
        for k in range(3):
            for c in range(width):
                Nw[j + 1, k, c] = Nw[j, k, c]
            Nw[j + 1, k, width] = R[j, k, 1]
            Nw[j + 1, k, width + 1] = R[j + 1, k, 0]
        zi0, zi1, zi2 = half_L * R[j, 0, 2], half_L * R[j, 1, 2], half_L * R[j, 2, 2]
        zj0, zj1, zj2 = half_L * R[j + 1, 0, 2], half_L * R[j + 1, 1, 2], half_L * R[j + 1, 2, 2]
        for c in range(width + 2):
            a0, a1, a2 = Nw[j, 0, c], Nw[j, 1, c], Nw[j, 2, c]
            b0, b1, b2 = Nw[j + 1, 0, c], Nw[j + 1, 1, c], Nw[j + 1, 2, c]
            Nv[j + 1, 0, c] = Nv[j, 0, c] + (a1 * zi2 - a2 * zi1) + (b1 * zj2 - b2 * zj1)
            Nv[j + 1, 1, c] = Nv[j, 1, c] + (a2 * zi0 - a0 * zi2) + (b2 * zj0 - b0 * zj2)
            Nv[j + 1, 2, c] = Nv[j, 2, c] + (a0 * zi1 - a1 * zi0) + (b0 * zj1 - b1 * zj0)


@njit(cache=True)
def _reduced_factor(
    R, omg, vel, torque_body, Nv, Nw, mass, theta, grav, dt, half_L, pd_implicit, joint_damping, Mr, rhs, U, col,
    zhat_free,
):  # fmt: skip
    """Step 4: the reduced system, its factor U (Mr = U Uᵀ) and the contact-free solution ẑ_free; False if Mr is
    not positive definite."""
    nj = R.shape[0] - 1
    nz = Mr.shape[0]
    # 4. reduced mass matrix Mr = Nᵀ M N and right-hand side Nᵀ (M u_A + Δt (h + τ_C)) by composite inertias
    reduced_system(R, omg, vel, torque_body, Nv, Nw, mass, theta, grav, dt, half_L, Mr, rhs)
    if pd_implicit:
        # coordinates h = 6 + 2j and v = h + 1 turn link j+1 about a = e_y^{B_j} and b = e_x^{B_{j+1}}; the joint
        # rates are the projections α̇_h = ω_rel·a = z_h + (a·b) z_v, α̇_v = (a·b) z_h + z_v (a·b = g_Jφ, zero
        # up to the midpoint's drift), so each axis adds c (1, a·b)ᵀ(1, a·b) to the joint's 2×2 block
        for j in range(nj):
            ab = R[j, 0, 1] * R[j + 1, 0, 0] + R[j, 1, 1] * R[j + 1, 1, 0] + R[j, 2, 1] * R[j + 1, 2, 0]
            ch, cv = joint_damping[j, 0], joint_damping[j, 1]
            h, v = 6 + 2 * j, 7 + 2 * j
            Mr[h, h] += ch + cv * ab * ab
            Mr[v, v] += cv + ch * ab * ab
            Mr[h, v] += (ch + cv) * ab
            Mr[v, h] += (ch + cv) * ab
    # Mr = U Uᵀ with U upper triangular (Cholesky run from the last coordinate up). Link i only moves with the first
    # 6 + 2i coordinates, and with this factor its contact rows Ŷ = W_aᵀ N U⁻ᵀ keep that sparsity (hand-written:
    # LAPACK has no such ordering, and the 26×26 factor is cheaper inline than a library call).
    # Right-looking form: each column's outer product is subtracted from the lower triangle still to be factored;
    # that inner loop is an axpy, which the compiler vectorises (a left-looking dot product is a serial sum, as
    # numba keeps IEEE order). Mr is overwritten.
    for c in range(nz - 1, -1, -1):
        s = Mr[c, c]
        if not s > 0.0:
            return False
        ucc = math.sqrt(s)
        U[c, c] = ucc
        for r in range(c):
            col[r] = Mr[c, r] / ucc
            U[r, c] = col[r]
        for r in range(c):
            ur = col[r]
            for q in range(r + 1):
                Mr[r, q] -= ur * col[q]
    for r in range(nz - 1, -1, -1):
        s = rhs[r]
        for k in range(r + 1, nz):
            s -= U[r, k] * zhat_free[k]
        zhat_free[r] = s / U[r, r]

    return True


@njit(cache=True)
def _finish(
    zhat, U, Nv, Nw, R, quatM, posM, dt, L, m, active, P, z, wI, dq, pos, quat, vel, omg, cache, out_impulses, out_stats
):  # fmt: skip
    """Step 7: u_E = N z with z = U⁻ᵀ ẑ; q_E (eq. 83); the joints' projection (Sec. VII-C); the impulses into the
    warm-start cache and out_impulses. Returns the status (a non-finite state: the link in out_stats[3])."""
    n = pos.shape[0]
    nz = zhat.shape[0]
    for r in range(nz):
        s = zhat[r]
        for q in range(r):
            s -= U[q, r] * z[q]
        z[r] = s / U[r, r]
    for i in range(n):
        width = min(nz, 6 + 2 * i)
        for k in range(3):
            sv = 0.0
            sw = 0.0
            for c in range(width):
                sv += Nv[i, k, c] * z[c]
                sw += Nw[i, k, c] * z[c]
            vel[i, k] = sv
            wI[k] = sw
        for k in range(3):
            omg[i, k] = R[i, 0, k] * wI[0] + R[i, 1, k] * wI[1] + R[i, 2, k] * wI[2]
        _quat_rate_into(quatM[i], omg[i], dq)
        for k in range(4):
            quat[i, k] = quatM[i, k] + 0.5 * dt * dq[k]
        for k in range(3):
            pos[i, k] = posM[i, k] + 0.5 * dt * vel[i, k]
    project_joint_constraints(pos, quat, L)
    for a in range(out_impulses.shape[0]):
        for d in range(4):
            out_impulses[a, d] = 0.0
    for k in range(m):
        for d in range(4):
            cache[active[k], d] = P[k, d]
            out_impulses[active[k], d] = P[k, d]
    for i in range(n):
        for k in range(3):
            if not (math.isfinite(pos[i, k]) and math.isfinite(vel[i, k]) and math.isfinite(omg[i, k])):
                out_stats[3] = i
                return STATUS_NOT_FINITE
    return STATUS_OK


@njit(cache=True)
def step(
    pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s, out_impulses, out_stats,
    diagnostics,
):  # fmt: skip
    """One time step in place. Returns a status code; ``out_stats`` = [sweeps, retries, n_active, worst contacts x3].

    ``out_impulses`` (n_all_contacts, 4) receives this step's contact impulses (zero for open contacts);
    ``obstacles`` (n_obs, 3) holds the vertical cylinders (x, y, radius)."""
    n = pos.shape[0]
    nj = n - 1
    nz = 6 + 2 * nj
    L = prm[P_L]
    half_L = 0.5 * L
    mass = prm[P_M]
    dt = prm[P_DT]
    n_obs = obstacles.shape[0]
    n_all = 2 * n + n * n_obs

    # Every work array of the step is a view into one float and one int buffer: ~40 separate small allocations
    # cost ~1.5 µs, a sixth of a sidewinding step. Only what is accumulated into is zeroed (see each array's use:
    # the rest is written before it is read, within the widths that are read).
    fbuf = np.empty(19 * n + 13 + 2 * nj + 6 * n * nz + 2 * nz * nz + 10 * nz + (40 + 4 * nz) * n_all + 16)
    ibuf = np.empty(3 * n_all, dtype=np.int64)
    o = 0
    posM = fbuf[o : o + 3 * n].reshape((n, 3))
    o += 3 * n
    quatM = fbuf[o : o + 4 * n].reshape((n, 4))
    o += 4 * n
    R = fbuf[o : o + 9 * n].reshape((n, 3, 3))
    o += 9 * n
    torque_body = fbuf[o : o + 3 * n].reshape((n, 3))
    o += 3 * n
    wI = fbuf[o : o + 3]
    o += 3
    dq = fbuf[o : o + 4]
    o += 4
    theta = fbuf[o : o + 3]
    o += 3
    grav = fbuf[o : o + 3]
    o += 3
    joint_damping = fbuf[o : o + 2 * nj].reshape((nj, 2))
    o += 2 * nj
    Nv = fbuf[o : o + 3 * n * nz].reshape((n, 3, nz))
    o += 3 * n * nz
    Nw = fbuf[o : o + 3 * n * nz].reshape((n, 3, nz))  # angular velocity in I
    o += 3 * n * nz
    Mr = fbuf[o : o + nz * nz].reshape((nz, nz))
    o += nz * nz
    U = fbuf[o : o + nz * nz].reshape((nz, nz))  # upper triangle only: every entry of it is written before use
    o += nz * nz
    rhs = fbuf[o : o + nz]
    o += nz
    col = fbuf[o : o + nz]
    o += nz
    zhat_free = fbuf[o : o + nz]
    o += nz
    zhat = fbuf[o : o + nz]
    o += nz
    zhat_sweep = fbuf[o : o + nz]
    o += nz
    z = fbuf[o : o + nz]
    o += nz
    row = fbuf[o : o + 4 * nz].reshape((nz, 4))
    o += 4 * nz
    c_off = fbuf[o : o + 3 * n_all].reshape((n_all, 3))
    o += 3 * n_all
    c_dir = fbuf[o : o + 9 * n_all].reshape((n_all, 3, 3))
    o += 9 * n_all
    c_mu = fbuf[o : o + 3 * n_all].reshape((n_all, 3))
    o += 3 * n_all
    Yh_all = fbuf[o : o + 4 * nz * n_all].reshape((n_all, nz, 4))  # rows: only c < width of the contact is read
    o += 4 * nz * n_all
    blocks_all = fbuf[o : o + 16 * n_all].reshape((n_all, 4, 4))
    o += 16 * n_all
    rpar_all = fbuf[o : o + 4 * n_all].reshape((n_all, 4))  # r_N, R_T,1, R_T,2, r_V
    o += 4 * n_all
    P_all = fbuf[o : o + 4 * n_all].reshape((n_all, 4))
    o += 4 * n_all
    change_all = fbuf[o : o + n_all]
    o += n_all
    gamma0 = fbuf[o : o + 4]
    newP = fbuf[o + 4 : o + 8]
    work_before = fbuf[o + 8 : o + 12]
    work_gamma = fbuf[o + 12 : o + 16]
    o += 16
    active = ibuf[0:n_all]
    c_link = ibuf[n_all : 2 * n_all]
    widths_all = ibuf[2 * n_all : 3 * n_all]
    theta[0] = prm[P_TH1]
    theta[1] = prm[P_TH1]
    theta[2] = prm[P_TH3]
    grav[0] = prm[P_GX]
    grav[1] = prm[P_GY]
    grav[2] = prm[P_GZ]

    pd_implicit = prm[P_PDIMPLICIT] > 0.5
    _midpoint(pos, quat, vel, omg, dt, posM, quatM, R, dq)
    _joint_torques(R, omg, ref_angle, ref_rate, gains, feedforward, dt, pd_implicit, torque_body, joint_damping)
    _null_space(R, half_L, Nv, Nw)
    if not _reduced_factor(
        R, omg, vel, torque_body, Nv, Nw, mass, theta, grav, dt, half_L, pd_implicit, joint_damping, Mr, rhs, U, col,
        zhat_free,
    ):  # fmt: skip
        out_stats[0] = 0
        return STATUS_NOT_FINITE
    m = _active_contacts(posM, R, obstacles, prm, active, c_link, c_off, c_dir, c_mu)
    Yh = Yh_all[:m]  # [contact, coordinate, direction]: the 4 directions side by side (SIMD, ILP)
    blocks, widths, rpar = blocks_all[:m], widths_all[:m], rpar_all[:m]
    _contact_rows(m, c_link, c_off, c_dir, c_mu, Nv, Nw, U, prm, row, Yh, blocks, widths, rpar)
    P, change = P_all[:m], change_all[:m]
    if not _prox_iteration(
        m, active, widths, Yh, blocks, rpar, c_mu, cache, zhat_free, prm, P, change, zhat, zhat_sweep, gamma0, newP,
        work_before, work_gamma, out_stats, diagnostics,
    ):  # fmt: skip
        return STATUS_NOT_CONVERGED
    return _finish(
        zhat, U, Nv, Nw, R, quatM, posM, dt, L, m, active, P, z, wI, dq, pos, quat, vel, omg, cache, out_impulses,
        out_stats,
    )  # fmt: skip


@njit(cache=True)
def joint_state(quat, omg, angles, rates):
    """Joint angles (α_h, α_v) and rates (n−1, 2) of a state, written into ``angles`` and ``rates``: the formulas of
    kinematics.joint_angles / joint_rates (R_iᵀ R_{i+1} = R_y(α_h) R_x(α_v); the relative angular velocity on the
    two joint axes) without building the rotation matrices as Python objects. The HIL plant reads these at every
    controller tick, where the list comprehension over quaternions cost more than the step itself."""
    n = quat.shape[0]
    Ri = np.empty((3, 3))
    Rj = np.empty((3, 3))
    quat_to_matrix_into(quat[0], Ri)
    for i in range(n - 1):
        quat_to_matrix_into(quat[i + 1], Rj)
        rel20 = Ri[0, 2] * Rj[0, 0] + Ri[1, 2] * Rj[1, 0] + Ri[2, 2] * Rj[2, 0]
        rel21 = Ri[0, 2] * Rj[0, 1] + Ri[1, 2] * Rj[1, 1] + Ri[2, 2] * Rj[2, 1]
        rel22 = Ri[0, 2] * Rj[0, 2] + Ri[1, 2] * Rj[1, 2] + Ri[2, 2] * Rj[2, 2]
        angles[i, 0] = -math.asin(min(1.0, max(-1.0, rel20)))
        angles[i, 1] = math.atan2(rel21, rel22)
        rate_h = 0.0
        rate_v = 0.0
        for k in range(3):
            w_next = Rj[k, 0] * omg[i + 1, 0] + Rj[k, 1] * omg[i + 1, 1] + Rj[k, 2] * omg[i + 1, 2]
            w_rel = w_next - (Ri[k, 0] * omg[i, 0] + Ri[k, 1] * omg[i, 1] + Ri[k, 2] * omg[i, 2])
            rate_h += w_rel * Ri[k, 1]
            rate_v += w_rel * Rj[k, 0]
        rates[i, 0] = rate_h
        rates[i, 1] = rate_v
        Ri, Rj = Rj, Ri


@njit(cache=True)
def split_step(
    pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s, out_impulses, out_stats,
    diagnostics,
):  # fmt: skip
    """A step of Δt that did not converge, retried as two half steps, each recursively halved again if it fails, down
    to Δt / 2^max_step_halvings (an iterative depth-first bisection; numba has no cheap recursion).

    Returns ``(status, sweeps, depth, retries)``. On success ``out_impulses`` holds the contact impulses summed over the
    sub-steps (so impulses / Δt is still the mean force) and ``diagnostics[0]`` the largest sub-step residual. On
    failure the state and the warm-start cache are restored to the start of the step, so the caller's time stays
    consistent and nothing unconverged is kept. The held joint torques (or PD law) apply throughout, as before."""
    max_depth = int(prm[P_HALVINGS])
    dt = prm[P_DT]
    sub = prm.copy()
    pos0, quat0, vel0, omg0, cache0 = pos.copy(), quat.copy(), vel.copy(), omg.copy(), cache.copy()
    total = np.zeros_like(out_impulses)
    finest = 1 << max_depth  # the step in units of the finest sub-step
    done = 0
    depth = 1
    deepest = 1
    sweeps = 0
    retries = 0
    residual = 0.0
    for k in range(cache.shape[0]):  # warm start: impulses scale with the step
        for d in range(4):
            cache[k, d] *= 0.5
    status = STATUS_OK
    while done < finest:
        size = finest >> depth
        sub[P_DT] = dt / (1 << depth)
        status = step(
            pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, sub, obstacles,
            t_s + dt * done / finest, out_impulses, out_stats, diagnostics,
        )  # fmt: skip
        sweeps += out_stats[0]
        retries += out_stats[1]
        if status == STATUS_OK:
            total += out_impulses
            residual = max(residual, diagnostics[0])
            done += size
            while depth > 1 and done % (2 * size) == 0:  # both halves of the parent done: back up one level
                depth -= 1
                size *= 2
                for k in range(cache.shape[0]):
                    for d in range(4):
                        cache[k, d] *= 2.0
        elif status == STATUS_NOT_CONVERGED and depth < max_depth:
            depth += 1
            deepest = max(deepest, depth)
            for k in range(cache.shape[0]):
                for d in range(4):
                    cache[k, d] *= 0.5
        else:
            break
    if status != STATUS_OK:
        pos[:] = pos0
        quat[:] = quat0
        vel[:] = vel0
        omg[:] = omg0
        cache[:] = cache0
        return status, sweeps, deepest, retries
    for k in range(cache.shape[0]):  # back to full-step impulses for the next step's warm start
        for d in range(4):
            cache[k, d] *= 2.0
    out_impulses[:] = total
    diagnostics[0] = residual
    return STATUS_OK, sweeps, deepest, retries


@njit(cache=True)
def run_steps(
    n_steps, pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s, out_impulses,
    out_stats, totals, diagnostics,
):  # fmt: skip
    """Several steps with the same (held) references; ``totals`` accumulates [steps, sweeps, max sweeps, retries,
    steps split into sub-steps, deepest split], ``diagnostics`` = [contact-law residual of the last step, its maximum]
    in m/s. A step that fails is retried as sub-steps (:func:`split_step`) before the failure is returned."""
    dt = prm[P_DT]
    for s in range(n_steps):
        status = step(
            pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s + s * dt,
            out_impulses, out_stats, diagnostics,
        )  # fmt: skip
        sweeps = out_stats[0]
        retries = out_stats[1]
        if status == STATUS_NOT_CONVERGED and prm[P_HALVINGS] >= 1.0:
            status, more, depth, more_retries = split_step(
                pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s + s * dt,
                out_impulses, out_stats, diagnostics,
            )  # fmt: skip
            sweeps += more
            retries += more_retries
            if status == STATUS_OK:
                totals[4] += 1
                totals[5] = max(totals[5], depth)
        if status != STATUS_OK:
            out_stats[0] = sweeps
            return status, s
        totals[0] += 1
        totals[1] += sweeps
        totals[2] = max(totals[2], sweeps)
        totals[3] += retries
        diagnostics[1] = max(diagnostics[1], diagnostics[0])
    return STATUS_OK, n_steps
