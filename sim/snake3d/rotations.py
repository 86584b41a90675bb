"""Unit quaternions (Euler parameters, wxyz) and rotation matrices, eq. 6–8.

Written as scalar loops so that the same functions are compiled by numba for the fast step and run as plain Python
(``.py_func``) in the reference step.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def quat_to_matrix_into(p: np.ndarray, R: np.ndarray) -> None:
    """R^I_B = H H̄ᵀ of eq. 6 for p = (e0, e1, e2, e3), written into R (3×3) without allocating: the fast step
    calls it for every link at every step."""
    w, x, y, z = p[0], p[1], p[2], p[3]
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - w * z)
    R[0, 2] = 2 * (x * z + w * y)
    R[1, 0] = 2 * (x * y + w * z)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - w * x)
    R[2, 0] = 2 * (x * z - w * y)
    R[2, 1] = 2 * (y * z + w * x)
    R[2, 2] = 1 - 2 * (x * x + y * y)


@njit(cache=True)
def quat_to_matrix(p: np.ndarray) -> np.ndarray:
    """R^I_B = H H̄ᵀ of eq. 6 for p = (e0, e1, e2, e3)."""
    R = np.empty((3, 3))
    quat_to_matrix_into(p, R)
    return R


@njit(cache=True)
def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    out[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3]
    out[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2]
    out[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1]
    out[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]
    return out


@njit(cache=True)
def quat_rate(p: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """ṗ = ½ H̄ᵀ ω_B (the kinematic relation used in eq. 72–74), i.e. ½ p ⊗ (0, ω_B)."""
    w, x, y, z = p[0], p[1], p[2], p[3]
    ox, oy, oz = omega_body[0], omega_body[1], omega_body[2]
    out = np.empty(4)
    out[0] = 0.5 * (-x * ox - y * oy - z * oz)
    out[1] = 0.5 * (w * ox + y * oz - z * oy)
    out[2] = 0.5 * (w * oy + z * ox - x * oz)
    out[3] = 0.5 * (w * oz + x * oy - y * ox)
    return out


@njit(cache=True)
def quat_about_axis(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    out = np.empty(4)
    h = 0.5 * angle_rad
    s = math.sin(h)
    out[0] = math.cos(h)
    out[1] = axis[0] * s
    out[2] = axis[1] * s
    out[3] = axis[2] * s
    return out


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Shepperd's method; the sign is chosen with e0 >= 0."""
    tr = np.trace(R)
    cands = np.array([tr, R[0, 0], R[1, 1], R[2, 2]])
    k = int(np.argmax(cands))
    if k == 0:
        w = 0.5 * math.sqrt(1 + tr)
        q = [w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)]
    elif k == 1:
        x = 0.5 * math.sqrt(1 + 2 * R[0, 0] - tr)
        q = [(R[2, 1] - R[1, 2]) / (4 * x), x, (R[0, 1] + R[1, 0]) / (4 * x), (R[0, 2] + R[2, 0]) / (4 * x)]
    elif k == 2:
        y = 0.5 * math.sqrt(1 + 2 * R[1, 1] - tr)
        q = [(R[0, 2] - R[2, 0]) / (4 * y), (R[0, 1] + R[1, 0]) / (4 * y), y, (R[1, 2] + R[2, 1]) / (4 * y)]
    else:
        z = 0.5 * math.sqrt(1 + 2 * R[2, 2] - tr)
        q = [(R[1, 0] - R[0, 1]) / (4 * z), (R[0, 2] + R[2, 0]) / (4 * z), (R[1, 2] + R[2, 1]) / (4 * z), z]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1.0, 0], [-s, 0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def skew(v: np.ndarray) -> np.ndarray:
    """ṽ of eq. 7: skew(v) @ w = v × w."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
