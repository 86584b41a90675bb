"""The numba step: the reference step of :mod:`sim.snake3d.reference` in a faster but equivalent form.

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
from sim.snake3d.rotations import quat_rate, quat_to_matrix

# indices into the parameter vector (see SnakeModel.params_array / PARAM_NAMES)
P_L, P_LSC, P_LGS, P_M, P_TH1, P_TH3, P_GX, P_GY, P_GZ, P_MUX, P_MUY, P_MUV, P_DT, P_PAPER = range(14)
P_RN, P_RT, P_RV, P_TOL, P_MAXIT, P_RETRIES, P_VTOL, P_INNER, P_MUO, P_RTOL = range(14, 24)
INNER_TOLERANCE_FACTOR = 1e-2

STATUS_OK = 0
STATUS_NOT_CONVERGED = 1
STATUS_NOT_FINITE = 2


@njit(cache=True)
def _cross(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


@njit(cache=True)
def _matvec(A, x):
    """A x for a 3×3 A (explicit: numba sends every @ to BLAS, whose call overhead dominates at this size)."""
    return np.array(
        [
            A[0, 0] * x[0] + A[0, 1] * x[1] + A[0, 2] * x[2],
            A[1, 0] * x[0] + A[1, 1] * x[1] + A[1, 2] * x[2],
            A[2, 0] * x[0] + A[2, 1] * x[1] + A[2, 2] * x[2],
        ]
    )


@njit(cache=True)
def _matTvec(A, x):
    """Aᵀ x for a 3×3 A."""
    return np.array(
        [
            A[0, 0] * x[0] + A[1, 0] * x[1] + A[2, 0] * x[2],
            A[0, 1] * x[0] + A[1, 1] * x[1] + A[2, 1] * x[2],
            A[0, 2] * x[0] + A[1, 2] * x[1] + A[2, 2] * x[2],
        ]
    )


@njit(cache=True)
def _max_eig_2x2(a00, a01, a10, a11):
    half_trace = 0.5 * (a00 + a11)
    det = a00 * a11 - a01 * a10
    return half_trace + math.sqrt(max(half_trace * half_trace - det, 0.0))


@njit(cache=True)
def _prox_ellipse(y0, y1, ax, ay):
    if ax <= 0.0 or ay <= 0.0:
        return 0.0, 0.0
    s = math.sqrt((y0 / ax) ** 2 + (y1 / ay) ** 2)
    if s > 1.0:
        return y0 / s, y1 / s
    return y0, y1


@njit(cache=True)
def _solve_contact(gamma0, A, P0, r_n, rt0, rt1, r_v, scale, mux, muy, muv, tol, inner, out):
    """Numba twin of reference.solve_contact (same operations in the same order)."""
    for k in range(4):
        out[k] = P0[k]
    before = np.empty(4)
    gamma = np.empty(4)
    for _ in range(inner):
        for k in range(4):
            before[k] = out[k]
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[0] = max(0.0, out[0] - scale * r_n * gamma[0])
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[1], out[2] = _prox_ellipse(
            out[1] - scale * rt0 * gamma[1], out[2] - scale * rt1 * gamma[2], mux * out[0], muy * out[0]
        )
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[3] = min(muv * out[0], max(-muv * out[0], out[3] - scale * r_v * gamma[3]))
        change = 0.0
        for k in range(4):
            change += abs(out[k] - before[k])
        if change < INNER_TOLERANCE_FACTOR * tol:
            break


@njit(cache=True)
def _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0):
    """Violation of the contact laws (eq. 87–89) in m/s: max over contacts of ‖P − prox(P − rγ)‖ / r."""
    residual = 0.0
    for k in range(m):
        wk = widths[k]
        for d in range(4):
            s = 0.0
            for c in range(wk):
                s += Yh[k, d, c] * zhat[c]
            gamma0[d] = s
        pn = max(0.0, P[k, 0] - rpar[k, 0] * gamma0[0])
        res = abs(pn - P[k, 0]) / rpar[k, 0]
        t1, t2 = _prox_ellipse(
            P[k, 1] - rpar[k, 1] * gamma0[1], P[k, 2] - rpar[k, 2] * gamma0[2], c_mu[k, 0] * P[k, 0],
            c_mu[k, 1] * P[k, 0],
        )  # fmt: skip
        res = max(res, math.sqrt(((t1 - P[k, 1]) / rpar[k, 1]) ** 2 + ((t2 - P[k, 2]) / rpar[k, 2]) ** 2))
        if rpar[k, 3] > 0.0:
            bound = c_mu[k, 2] * P[k, 0]
            pv = min(bound, max(-bound, P[k, 3] - rpar[k, 3] * gamma0[3]))
            res = max(res, abs(pv - P[k, 3]) / rpar[k, 3])
        residual = max(residual, res)
    return residual


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
    lsc = prm[P_LSC]
    lgs = prm[P_LGS]
    mass = prm[P_M]
    theta = np.array([prm[P_TH1], prm[P_TH1], prm[P_TH3]])
    grav = np.array([prm[P_GX], prm[P_GY], prm[P_GZ]])
    mux, muy, muv = prm[P_MUX], prm[P_MUY], prm[P_MUV]
    dt = prm[P_DT]
    tol = prm[P_TOL]

    # 1. midpoint (eq. 72 with F(q_A))
    posM = np.empty((n, 3))
    quatM = np.empty((n, 4))
    R = np.empty((n, 3, 3))
    for i in range(n):
        dq = quat_rate(quat[i], omg[i])
        s = 0.0
        for k in range(4):
            quatM[i, k] = quat[i, k] + 0.5 * dt * dq[k]
            s += quatM[i, k] ** 2
        s = math.sqrt(s)
        for k in range(4):
            quatM[i, k] /= s
        for k in range(3):
            posM[i, k] = pos[i, k] + 0.5 * dt * vel[i, k]
        R[i] = quat_to_matrix(quatM[i])

    # 2. joint torques (PD with the fixed sign + feed-forward), as body torques per link
    torque_body = np.zeros((n, 3))
    for j in range(nj):
        # (R_jᵀ R_{j+1}) entries [2,0], [2,1], [2,2]: row 2 of R_jᵀ is column 2 of R_j
        rel20 = R[j, 0, 2] * R[j + 1, 0, 0] + R[j, 1, 2] * R[j + 1, 1, 0] + R[j, 2, 2] * R[j + 1, 2, 0]
        rel21 = R[j, 0, 2] * R[j + 1, 0, 1] + R[j, 1, 2] * R[j + 1, 1, 1] + R[j, 2, 2] * R[j + 1, 2, 1]
        rel22 = R[j, 0, 2] * R[j + 1, 0, 2] + R[j, 1, 2] * R[j + 1, 1, 2] + R[j, 2, 2] * R[j + 1, 2, 2]
        ah = -math.asin(min(1.0, max(-1.0, rel20)))
        av = math.atan2(rel21, rel22)
        w_rel = _matvec(R[j + 1], omg[j + 1]) - _matvec(R[j], omg[j])
        a = R[j, :, 1].copy()
        b = R[j + 1, :, 0].copy()
        rate_h = w_rel[0] * a[0] + w_rel[1] * a[1] + w_rel[2] * a[2]
        rate_v = w_rel[0] * b[0] + w_rel[1] * b[1] + w_rel[2] * b[2]
        tau_h = feedforward[j, 0] + gains[0] * (ref_angle[j, 0] - ah) + gains[1] * (ref_rate[j, 0] - rate_h)
        tau_v = feedforward[j, 1] + gains[2] * (ref_angle[j, 1] - av) + gains[3] * (ref_rate[j, 1] - rate_v)
        T = tau_h * a + tau_v * b
        torque_body[j] -= _matTvec(R[j], T)
        torque_body[j + 1] += _matTvec(R[j + 1], T)

    # 3. null space of W_Jᵀ: z = [v_1, ω_1 (B_1), (α̇_h, α̇_v) per joint]
    Nv = np.zeros((n, 3, nz))
    Nw = np.zeros((n, 3, nz))  # angular velocity in I
    for k in range(3):
        Nv[0, k, k] = 1.0
        for c in range(3):
            Nw[0, k, 3 + c] = R[0, k, c]
    for j in range(nj):
        width = 6 + 2 * j
        for k in range(3):
            for c in range(width):
                Nw[j + 1, k, c] = Nw[j, k, c]
            Nw[j + 1, k, width] = R[j, k, 1]
            Nw[j + 1, k, width + 1] = R[j + 1, k, 0]
        zi = half_L * R[j, :, 2]
        zj = half_L * R[j + 1, :, 2]
        for c in range(width + 2):
            w0 = Nw[j, :, c]
            w1 = Nw[j + 1, :, c]
            Nv[j + 1, 0, c] = Nv[j, 0, c] + (w0[1] * zi[2] - w0[2] * zi[1]) + (w1[1] * zj[2] - w1[2] * zj[1])
            Nv[j + 1, 1, c] = Nv[j, 1, c] + (w0[2] * zi[0] - w0[0] * zi[2]) + (w1[2] * zj[0] - w1[0] * zj[2])
            Nv[j + 1, 2, c] = Nv[j, 2, c] + (w0[0] * zi[1] - w0[1] * zi[0]) + (w1[0] * zj[1] - w1[1] * zj[0])

    # 4. reduced mass matrix Mr = Nᵀ M N = Jᵀ J and right-hand side Nᵀ (M u_A + Δt (h + τ_C)), via BLAS
    J = np.zeros((6 * n, nz))
    f = np.empty(6 * n)
    sqrt_m = math.sqrt(mass)
    sqrt_theta = np.sqrt(theta)
    for i in range(n):
        width = min(nz, 6 + 2 * i)
        w = omg[i]
        Tw = theta * w
        gyro = -_cross(w, Tw)
        for k in range(3):
            f[6 * i + k] = (mass * vel[i, k] + dt * mass * grav[k]) / sqrt_m
            f[6 * i + 3 + k] = (Tw[k] + dt * (gyro[k] + torque_body[i, k])) / sqrt_theta[k]
        for c in range(width):
            for k in range(3):
                J[6 * i + k, c] = sqrt_m * Nv[i, k, c]
                # body-frame angular velocity row k: (R_iᵀ Nw)_k
                J[6 * i + 3 + k, c] = sqrt_theta[k] * (
                    R[i, 0, k] * Nw[i, 0, c] + R[i, 1, k] * Nw[i, 1, c] + R[i, 2, k] * Nw[i, 2, c]
                )
    Jt = np.ascontiguousarray(J.T)
    Mr = Jt @ J
    rhs = Jt @ f
    # Mr = U Uᵀ with U upper triangular (Cholesky run from the last coordinate up). Link i only moves with the first
    # 6 + 2i coordinates, and with this factor its contact rows Ŷ = W_aᵀ N U⁻ᵀ keep that sparsity (hand-written:
    # LAPACK has no such ordering, and the 26×26 factor is cheaper inline than a library call).
    U = np.zeros((nz, nz))
    for c in range(nz - 1, -1, -1):
        s = Mr[c, c]
        for k in range(c + 1, nz):
            s -= U[c, k] * U[c, k]
        if not s > 0.0:
            out_stats[0] = 0
            return STATUS_NOT_FINITE
        U[c, c] = math.sqrt(s)
        for r in range(c - 1, -1, -1):
            s = Mr[c, r]
            for k in range(c + 1, nz):
                s -= U[r, k] * U[c, k]
            U[r, c] = s / U[c, c]
    zhat_free = np.empty(nz)
    for r in range(nz - 1, -1, -1):
        s = rhs[r]
        for k in range(r + 1, nz):
            s -= U[r, k] * zhat_free[k]
        zhat_free[r] = s / U[r, r]

    # 5. active contacts at the midpoint: link, body-point offset, directions (N, T1, T2) and friction bounds.
    # Ground: the lowest points of the end spheres, T along / across the link (frame Π), rolling about the link axis.
    # Obstacles: the point of the link capsule closest to a vertical cylinder, T horizontal / vertical, no rolling.
    n_obs = obstacles.shape[0]
    n_all = 2 * n + n * n_obs
    active = np.empty(n_all, dtype=np.int64)
    c_link = np.empty(n_all, dtype=np.int64)
    c_off = np.empty((n_all, 3))
    c_dir = np.empty((n_all, 3, 3))
    c_mu = np.empty((n_all, 3))
    m = 0
    for a in range(2 * n):
        i = a % n
        sign = 1.0 if a < n else -1.0
        if posM[i, 2] + sign * lgs * R[i, 2, 2] - lsc <= 0.0:
            active[m] = a
            c_link[m] = i
            for c in range(3):
                c_off[m, c] = sign * lgs * R[i, c, 2]
            c_off[m, 2] -= lsc
            ax = R[i, 0, 2]
            ay = R[i, 1, 2]
            norm = math.sqrt(ax * ax + ay * ay)
            if norm < 1e-9:  # vertical link: eq. 27 undefined, use the (horizontal) body e_x axis
                ax = R[i, 0, 0]
                ay = R[i, 1, 0]
                norm = math.sqrt(ax * ax + ay * ay)
            c_dir[m, 0, 0] = 0.0
            c_dir[m, 0, 1] = 0.0
            c_dir[m, 0, 2] = 1.0
            c_dir[m, 1, 0] = ax / norm
            c_dir[m, 1, 1] = ay / norm
            c_dir[m, 1, 2] = 0.0
            c_dir[m, 2, 0] = -ay / norm
            c_dir[m, 2, 1] = ax / norm
            c_dir[m, 2, 2] = 0.0
            c_mu[m, 0] = mux
            c_mu[m, 1] = muy
            c_mu[m, 2] = muv
            m += 1
    for i in range(n):
        hx = R[i, 0, 2]
        hy = R[i, 1, 2]
        h2 = hx * hx + hy * hy
        for o in range(n_obs):
            relx = posM[i, 0] - obstacles[o, 0]
            rely = posM[i, 1] - obstacles[o, 1]
            sp = 0.0
            if h2 >= 1e-12:
                sp = min(1.0, max(-1.0, -(relx * hx + rely * hy) / (lgs * h2)))
            cx = relx + sp * lgs * hx
            cy = rely + sp * lgs * hy
            dist = math.sqrt(cx * cx + cy * cy)
            if dist - lsc - obstacles[o, 2] <= 0.0:
                active[m] = 2 * n + i * n_obs + o
                c_link[m] = i
                nx = cx / dist if dist > 0.0 else 1.0
                ny = cy / dist if dist > 0.0 else 0.0
                for c in range(3):
                    c_off[m, c] = sp * lgs * R[i, c, 2]
                c_off[m, 0] -= lsc * nx
                c_off[m, 1] -= lsc * ny
                c_dir[m, 0, 0] = nx
                c_dir[m, 0, 1] = ny
                c_dir[m, 0, 2] = 0.0
                c_dir[m, 1, 0] = -ny  # e_z × n
                c_dir[m, 1, 1] = nx
                c_dir[m, 1, 2] = 0.0
                c_dir[m, 2, 0] = 0.0
                c_dir[m, 2, 1] = 0.0
                c_dir[m, 2, 2] = 1.0
                c_mu[m, 0] = prm[P_MUO]
                c_mu[m, 1] = prm[P_MUO]
                c_mu[m, 2] = 0.0
                m += 1

    # their rows Ŷ = W_aᵀ N U⁻ᵀ, Delassus blocks and prox parameters
    Yh = np.zeros((m, 4, nz))
    blocks = np.zeros((m, 4, 4))
    widths = np.empty(m, dtype=np.int64)
    rpar = np.zeros((m, 4))  # r_N, R_T,1, R_T,2, r_V
    row = np.empty(nz)
    for k in range(m):
        i = c_link[k]
        off = c_off[k]
        width = min(nz, 6 + 2 * i)
        widths[k] = width
        for dim in range(4):
            for c in range(nz):
                row[c] = 0.0
            if dim < 3:
                d = c_dir[k, dim]
                rd = _cross(off, d)
                for c in range(width):
                    row[c] = (
                        d[0] * Nv[i, 0, c] + d[1] * Nv[i, 1, c] + d[2] * Nv[i, 2, c]
                        + rd[0] * Nw[i, 0, c] + rd[1] * Nw[i, 1, c] + rd[2] * Nw[i, 2, c]
                    )  # fmt: skip
            elif c_mu[k, 2] > 0.0:  # rolling about the link axis: L_SC (e_x^Π)ᵀ ω_I
                ex = c_dir[k, 1]
                for c in range(width):
                    row[c] = lsc * (ex[0] * Nw[i, 0, c] + ex[1] * Nw[i, 1, c])
            for r in range(width - 1, -1, -1):
                s = row[r]
                for q in range(r + 1, width):
                    s -= U[r, q] * Yh[k, dim, q]
                Yh[k, dim, r] = s / U[r, r]
        for d1 in range(4):
            for d2 in range(4):
                s = 0.0
                for c in range(width):
                    s += Yh[k, d1, c] * Yh[k, d2, c]
                blocks[k, d1, d2] = s
        B = blocks[k]
        mu1 = c_mu[k, 0]
        mu2 = c_mu[k, 1]
        if prm[P_PAPER] > 0.5:
            rpar[k, 0] = prm[P_RN]
            rpar[k, 1] = prm[P_RT] * mu1 / mu2
            rpar[k, 2] = prm[P_RT] * mu2 / mu1
            rpar[k, 3] = prm[P_RV]
        else:
            rpar[k, 0] = prm[P_RN] / B[0, 0]
            c_t = prm[P_RT] / _max_eig_2x2(
                mu1 * mu1 * B[1, 1], mu1 * mu2 * B[1, 2], mu2 * mu1 * B[2, 1], mu2 * mu2 * B[2, 2]
            )
            rpar[k, 1] = c_t * mu1 * mu1
            rpar[k, 2] = c_t * mu2 * mu2
            rpar[k, 3] = prm[P_RV] / B[3, 3] if B[3, 3] > 0.0 else 0.0

    # 6. prox iteration (block Gauss–Seidel over contacts), retries with halved r
    P = np.zeros((m, 4))
    zhat = np.empty(nz)
    zhat_sweep = np.empty(nz)
    gamma0 = np.empty(4)
    newP = np.empty(4)
    change = np.zeros(m)
    scale = 1.0
    sweeps = 0
    converged = False
    residual = 0.0
    maxit = int(prm[P_MAXIT])
    retries = int(prm[P_RETRIES])
    attempt = 0
    for attempt in range(retries + 1):  # noqa: B007 - reported after the loop
        for c in range(nz):
            zhat[c] = zhat_free[c]
        for k in range(m):
            for d in range(4):
                P[k, d] = cache[active[k], d]
                for c in range(widths[k]):
                    zhat[c] += Yh[k, d, c] * P[k, d]
        for _ in range(maxit):
            sweeps += 1
            for c in range(nz):
                zhat_sweep[c] = zhat[c]
            sq_n = 0.0
            sq_t = 0.0
            sq_v = 0.0
            for k in range(m):
                wk = widths[k]
                for d in range(4):
                    s = 0.0
                    for c in range(wk):
                        s += Yh[k, d, c] * zhat[c]
                    gamma0[d] = s
                _solve_contact(
                    gamma0, blocks[k], P[k], rpar[k, 0], rpar[k, 1], rpar[k, 2], rpar[k, 3], scale, c_mu[k, 0],
                    c_mu[k, 1], c_mu[k, 2],
                    tol, int(prm[P_INNER]), newP,
                )  # fmt: skip
                ch = 0.0
                for d in range(4):
                    delta = newP[d] - P[k, d]
                    if delta != 0.0:
                        for c in range(wk):
                            zhat[c] += Yh[k, d, c] * delta
                    ch += delta * delta
                    P[k, d] = newP[d]
                    if d == 0:
                        sq_n += delta * delta
                    elif d < 3:
                        sq_t += delta * delta
                    else:
                        sq_v += delta * delta
                change[k] = math.sqrt(ch)
            err = math.sqrt(sq_n) + math.sqrt(sq_t) + math.sqrt(sq_v)
            if not math.isfinite(err):
                break
            du = 0.0
            for c in range(nz):
                du += (zhat[c] - zhat_sweep[c]) ** 2
            if err < tol or math.sqrt(du) < prm[P_VTOL]:
                # accept only if the contact laws hold to the residual tolerance (m/s)
                residual = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
                if residual <= prm[P_RTOL]:
                    converged = True
                    break
        if converged:
            break
        scale *= 0.5
    out_stats[0] = sweeps
    out_stats[1] = attempt
    out_stats[2] = m
    if not converged:
        order = np.argsort(-change)
        for q in range(3):
            out_stats[3 + q] = active[order[q]] if q < m else -1
        return STATUS_NOT_CONVERGED

    diagnostics[0] = residual

    # 7. u_E = N z, z = U⁻ᵀ ẑ; q_E (eq. 83); projection (Sec. VII-C)
    z = np.empty(nz)
    for r in range(nz):
        s = zhat[r]
        for q in range(r):
            s -= U[q, r] * z[q]
        z[r] = s / U[r, r]
    for i in range(n):
        wI = np.zeros(3)
        width = min(nz, 6 + 2 * i)
        for k in range(3):
            sv = 0.0
            sw = 0.0
            for c in range(width):
                sv += Nv[i, k, c] * z[c]
                sw += Nw[i, k, c] * z[c]
            vel[i, k] = sv
            wI[k] = sw
        omg[i] = _matTvec(R[i], wI)
        dq = quat_rate(quatM[i], omg[i])
        for k in range(4):
            quat[i, k] = quatM[i, k] + 0.5 * dt * dq[k]
        for k in range(3):
            pos[i, k] = posM[i, k] + 0.5 * dt * vel[i, k]
    project_joint_constraints(pos, quat, L)
    for a in range(n_all):
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
def run_steps(
    n_steps, pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s, out_impulses,
    out_stats, totals, diagnostics,
):  # fmt: skip
    """Several steps with the same (held) references; ``totals`` accumulates [steps, sweeps, max sweeps, retries],
    ``diagnostics`` = [contact-law residual of the last step, its maximum] in m/s."""
    dt = prm[P_DT]
    for s in range(n_steps):
        status = step(
            pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, prm, obstacles, t_s + s * dt,
            out_impulses, out_stats, diagnostics,
        )  # fmt: skip
        if status != STATUS_OK:
            return status, s
        totals[0] += 1
        totals[1] += out_stats[0]
        totals[2] = max(totals[2], out_stats[0])
        totals[3] += out_stats[1]
        diagnostics[1] = max(diagnostics[1], diagnostics[0])
    return STATUS_OK, n_steps
