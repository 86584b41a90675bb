"""Constraint-violation projection of Sec. VII-C, shared by the reference and the fast step.

After a step the velocity-level laws leave a small drift in the joint gaps (eq. 12–13) and the quaternion norms.
Link 1 stays fixed; going down the chain, each link is first turned about its own e_z axis until the rotational gap
g_Jφ = (e_y^{B_i})ᵀ e_x^{B_{i+1}} vanishes, then translated until the joint positions coincide.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.snake3d.rotations import quat_multiply, quat_to_matrix


@njit(cache=True)
def normalize_quaternions(quat: np.ndarray) -> None:
    for i in range(quat.shape[0]):
        s = math.sqrt(quat[i, 0] ** 2 + quat[i, 1] ** 2 + quat[i, 2] ** 2 + quat[i, 3] ** 2)
        for k in range(4):
            quat[i, k] /= s


@njit(cache=True)
def project_joint_constraints(position: np.ndarray, quat: np.ndarray, link_length_m: float) -> None:
    """In place: renormalise quaternions, then make every g_J exactly zero keeping link 1 fixed."""
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
