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
from sim.snake3d.rotations import quat_to_matrix_into

# indices into the parameter vector (see SnakeModel.params_array / PARAM_NAMES)
P_L, P_LSC, P_LGS, P_M, P_TH1, P_TH3, P_GX, P_GY, P_GZ, P_MUX, P_MUY, P_MUV, P_DT, P_PAPER = range(14)
P_RN, P_RT, P_RV, P_TOL, P_MAXIT, P_RETRIES, P_VTOL, P_INNER, P_MUO, P_RTOL, P_HALVINGS, P_CONTRACTING = range(14, 26)
P_PDIMPLICIT = 26
INNER_TOLERANCE_FACTOR = 1e-2

STATUS_OK = 0
STATUS_NOT_CONVERGED = 1
STATUS_NOT_FINITE = 2


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
def _solve_contact(gamma0, A, P0, r_n, rt0, rt1, r_v, scale, mux, muy, muv, tol, inner, out, before, gamma):
    """Numba twin of reference.solve_contact (same operations in the same order); ``before`` and ``gamma`` are
    4-element work arrays (allocating them here cost as much as the update itself)."""
    for k in range(4):
        out[k] = P0[k]
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
def _gamma(Y, width, zhat, out):
    """out[d] = Σ_c Y[c, d] ẑ[c] for the 4 directions of a contact (4 independent sums, each in coordinate order)."""
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    g3 = 0.0
    for c in range(width):
        z = zhat[c]
        g0 += Y[c, 0] * z
        g1 += Y[c, 1] * z
        g2 += Y[c, 2] * z
        g3 += Y[c, 3] * z
    out[0] = g0
    out[1] = g1
    out[2] = g2
    out[3] = g3


@njit(cache=True)
def _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0):
    """Violation of the contact laws (eq. 87–89) in m/s: max over contacts of ‖P − prox(P − rγ)‖ / r."""
    residual = 0.0
    for k in range(m):
        _gamma(Yh[k], widths[k], zhat, gamma0)
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
    mux, muy, muv = prm[P_MUX], prm[P_MUY], prm[P_MUV]
    dt = prm[P_DT]
    tol = prm[P_TOL]
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

    # 2. joint torques (PD with the fixed sign + feed-forward), as body torques per link
    torque_body[:, :] = 0.0
    pd_implicit = prm[P_PDIMPLICIT] > 0.5
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
            out_stats[0] = 0
            return STATUS_NOT_FINITE
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

    # 5. active contacts at the midpoint: link, body-point offset, directions (N, T1, T2) and friction bounds.
    # Ground: the lowest points of the end spheres, T along / across the link (frame Π), rolling about the link axis.
    # Obstacles: the point of the link capsule closest to a vertical cylinder, T horizontal / vertical, no rolling.
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
    Yh = Yh_all[:m]  # [contact, coordinate, direction]: the 4 directions side by side (SIMD, ILP)
    blocks = blocks_all[:m]
    widths = widths_all[:m]
    rpar = rpar_all[:m]
    for k in range(m):
        i = c_link[k]
        off = c_off[k]
        width = min(nz, 6 + 2 * i)
        widths[k] = width
        for dim in range(3):
            d0, d1, d2 = c_dir[k, dim, 0], c_dir[k, dim, 1], c_dir[k, dim, 2]
            rd0 = off[1] * d2 - off[2] * d1
            rd1 = off[2] * d0 - off[0] * d2
            rd2 = off[0] * d1 - off[1] * d0
            for c in range(width):
                row[c, dim] = (
                    d0 * Nv[i, 0, c] + d1 * Nv[i, 1, c] + d2 * Nv[i, 2, c]
                    + rd0 * Nw[i, 0, c] + rd1 * Nw[i, 1, c] + rd2 * Nw[i, 2, c]
                )  # fmt: skip
        ex = c_dir[k, 1]
        rolling = c_mu[k, 2] > 0.0  # rolling about the link axis: L_SC (e_x^Π)ᵀ ω_I
        for c in range(width):
            row[c, 3] = lsc * (ex[0] * Nw[i, 0, c] + ex[1] * Nw[i, 1, c]) if rolling else 0.0
        # back substitution U ŷ = row for the 4 directions at once (independent sums, each in the original order)
        Y = Yh[k]
        for r in range(width - 1, -1, -1):
            s0, s1, s2, s3 = row[r, 0], row[r, 1], row[r, 2], row[r, 3]
            for q in range(r + 1, width):
                u = U[r, q]
                s0 -= u * Y[q, 0]
                s1 -= u * Y[q, 1]
                s2 -= u * Y[q, 2]
                s3 -= u * Y[q, 3]
            urr = U[r, r]
            Y[r, 0] = s0 / urr
            Y[r, 1] = s1 / urr
            Y[r, 2] = s2 / urr
            Y[r, 3] = s3 / urr
        for d1 in range(4):
            for d2 in range(4):
                s = 0.0
                for c in range(width):
                    s += Y[c, d1] * Y[c, d2]
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

    # 6. prox iteration (block Gauss–Seidel over contacts); after each block of maxit sweeps without convergence:
    # continue with the same r if the iteration is still contracting, else restart with r halved (see model.CONTRACTING)
    P = P_all[:m]
    inner = int(prm[P_INNER])
    change = change_all[:m]
    change[:] = 0.0
    scale = 1.0
    sweeps = 0
    converged = False
    residual = 0.0
    maxit = int(prm[P_MAXIT])
    retries = int(prm[P_RETRIES])
    reductions = 0
    restart = True
    for _attempt in range(retries + 1):
        if restart:
            for c in range(nz):
                zhat[c] = zhat_free[c]
            for k in range(m):
                for d in range(4):
                    P[k, d] = cache[active[k], d]
                    for c in range(widths[k]):
                        zhat[c] += Yh[k, c, d] * P[k, d]
        residual_mid = math.inf
        for sweep in range(maxit):
            sweeps += 1
            for c in range(nz):
                zhat_sweep[c] = zhat[c]
            sq_n = 0.0
            sq_t = 0.0
            sq_v = 0.0
            for k in range(m):
                wk = widths[k]
                _gamma(Yh[k], wk, zhat, gamma0)
                _solve_contact(
                    gamma0, blocks[k], P[k], rpar[k, 0], rpar[k, 1], rpar[k, 2], rpar[k, 3], scale, c_mu[k, 0],
                    c_mu[k, 1], c_mu[k, 2],
                    tol, inner, newP, work_before, work_gamma,
                )  # fmt: skip
                ch = 0.0
                for d in range(4):
                    delta = newP[d] - P[k, d]
                    if delta != 0.0:
                        for c in range(wk):
                            zhat[c] += Yh[k, c, d] * delta
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
            if sweep == maxit // 2:
                residual_mid = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
            if err < tol or math.sqrt(du) < prm[P_VTOL]:
                # accept only if the contact laws hold to the residual tolerance (m/s)
                residual = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
                if residual <= prm[P_RTOL]:
                    converged = True
                    break
        if converged:
            break
        residual = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
        restart = not (math.isfinite(residual) and residual < prm[P_CONTRACTING] * residual_mid)
        if restart:
            scale *= 0.5
            reductions += 1
    out_stats[0] = sweeps
    out_stats[1] = reductions
    out_stats[2] = m
    if not converged:
        order = np.argsort(-change)
        for q in range(3):
            out_stats[3 + q] = active[order[q]] if q < m else -1
        return STATUS_NOT_CONVERGED

    diagnostics[0] = residual

    # 7. u_E = N z, z = U⁻ᵀ ẑ; q_E (eq. 83); projection (Sec. VII-C)
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
