"""The UR3 kinematics of ``kinematics.py``, compiled (numba, cached): what the emulated controller runs every tick.

Why: a servoL / servoJ program makes the controller solve the inverse kinematics and check the safety limits every
2 ms. In numpy that cost ~1.5 ms of CPU per tick under ur_rtde's own realtime example (85 % of a core; the numpy
calls on 4x4 and 6x6 arrays are all overhead), and an emulator that busy sits at real-time priority on a lab PC
starves everything below it. Compiled, the same work is a few tens of microseconds.

The numpy functions in ``kinematics.py`` stay the readable reference: tests/aiko/devices/ur/test_kinematics_compiled.py
holds these equal to them (forward kinematics, Jacobian and the inverse's iterates, to 1e-12). The operations follow
the reference's order; the inverse is the same damped least-squares iteration with the same step cap and tolerances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit

from aiko.devices.ur.kinematics import IKError, URModel

__all__ = ["forward_kinematics", "inverse", "model_table", "solve_inverse", "warm_up"]


def model_table(model: URModel) -> np.ndarray:
    """The model's (d, a, cos alpha, sin alpha) per joint, the compiled functions' form of it (6 x 4)."""
    return np.column_stack([model.d, model.a, np.cos(model.alpha), np.sin(model.alpha)]).astype(np.float64)


@njit(cache=True)
def _rotvec_to_matrix(x: float, y: float, z: float) -> np.ndarray:  # kinematics.rotvec_to_matrix
    angle_sq = x * x + y * y + z * z
    if angle_sq < 1e-12:
        s, c = 1.0 - angle_sq / 6.0, 0.5 - angle_sq / 24.0
    else:
        angle = math.sqrt(angle_sq)
        s, c = math.sin(angle) / angle, (1.0 - math.cos(angle)) / angle_sq
    r = np.empty((3, 3))
    r[0, 0], r[0, 1], r[0, 2] = 1.0 - c * (y * y + z * z), c * x * y - s * z, c * x * z + s * y
    r[1, 0], r[1, 1], r[1, 2] = c * x * y + s * z, 1.0 - c * (x * x + z * z), c * y * z - s * x
    r[2, 0], r[2, 1], r[2, 2] = c * x * z - s * y, c * y * z + s * x, 1.0 - c * (x * x + y * y)
    return r


@njit(cache=True)
def _matrix_to_rotvec(r: np.ndarray) -> np.ndarray:  # kinematics.matrix_to_rotvec
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    sin_2 = math.sqrt(vee[0] * vee[0] + vee[1] * vee[1] + vee[2] * vee[2])
    cos_2 = r[0, 0] + r[1, 1] + r[2, 2] - 1.0
    angle = math.atan2(sin_2, cos_2)
    if angle < 1e-6:
        return vee * (0.5 * (1.0 + angle * angle / 6.0))
    if angle <= 0.5 * math.pi:
        return vee * (angle / sin_2)
    best, k = -1.0, 0
    for i in range(3):
        diag = r[i, i] - 0.5 * cos_2
        if diag > best:
            best, k = diag, i
    column = np.empty(3)
    for i in range(3):
        column[i] = 0.5 * (r[i, k] + r[k, i]) - (0.5 * cos_2 if i == k else 0.0)
    axis = column / math.sqrt(column[0] * column[0] + column[1] * column[1] + column[2] * column[2])
    if axis[0] * vee[0] + axis[1] * vee[1] + axis[2] * vee[2] < 0.0:
        axis = -axis
    return axis * angle


@njit(cache=True)
def pose_matrix(pose: np.ndarray) -> np.ndarray:
    """kinematics.pose_to_matrix, compiled."""
    t = np.eye(4)
    t[:3, :3] = _rotvec_to_matrix(pose[3], pose[4], pose[5])
    t[0, 3], t[1, 3], t[2, 3] = pose[0], pose[1], pose[2]
    return t


@njit(cache=True)
def _frames(table: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Frames 0..6 (7 x 4 x 4), as kinematics.joint_frames."""
    frames = np.zeros((7, 4, 4))
    frames[0] = np.eye(4)
    link = np.zeros((4, 4))
    link[3, 3] = 1.0
    for i in range(6):
        d, a, ca, sa = table[i, 0], table[i, 1], table[i, 2], table[i, 3]
        ct, st = math.cos(q[i]), math.sin(q[i])
        link[0, 0], link[0, 1], link[0, 2], link[0, 3] = ct, -st * ca, st * sa, a * ct
        link[1, 0], link[1, 1], link[1, 2], link[1, 3] = st, ct * ca, -ct * sa, a * st
        link[2, 0], link[2, 1], link[2, 2], link[2, 3] = 0.0, sa, ca, d
        frames[i + 1] = frames[i] @ link
    return frames


@njit(cache=True)
def _jacobian(frames: np.ndarray, tip: np.ndarray) -> np.ndarray:
    """kinematics._jacobian_from_frames: rows v (z_i x (p_tip - p_i)) then w (z_i), one column per joint."""
    jac = np.empty((6, 6))
    for i in range(6):
        zx, zy, zz = frames[i, 0, 2], frames[i, 1, 2], frames[i, 2, 2]
        dx, dy, dz = tip[0, 3] - frames[i, 0, 3], tip[1, 3] - frames[i, 1, 3], tip[2, 3] - frames[i, 2, 3]
        jac[0, i] = zy * dz - zz * dy
        jac[1, i] = zz * dx - zx * dz
        jac[2, i] = zx * dy - zy * dx
        jac[3, i], jac[4, i], jac[5, i] = zx, zy, zz
    return jac


@njit(cache=True)
def forward_kinematics(
    table: np.ndarray, q: np.ndarray, tcp_offset: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(TCP pose [x, y, z, rx, ry, rz], flange 4x4, TCP Jacobian 6x6, TCP 4x4, elbow position, flange pose, flange
    Jacobian) of joints ``q``: everything a controller tick asks of one joint position."""
    frames = _frames(table, q)
    tip = frames[6] @ pose_matrix(tcp_offset)
    pose = np.empty(6)
    pose[:3] = tip[:3, 3]
    pose[3:] = _matrix_to_rotvec(np.ascontiguousarray(tip[:3, :3]))
    flange = frames[6].copy()
    flange_pose = np.empty(6)
    flange_pose[:3] = flange[:3, 3]
    flange_pose[3:] = _matrix_to_rotvec(np.ascontiguousarray(flange[:3, :3]))
    elbow = frames[1, :3, 3].copy()
    return pose, flange, _jacobian(frames, tip), tip, elbow, flange_pose, _jacobian(frames, flange)


@njit(cache=True)
def inverse(
    table: np.ndarray,
    target: np.ndarray,
    q_near: np.ndarray,
    tcp_offset: np.ndarray,
    tol_m: float,
    tol_rad: float,
    max_iter: int,
    damping: float,
) -> tuple[np.ndarray, bool]:
    """kinematics.inverse's damped least squares from ``q_near`` to the 4x4 ``target``: (joints, converged). The
    caller wraps the joints to the turn nearest the seed and raises when not converged."""
    tcp = pose_matrix(tcp_offset)
    q = q_near.copy()
    lam2 = damping * damping
    err = np.empty(6)
    target_rotation = np.ascontiguousarray(target[:3, :3])
    for _ in range(max_iter):
        frames = _frames(table, q)
        tip = frames[6] @ tcp
        err[:3] = target[:3, 3] - tip[:3, 3]
        err[3:] = _matrix_to_rotvec(target_rotation @ np.ascontiguousarray(tip[:3, :3].T))
        if math.sqrt(err[0] ** 2 + err[1] ** 2 + err[2] ** 2) < tol_m and (
            math.sqrt(err[3] ** 2 + err[4] ** 2 + err[5] ** 2) < tol_rad
        ):
            return q, True
        jac = _jacobian(frames, tip)
        step = jac.T @ np.linalg.solve(jac @ jac.T + lam2 * np.eye(6), err)
        norm = math.sqrt(np.sum(step * step))
        if norm > 0.5:
            step *= 0.5 / norm
        q = q + step
    return q, False


def solve_inverse(
    model: URModel, table: np.ndarray, pose: Sequence[float] | np.ndarray, q_near: np.ndarray, tcp_offset: np.ndarray
) -> np.ndarray:
    """kinematics.inverse (same tolerances and defaults), compiled: the joints reaching ``pose`` nearest ``q_near``,
    wrapped to the turn nearest the seed; IKError when the iteration does not converge."""
    seed = np.asarray(q_near, dtype=np.float64)
    p = np.asarray(pose, dtype=np.float64)
    q, converged = inverse(table, pose_matrix(p), seed, np.asarray(tcp_offset, dtype=np.float64), 1e-7, 1e-6, 200, 1e-3)
    if not converged:
        raise IKError(f"no inverse kinematics solution for pose {np.round(p, 5).tolist()}")
    return _nearest_turn(q, seed, np.asarray(model.joint_min_rad), np.asarray(model.joint_max_rad))


@njit(cache=True)
def _nearest_turn(q: np.ndarray, q_near: np.ndarray, q_min: np.ndarray, q_max: np.ndarray) -> np.ndarray:
    """kinematics.nearest_turn, compiled."""
    out = q.copy()
    for i in range(6):
        delta = q[i] - q_near[i]
        out[i] = q_near[i] + math.atan2(math.sin(delta), math.cos(delta))
        if out[i] > q_max[i]:
            out[i] -= 2.0 * math.pi
        elif out[i] < q_min[i]:
            out[i] += 2.0 * math.pi
    return out


def warm_up() -> None:
    """Load (or, on an empty cache, compile) every kernel here, so a controller tick never waits for it: through the
    entry points the controller calls, since each compiled function called from Python loads its own cache entry
    (``pose_matrix``, called at the top of ``solve_inverse``, was left out and loaded inside the first tick of a
    motion: 7-9 ms, the one late tick of a quiet HIL bench run)."""
    from aiko.devices.ur.kinematics import UR3

    table, q, tcp = model_table(UR3), np.full(6, 0.3), np.zeros(6)
    pose = forward_kinematics(table, q, tcp)[0]
    solve_inverse(UR3, table, pose, q, tcp)
