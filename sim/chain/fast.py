"""numba kernel for B, B_dot, M*, N* and the gravity part of F*: the same corrected recursion as transfer.py and
dynamics.py, written as explicit loops (tens of microseconds for n = 20 instead of ~1 ms in numpy).

It keeps the paper's structure (B, then B^T M B block sums, O(n^3) for M* and N*); the dynamics use the O(n^2)
composite-body kernel of composite.py. Tests require all three paths to agree to round-off.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sim.chain.model import Chain


@njit(cache=True, inline="always")
def _mv(A, v, out):
    """out = A @ v for 3x3 A (explicit loops: numba allocates for tiny '@')."""
    for r in range(3):
        out[r] = A[r, 0] * v[0] + A[r, 1] * v[1] + A[r, 2] * v[2]


@njit(cache=True, inline="always")
def _mtv(A, v, out):
    """out = A^T @ v."""
    for r in range(3):
        out[r] = A[0, r] * v[0] + A[1, r] * v[1] + A[2, r] * v[2]


@njit(cache=True, inline="always")
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True)
def assemble_kernel(parent, axis, joint_off, com_off, mass, inertia, gravity, q, qd):
    """Returns (M*, N*, F*_gravity, Bx, Bw, Bx_dot, Bw_dot); B blocks laid out (n, 3, n) as in transfer.py.

    Uses the identities of the recursion in vector form: R^(p) T^(i/p) w = -R^(p) (arm_i x w)... i.e.
    T = skew(arm)^T so T w = w x arm; the derivative terms follow transfer.transfer_rate_blocks.
    """
    n = q.size
    R = np.empty((n, 3, 3))
    R_rel = np.empty((n, 3, 3))
    x = np.empty((n, 3))
    tmp = np.empty(3)
    tmp2 = np.empty(3)
    for i in range(n):
        g = axis[i]
        s, c = np.sin(q[i]), np.cos(q[i])
        for r in range(3):  # Rodrigues: c I + s g^ + (1 - c) g g^T
            for k in range(3):
                R_rel[i, r, k] = (1.0 - c) * g[r] * g[k]
            R_rel[i, r, r] += c
        R_rel[i, 0, 1] -= s * g[2]
        R_rel[i, 0, 2] += s * g[1]
        R_rel[i, 1, 0] += s * g[2]
        R_rel[i, 1, 2] -= s * g[0]
        R_rel[i, 2, 0] -= s * g[1]
        R_rel[i, 2, 1] += s * g[0]
        p = parent[i]
        if p < 0:
            R[i] = R_rel[i]
            _mv(R[i], com_off[i], tmp)
            for r in range(3):
                x[i, r] = joint_off[i, r] + tmp[r]
        else:
            R[i] = R[p] @ R_rel[i]
            _mv(R[p], joint_off[i], tmp)
            _mv(R[i], com_off[i], tmp2)
            for r in range(3):
                x[i, r] = x[p, r] + tmp[r] + tmp2[r]
    # column-major blocks (i, j, a) so that each 3-vector is contiguous
    Bx = np.zeros((n, n, 3))
    Bw = np.zeros((n, n, 3))
    Bxd = np.zeros((n, n, 3))
    Bwd = np.zeros((n, n, 3))
    omega = np.zeros((n, 3))
    arm = np.empty(3)
    rel_arm = np.empty(3)
    v1 = np.empty(3)
    v2 = np.empty(3)
    v3 = np.empty(3)
    gd = np.empty(3)
    for i in range(n):
        p = parent[i]
        g = axis[i]
        d = com_off[i]
        _mv(R_rel[i], d, rel_arm)
        for r in range(3):
            arm[r] = rel_arm[r] + joint_off[i, r]
        if p >= 0:
            for j in range(i):
                bw = Bw[p, j]
                _mtv(R_rel[i], bw, Bw[i, j])  # R^(i/p)^T w
                _cross(bw, arm, v1)  # T w = skew(arm)^T w = w x arm
                _mv(R[p], v1, v2)
                for r in range(3):
                    Bx[i, j, r] = Bx[p, j, r] + v2[r]
        for r in range(3):
            Bw[i, i, r] = g[r]
        _cross(g, d, v1)  # skew(d)^T g = g x d
        _mv(R[i], v1, Bx[i, i])
        for j in range(i + 1):
            for r in range(3):
                omega[i, r] += Bw[i, j, r] * qd[j]
        if p >= 0:
            for r in range(3):
                gd[r] = qd[i] * g[r]
            _cross(gd, rel_arm, tmp)  # arm_dot = theta_dot g x R^(i/p) d
            for j in range(i):
                bw = Bw[p, j]
                bwd = Bwd[p, j]
                # Bw_dot_i = -theta_dot g^ R^T bw + R^T bwd
                _mtv(R_rel[i], bw, v1)
                _cross(gd, v1, v2)
                _mtv(R_rel[i], bwd, v3)
                for r in range(3):
                    Bwd[i, j, r] = v3[r] - v2[r]
                # Bx_dot_i = Bx_dot_p + R_p (omega_p^ (bw x arm) + bw x arm_dot + bwd x arm)
                _cross(bw, arm, v1)
                _cross(omega[p], v1, v2)
                _cross(bw, tmp, v1)
                _cross(bwd, arm, v3)
                for r in range(3):
                    v1[r] += v2[r] + v3[r]
                _mv(R[p], v1, v2)
                for r in range(3):
                    Bxd[i, j, r] = Bxd[p, j, r] + v2[r]
        _cross(g, d, v1)
        _cross(omega[i], v1, v2)
        _mv(R[i], v2, Bxd[i, i])
    M = np.zeros((n, n))
    N = np.zeros((n, n))
    Fg = np.zeros(n)
    JBw = np.empty((n, 3))
    gyro = np.empty((n, 3))
    for i in range(n):
        J = inertia[i]
        m = mass[i]
        for k in range(i + 1):
            _mv(J, Bw[i, k], JBw[k])
            _mv(J, Bwd[i, k], v1)
            _cross(omega[i], JBw[k], v2)
            for r in range(3):
                gyro[k, r] = v1[r] + v2[r]
        for j in range(i + 1):
            bxj = Bx[i, j]
            bwj = Bw[i, j]
            Fg[j] += m * (bxj[0] * gravity[0] + bxj[1] * gravity[1] + bxj[2] * gravity[2])
            for k in range(i + 1):
                bxk = Bx[i, k]
                bxdk = Bxd[i, k]
                M[j, k] += m * (bxj[0] * bxk[0] + bxj[1] * bxk[1] + bxj[2] * bxk[2]) + (
                    bwj[0] * JBw[k, 0] + bwj[1] * JBw[k, 1] + bwj[2] * JBw[k, 2]
                )
                N[j, k] += m * (bxj[0] * bxdk[0] + bxj[1] * bxdk[1] + bxj[2] * bxdk[2]) + (
                    bwj[0] * gyro[k, 0] + bwj[1] * gyro[k, 1] + bwj[2] * gyro[k, 2]
                )
    for j in range(n):
        for k in range(j):
            s = 0.5 * (M[j, k] + M[k, j])
            M[j, k] = s
            M[k, j] = s
    return (
        M,
        N,
        Fg,
        Bx.transpose(0, 2, 1).copy(),
        Bw.transpose(0, 2, 1).copy(),
        Bxd.transpose(0, 2, 1).copy(),
        Bwd.transpose(0, 2, 1).copy(),
    )


def chain_arrays(chain: Chain) -> tuple:
    """The chain's arrays in the kernels' argument order (parent ... gravity), contiguous."""
    return (
        np.ascontiguousarray(chain.parent),
        np.ascontiguousarray(chain.joint_axis),
        np.ascontiguousarray(chain.joint_offset_m),
        np.ascontiguousarray(chain.com_offset_m),
        np.ascontiguousarray(chain.mass_kg),
        np.ascontiguousarray(chain.inertia_kg_m2),
        np.ascontiguousarray(chain.gravity_m_s2),
    )


def eom_matrices(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M*, N*, F*_gravity) by the numba kernel; the base frame is the world (as in assemble)."""
    M, N, Fg, *_ = assemble_kernel(
        *chain_arrays(chain), np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(q_dot, dtype=float)
    )
    return M, N, Fg
