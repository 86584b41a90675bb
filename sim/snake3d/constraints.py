"""Constraint-violation projection of Sec. VII-C, shared by the reference and the fast step.

After a step the velocity-level laws leave a small drift in the joint gaps (eq. 12–13) and the quaternion norms.
Link 1 stays fixed; going down the chain, each link is first turned about its own e_z axis until the rotational gap
g_Jφ = (e_y^{B_i})ᵀ e_x^{B_{i+1}} vanishes, then translated until the joint positions coincide.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.snake3d.rotations import quat_multiply, quat_to_matrix, quat_to_matrix_into


@njit(cache=True)
def normalize_quaternions(quat: np.ndarray) -> None:
    for i in range(quat.shape[0]):
        s = math.sqrt(quat[i, 0] ** 2 + quat[i, 1] ** 2 + quat[i, 2] ** 2 + quat[i, 3] ** 2)
        for k in range(4):
            quat[i, k] /= s


@njit(cache=True)
def project_joint_constraints(position: np.ndarray, quat: np.ndarray, link_length_m: float) -> None:
    """In place: renormalise quaternions, then make every g_J exactly zero keeping link 1 fixed.

    Scalar arithmetic in the order of the vector form (kept as :func:`project_joint_constraints_vector`): every
    small numpy array allocated inside numba costs ~50 ns, and this runs for every link at every step."""
    normalize_quaternions(quat)
    n = position.shape[0]
    half = 0.5 * link_length_m
    R_prev = np.empty((3, 3))
    R = np.empty((3, 3))
    quat_to_matrix_into(quat[0], R_prev)
    for j in range(n - 1):
        quat_to_matrix_into(quat[j + 1], R)
        a0, a1, a2 = R_prev[0, 1], R_prev[1, 1], R_prev[2, 1]
        z0, z1, z2 = R[0, 2], R[1, 2], R[2, 2]
        y0, y1, y2 = R[0, 1], R[1, 1], R[2, 1]
        az = a0 * z0 + a1 * z1 + a2 * z2
        ap0, ap1, ap2 = a0 - az * z0, a1 - az * z1, a2 - az * z2
        sign = 1.0 if (ap0 * y0 + ap1 * y1 + ap2 * y2) >= 0.0 else -1.0
        norm = math.sqrt(ap0**2 + ap1**2 + ap2**2)
        n0, n1, n2 = sign * ap0 / norm, sign * ap1 / norm, sign * ap2 / norm
        c0 = y1 * n2 - y2 * n1
        c1 = y2 * n0 - y0 * n2
        c2 = y0 * n1 - y1 * n0
        sin_t = c0 * z0 + c1 * z1 + c2 * z2
        cos_t = y0 * n0 + y1 * n1 + y2 * n2
        theta = math.atan2(sin_t, cos_t)
        # p = quat[j+1] ⊗ (cos θ/2, 0, 0, sin θ/2) (quat_multiply with b1 = b2 = 0)
        b0 = math.cos(0.5 * theta)
        b3 = math.sin(0.5 * theta)
        q0, q1, q2, q3 = quat[j + 1, 0], quat[j + 1, 1], quat[j + 1, 2], quat[j + 1, 3]
        p0 = q0 * b0 - q1 * 0.0 - q2 * 0.0 - q3 * b3
        p1 = q0 * 0.0 + q1 * b0 + q2 * b3 - q3 * 0.0
        p2 = q0 * 0.0 - q1 * b3 + q2 * b0 + q3 * 0.0
        p3 = q0 * b3 + q1 * 0.0 - q2 * 0.0 + q3 * b0
        s = math.sqrt(p0**2 + p1**2 + p2**2 + p3**2)
        quat[j + 1, 0] = p0 / s
        quat[j + 1, 1] = p1 / s
        quat[j + 1, 2] = p2 / s
        quat[j + 1, 3] = p3 / s
        quat_to_matrix_into(quat[j + 1], R)
        for k in range(3):
            position[j + 1, k] = position[j, k] + half * (R_prev[k, 2] + R[k, 2])
        R_prev, R = R, R_prev


@njit(cache=True)
def project_joint_constraints_vector(position: np.ndarray, quat: np.ndarray, link_length_m: float) -> None:
    """The readable vector form of :func:`project_joint_constraints` (the tests check the two agree bit for bit)."""
    normalize_quaternions(quat)
    n = position.shape[0]
    half = 0.5 * link_length_m
    R_prev = quat_to_matrix(quat[0])
    qz = np.zeros(4)
    for j in range(n - 1):
        R = quat_to_matrix(quat[j + 1])
        a = R_prev[:, 1]
        z = R[:, 2]
        y_old = R[:, 1]
        az = a[0] * z[0] + a[1] * z[1] + a[2] * z[2]
        ap = a - az * z
        sign = 1.0 if (ap[0] * y_old[0] + ap[1] * y_old[1] + ap[2] * y_old[2]) >= 0.0 else -1.0
        y_new = sign * ap / math.sqrt(ap[0] ** 2 + ap[1] ** 2 + ap[2] ** 2)
        cross = np.array(
            [
                y_old[1] * y_new[2] - y_old[2] * y_new[1],
                y_old[2] * y_new[0] - y_old[0] * y_new[2],
                y_old[0] * y_new[1] - y_old[1] * y_new[0],
            ]
        )
        sin_t = cross[0] * z[0] + cross[1] * z[1] + cross[2] * z[2]
        cos_t = y_old[0] * y_new[0] + y_old[1] * y_new[1] + y_old[2] * y_new[2]
        theta = math.atan2(sin_t, cos_t)
        qz[0] = math.cos(0.5 * theta)
        qz[3] = math.sin(0.5 * theta)
        p = quat_multiply(quat[j + 1], qz)
        s = math.sqrt(p[0] ** 2 + p[1] ** 2 + p[2] ** 2 + p[3] ** 2)
        for k in range(4):
            quat[j + 1, k] = p[k] / s
        R = quat_to_matrix(quat[j + 1])
        for k in range(3):
            position[j + 1, k] = position[j, k] + half * (R_prev[k, 2] + R[k, 2])
        R_prev = R
