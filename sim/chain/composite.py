"""O(n^2) assembly of M*, N* and F*_gravity by composite bodies (numba), an alternative to summing B^T M B.

Why: the block sums of dynamics.py / fast.py cost O(n^3) (every body against every pair of joints). Writing the
columns of B as spatial joint twists turns the sums over bodies into sums over subtrees, which can be accumulated
once per joint (Featherstone's composite-rigid-body idea applied to the paper's M* and N*).

World-frame spatial twists, angular first, referred to the world origin: joint j contributes S_j = [a_j; o_j x a_j]
(a_j its world axis, o_j its origin). Body i's column block of B is P_i S_j with P_i = [[-x_i^, I], [R_i^T, 0]]
(CoM velocity, body-frame angular velocity). With K_i = P_i^T M_i P_i (spatial inertia at the origin) and
C_i = P_i^T (M_i P_i_dot + D_i M_i P_i) = [[-m x_i^ x_i_dot^ + W_i I_i - I_i W_i, 0], [-m x_i_dot^, 0]]
(I_i = R_i J_i R_i^T, W_i = Omega_i^ world angular velocity):

    M*_jk = S_j . (K^c_d S_k),     N*_jk = S_j . (C^c_d S_k + K^c_d S_dot_k),     d = the deeper of j, k

where ^c sums over the subtree of d, and both vanish when neither joint is an ancestor of the other. F*_j of
gravity is a_j . ((sum m_i x_i - m_sub o_j) x g) over the subtree of j. Per entry this is one 6-vector dot product.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sim.chain.fast import _cross, _mv, chain_arrays
from sim.chain.model import Chain


@njit(cache=True, inline="always")
def _mm(A, B, out):
    """out = A @ B for 3x3 (explicit loops: no allocation inside the per-body loop)."""
    for r in range(3):
        for c in range(3):
            out[r, c] = A[r, 0] * B[0, c] + A[r, 1] * B[1, c] + A[r, 2] * B[2, c]


@njit(cache=True, inline="always")
def _mmt(A, B, out):
    """out = A @ B^T for 3x3."""
    for r in range(3):
        for c in range(3):
            out[r, c] = A[r, 0] * B[c, 0] + A[r, 1] * B[c, 1] + A[r, 2] * B[c, 2]


@njit(cache=True, inline="always")
def _skew_into(v, out):
    out[0, 0] = out[1, 1] = out[2, 2] = 0.0
    out[0, 1] = -v[2]
    out[0, 2] = v[1]
    out[1, 0] = v[2]
    out[1, 2] = -v[0]
    out[2, 0] = -v[1]
    out[2, 1] = v[0]


@njit(cache=True)
def composite_kernel(parent, axis, joint_off, com_off, mass, inertia, gravity, q, qd, path):
    """Returns (M*, N*, F*_gravity) in O(n^2)."""
    n = q.size
    R = np.empty((n, 3, 3))
    x = np.empty((n, 3))
    o = np.empty((n, 3))
    a = np.empty((n, 3))
    Om = np.zeros((n, 3))  # world angular velocity
    xd = np.zeros((n, 3))  # CoM velocity
    od = np.zeros((n, 3))  # joint-origin velocity
    ad = np.zeros((n, 3))  # axis rate
    tmp = np.empty(3)
    tmp2 = np.empty(3)
    Rrel = np.empty((3, 3))
    for i in range(n):
        g = axis[i]
        s, c = np.sin(q[i]), np.cos(q[i])
        for r in range(3):
            for k in range(3):
                Rrel[r, k] = (1.0 - c) * g[r] * g[k]
            Rrel[r, r] += c
        Rrel[0, 1] -= s * g[2]
        Rrel[0, 2] += s * g[1]
        Rrel[1, 0] += s * g[2]
        Rrel[1, 2] -= s * g[0]
        Rrel[2, 0] -= s * g[1]
        Rrel[2, 1] += s * g[0]
        p = parent[i]
        if p < 0:
            R[i] = Rrel
            for r in range(3):
                o[i, r] = joint_off[i, r]
        else:
            _mm(R[p], Rrel, R[i])
            _mv(R[p], joint_off[i], tmp)
            for r in range(3):
                o[i, r] = x[p, r] + tmp[r]
                tmp2[r] = o[i, r] - x[p, r]
            _cross(Om[p], tmp2, tmp)
            for r in range(3):
                od[i, r] = xd[p, r] + tmp[r]
                Om[i, r] = Om[p, r]
        _mv(R[i], com_off[i], tmp)
        for r in range(3):
            x[i, r] = o[i, r] + tmp[r]
        _mv(R[i], g, a[i])  # a_i = R_i g_i = R_p g_i
        if p >= 0:
            _cross(Om[p], a[i], ad[i])
        for r in range(3):
            Om[i, r] += a[i, r] * qd[i]
            tmp2[r] = x[i, r] - o[i, r]
        _cross(Om[i], tmp2, tmp)
        for r in range(3):
            xd[i, r] = od[i, r] + tmp[r]
    # joint twists and their rates
    S = np.empty((n, 6))
    Sd = np.empty((n, 6))
    for j in range(n):
        _cross(o[j], a[j], tmp)
        _cross(od[j], a[j], tmp2)
        for r in range(3):
            S[j, r] = a[j, r]
            S[j, 3 + r] = tmp[r]
            Sd[j, r] = ad[j, r]
            Sd[j, 3 + r] = tmp2[r]
        _cross(o[j], ad[j], tmp)
        for r in range(3):
            Sd[j, 3 + r] += tmp[r]
    # per-body spatial inertia K_i and velocity term C_i (right half of C is zero), then subtree composites
    K = np.zeros((n, 6, 6))
    C = np.zeros((n, 6, 3))
    msub = np.zeros(n)
    mx = np.zeros((n, 3))
    X = np.zeros((3, 3))
    Xd = np.zeros((3, 3))
    W = np.zeros((3, 3))
    RJ = np.empty((3, 3))
    Iw = np.empty((3, 3))
    XX = np.empty((3, 3))
    XXd = np.empty((3, 3))
    WI = np.empty((3, 3))
    IW = np.empty((3, 3))
    for i in range(n):
        m = mass[i]
        _mm(R[i], inertia[i], RJ)
        _mmt(RJ, R[i], Iw)  # R J R^T
        _skew_into(x[i], X)
        _skew_into(xd[i], Xd)
        _skew_into(Om[i], W)
        _mm(X, X, XX)
        _mm(X, Xd, XXd)
        _mm(W, Iw, WI)
        _mm(Iw, W, IW)
        for r in range(3):
            for k in range(3):
                K[i, r, k] = Iw[r, k] - m * XX[r, k]
                K[i, r, 3 + k] = m * X[r, k]
                K[i, 3 + r, k] = -m * X[r, k]
                C[i, r, k] = -m * XXd[r, k] + WI[r, k] - IW[r, k]
                C[i, 3 + r, k] = -m * Xd[r, k]
            K[i, 3 + r, 3 + r] = m
        msub[i] = m
        for r in range(3):
            mx[i, r] = m * x[i, r]
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p >= 0:
            K[p] += K[i]
            C[p] += C[i]
            msub[p] += msub[i]
            for r in range(3):
                mx[p, r] += mx[i, r]
    # z_j = K^c_j S_j, w_j = C^c_j^T S_j (C has 3 non-zero columns), y_k = C^c_k S_k + K^c_k S_dot_k
    z = np.zeros((n, 6))
    w = np.zeros((n, 6))
    y = np.zeros((n, 6))
    for j in range(n):
        for r in range(6):
            acc_z = 0.0
            acc_y = 0.0
            for k in range(6):
                acc_z += K[j, r, k] * S[j, k]
                acc_y += K[j, r, k] * Sd[j, k]
            for k in range(3):
                acc_y += C[j, r, k] * S[j, k]
            z[j, r] = acc_z
            y[j, r] = acc_y
        for k in range(3):
            acc = 0.0
            for r in range(6):
                acc += C[j, r, k] * S[j, r]
            w[j, k] = acc
    M = np.zeros((n, n))
    N = np.zeros((n, n))
    Fg = np.zeros(n)
    for j in range(n):
        for r in range(3):
            tmp[r] = mx[j, r] - msub[j] * o[j, r]
        _cross(tmp, gravity, tmp2)
        Fg[j] = a[j, 0] * tmp2[0] + a[j, 1] * tmp2[1] + a[j, 2] * tmp2[2]
        for k in range(j + 1):
            if not path[j, k]:
                continue
            # k is an ancestor of j (or j itself): the deeper joint is j
            mjk = 0.0
            njk = 0.0
            nkj = 0.0
            for r in range(6):
                mjk += z[j, r] * S[k, r]
                njk += z[j, r] * Sd[k, r]
                nkj += S[k, r] * y[j, r]
            for r in range(3):
                njk += w[j, r] * S[k, r]
            M[j, k] = mjk
            M[k, j] = mjk
            N[j, k] = njk
            if k != j:
                N[k, j] = nkj
    return M, N, Fg


@njit(cache=True)
def forward_dynamics_kernel(parent, axis, joint_off, com_off, mass, inertia, gravity, q, qd, path, generalized_force):
    """q_dd = M*^-1 (F*_gravity + generalized_force - N* q_dot); returns (q_dd, ok). ok is False when M* is
    not positive definite (Cholesky fails), so the caller can raise a readable error."""
    M, N, Fg = composite_kernel(parent, axis, joint_off, com_off, mass, inertia, gravity, q, qd, path)
    rhs = Fg + generalized_force - N @ qd
    n = q.size
    # Cholesky by hand: numba's np.linalg.cholesky raises an untyped error we cannot map to a message
    Lc = np.zeros((n, n))
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s -= Lc[j, k] * Lc[j, k]
        if not s > 0.0:
            return np.zeros(n), False
        Lc[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            s = M[i, j]
            for k in range(j):
                s -= Lc[i, k] * Lc[j, k]
            Lc[i, j] = s / Lc[j, j]
    y = np.empty(n)
    for i in range(n):
        s = rhs[i]
        for k in range(i):
            s -= Lc[i, k] * y[k]
        y[i] = s / Lc[i, i]
    out = np.empty(n)
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= Lc[k, i] * out[k]
        out[i] = s / Lc[i, i]
    return out, True


def composite_matrices(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M*, N*, F*_gravity) in O(n^2); the same quantities as dynamics.assemble."""
    q = np.ascontiguousarray(q, dtype=float)
    q_dot = np.ascontiguousarray(q_dot, dtype=float)
    return composite_kernel(*chain_arrays(chain), q, q_dot, np.ascontiguousarray(chain.path))


def composite_forward_dynamics(
    chain: Chain, q: np.ndarray, q_dot: np.ndarray, generalized_force: np.ndarray
) -> tuple[np.ndarray, bool]:
    """(q_dd, ok) = M*^-1 (F*_gravity + generalized_force - N* q_dot); ok False if M* is not SPD."""
    return forward_dynamics_kernel(
        *chain_arrays(chain),
        np.ascontiguousarray(q, dtype=float),
        np.ascontiguousarray(q_dot, dtype=float),
        np.ascontiguousarray(chain.path),
        np.ascontiguousarray(generalized_force, dtype=float),
    )
