"""The joint angles and rates of the 3D snake, compiled: what a joint-space plant (HIL's emulated joint modules)
reads at every physics sub-step.

The readable definitions are :func:`sim.snake3d.kinematics.joint_angles` and :func:`~.joint_rates` (eq. 63,
65–67); this is the same arithmetic in one numba kernel without the per-link rotation matrices as a Python list
(in a lockstep HIL run that list comprehension was 40 % of the time). Tests compare the two to 1e-12.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.snake3d.rotations import quat_to_matrix


@njit(cache=True)
def _joint_state(quat: np.ndarray, omega_body: np.ndarray, angles: np.ndarray, rates: np.ndarray) -> None:
    n = quat.shape[0]
    relative = np.empty(3)
    R_prev = quat_to_matrix(quat[0])
    for i in range(n - 1):
        R_next = quat_to_matrix(quat[i + 1])
        # rel = R_iᵀ R_{i+1}: only its last row is needed (eq. 65–66)
        r20 = R_prev[0, 2] * R_next[0, 0] + R_prev[1, 2] * R_next[1, 0] + R_prev[2, 2] * R_next[2, 0]
        r21 = R_prev[0, 2] * R_next[0, 1] + R_prev[1, 2] * R_next[1, 1] + R_prev[2, 2] * R_next[2, 1]
        r22 = R_prev[0, 2] * R_next[0, 2] + R_prev[1, 2] * R_next[1, 2] + R_prev[2, 2] * R_next[2, 2]
        angles[i, 0] = -math.asin(min(1.0, max(-1.0, r20)))
        angles[i, 1] = math.atan2(r21, r22)
        # relative angular velocity in I, projected on e_y^{B_i} and e_x^{B_{i+1}} (eq. 67)
        for k in range(3):
            w = 0.0
            for j in range(3):
                w += R_next[k, j] * omega_body[i + 1, j] - R_prev[k, j] * omega_body[i, j]
            relative[k] = w
        rates[i, 0] = relative[0] * R_prev[0, 1] + relative[1] * R_prev[1, 1] + relative[2] * R_prev[2, 1]
        rates[i, 1] = relative[0] * R_next[0, 0] + relative[1] * R_next[1, 0] + relative[2] * R_next[2, 0]
        R_prev = R_next


def joint_state(quat: np.ndarray, omega_body: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(angles (n−1, 2) [α_h, α_v] rad, rates (n−1, 2) rad/s) of the links' quaternions (n, 4) and body rates."""
    n = quat.shape[0]
    angles = np.empty((n - 1, 2))
    rates = np.empty((n - 1, 2))
    _joint_state(np.ascontiguousarray(quat, dtype=np.float64), np.ascontiguousarray(omega_body, dtype=np.float64),
                 angles, rates)  # fmt: skip
    return angles, rates
