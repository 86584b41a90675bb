"""The UR3's kinematic model: DH forward kinematics, the geometric Jacobian, a damped-least-squares inverse, limits.

Facts and where they come from:

* DH parameters: Universal Robots' article "DH parameters for calculations of kinematics and dynamics"
  (universal-robots.com, application-installation section). UR3 (CB3): d1 = 0.1519, a2 = -0.24365,
  a3 = -0.21325, d4 = 0.11235, d5 = 0.08535, d6 = 0.0819 m; UR3e: d1 = 0.15185, a2 = -0.24355, a3 = -0.2132,
  d4 = 0.13105, d5 = 0.08535, d6 = 0.0921 m; alpha = [pi/2, 0, 0, pi/2, -pi/2, 0] for both. These are the
  nominal values; every real arm carries its own calibration, so a real arm's reported pose differs from this
  model by up to a few millimetres.
* Poses are UR's ``p[x, y, z, rx, ry, rz]``: metres in the base frame and a rotation vector (axis times angle,
  radians), as the RTDE ``actual_TCP_pose`` output and URScript use them.
* Joint position range: +-360 deg on every UR3 joint (UR3 user manual, technical specifications; the UR3's
  wrist 3 is infinite in hardware, but the controller's safety limits it to +-360 deg like the others).
* Joint speed limits: 180 deg/s for base, shoulder and elbow, 360 deg/s for the three wrists (UR3 user manual,
  technical specifications).

The inverse is damped least squares from a seed (the current joints), not UR's closed form with its eight
branches: seeding from the current joints picks the solution nearest them, which is what ``get_inverse_kin``
does on the controller for servoL / moveL steps, and it needs no branch bookkeeping. numpy does the linear algebra;
there is no maintained UR kinematics package on PyPI we could lean on (the ``ur_ikfast`` builds are per-platform
C++ extensions).

The rotation-vector conversions are written out here rather than taken from scipy's ``Rotation``: they run several
times in every 2 ms controller tick (servoL's inverse, the safety check, the published pose), and scipy's per-call
overhead (~20 us for one rotation) made them a fifth of the emulator's CPU under ur_rtde's realtime example. They
are tested equal to scipy's to 1e-12 (tests/aiko/devices/ur/test_kinematics.py), the angle-near-pi case included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aiko.core.errors import AikoError


class IKError(AikoError):
    """A pose the inverse kinematics cannot reach from the given seed (out of reach, or through a singularity)."""


@dataclass(frozen=True)
class URModel:
    """One UR arm's nominal geometry and joint limits (SI units: metres, radians, seconds)."""

    name: str
    d: tuple[float, float, float, float, float, float]
    a: tuple[float, float, float, float, float, float]
    alpha: tuple[float, float, float, float, float, float]
    joint_min_rad: tuple[float, ...]
    joint_max_rad: tuple[float, ...]
    joint_speed_max_rad_s: tuple[float, ...]

    def dh(self) -> np.ndarray:
        """Rows of (d, a, alpha) per joint."""
        return np.column_stack([self.d, self.a, self.alpha])


_ALPHA = (np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0)
_FULL_TURN = 2 * np.pi
_UR3_SPEEDS = (np.pi, np.pi, np.pi, 2 * np.pi, 2 * np.pi, 2 * np.pi)

UR3 = URModel(
    name="UR3",
    d=(0.1519, 0.0, 0.0, 0.11235, 0.08535, 0.0819),
    a=(0.0, -0.24365, -0.21325, 0.0, 0.0, 0.0),
    alpha=_ALPHA,
    joint_min_rad=(-_FULL_TURN,) * 6,
    joint_max_rad=(_FULL_TURN,) * 6,
    joint_speed_max_rad_s=_UR3_SPEEDS,
)

UR3E = URModel(
    name="UR3e",
    d=(0.15185, 0.0, 0.0, 0.13105, 0.08535, 0.0921),
    a=(0.0, -0.24355, -0.2132, 0.0, 0.0, 0.0),
    alpha=_ALPHA,
    joint_min_rad=(-_FULL_TURN,) * 6,
    joint_max_rad=(_FULL_TURN,) * 6,
    joint_speed_max_rad_s=_UR3_SPEEDS,
)

MODELS = {"ur3": UR3, "ur3e": UR3E}


def _dh_transform(theta: float, d: float, a: float, alpha: float) -> np.ndarray:
    ct, st, ca, sa = math.cos(theta), math.sin(theta), math.cos(alpha), math.sin(alpha)
    return np.array(
        [
            [ct, -st * ca, st * sa, a * ct],
            [st, ct * ca, -ct * sa, a * st],
            [0.0, sa, ca, d],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def joint_frames(model: URModel, q: np.ndarray) -> list[np.ndarray]:
    """Base-frame transforms of frame 0 (the base) through frame 6 (the flange), seven 4x4 matrices."""
    frames = [np.eye(4)]
    for i in range(6):
        frames.append(frames[-1] @ _dh_transform(float(q[i]), model.d[i], model.a[i], model.alpha[i]))
    return frames


def _tip(frames: list[np.ndarray], tcp_offset: np.ndarray | None) -> np.ndarray:
    return frames[-1] if tcp_offset is None else frames[-1] @ pose_to_matrix(tcp_offset)


def _jacobian_from_frames(frames: list[np.ndarray], tip: np.ndarray) -> np.ndarray:
    stack = np.stack(frames[:6])
    z = stack[:, :3, 2]
    jac = np.empty((6, 6))
    jac[:3] = np.cross(z, tip[:3, 3] - stack[:, :3, 3]).T
    jac[3:] = z.T
    return jac


def rotvec_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: the 3x3 rotation of a rotation vector (axis times angle in radians)."""
    x, y, z = float(rotvec[0]), float(rotvec[1]), float(rotvec[2])
    angle_sq = x * x + y * y + z * z
    if angle_sq < 1e-12:  # Taylor terms: sin(a)/a = 1 - a^2/6, (1 - cos a)/a^2 = 1/2 - a^2/24 (error < 1e-25)
        s, c = 1.0 - angle_sq / 6.0, 0.5 - angle_sq / 24.0
    else:
        angle = math.sqrt(angle_sq)
        s, c = math.sin(angle) / angle, (1.0 - math.cos(angle)) / angle_sq
    return np.array(
        [
            [1.0 - c * (y * y + z * z), c * x * y - s * z, c * x * z + s * y],
            [c * x * y + s * z, 1.0 - c * (x * x + z * z), c * y * z - s * x],
            [c * x * z - s * y, c * y * z + s * x, 1.0 - c * (x * x + y * y)],
        ]
    )


def matrix_to_rotvec(rotation: np.ndarray) -> np.ndarray:
    """The rotation vector (angle in [0, pi]) of a 3x3 rotation matrix.

    The angle comes from atan2(|sin|, cos), accurate at every angle; the axis from the antisymmetric part while the
    angle is at most pi/2, and from the symmetric part beyond (where the antisymmetric part vanishes towards pi).
    Written on Python floats: the bench's flange points down (angle near pi), and the symmetric branch in numpy
    (a 3x3 sum, an identity, an argmax) took 28 us a call, twice per bench control period."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = rotation.tolist()
    v0, v1, v2 = r21 - r12, r02 - r20, r10 - r01  # 2 sin(angle) axis
    sin_2 = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    cos_2 = (r00 + r11 + r22) - 1.0  # 2 cos(angle)
    angle = math.atan2(sin_2, cos_2)
    if angle < 1e-6:  # angle / sin(angle) = 1 + angle^2 / 6
        scale = 0.5 * (1.0 + angle * angle / 6.0)
        return np.array([v0 * scale, v1 * scale, v2 * scale])
    if angle <= 0.5 * math.pi:
        scale = angle / sin_2
        return np.array([v0 * scale, v1 * scale, v2 * scale])
    # (1 - cos(angle)) axis axis^T = (R + R^T) / 2 - cos(angle) I, with 1 - cos(angle) >= 1 here: its column of
    # largest diagonal is the axis times a number far from 0
    cos_angle = 0.5 * cos_2
    diagonal = (r00 - cos_angle, r11 - cos_angle, r22 - cos_angle)
    k = diagonal.index(max(diagonal))
    if k == 0:
        column = (diagonal[0], 0.5 * (r10 + r01), 0.5 * (r20 + r02))
    elif k == 1:
        column = (0.5 * (r01 + r10), diagonal[1], 0.5 * (r21 + r12))
    else:
        column = (0.5 * (r02 + r20), 0.5 * (r12 + r21), diagonal[2])
    c0, c1, c2 = column
    scale = angle / math.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
    if c0 * v0 + c1 * v1 + c2 * v2 < 0.0:
        scale = -scale
    return np.array([c0 * scale, c1 * scale, c2 * scale])


def pose_to_matrix(pose: np.ndarray | list[float]) -> np.ndarray:
    """UR ``p[x, y, z, rx, ry, rz]`` to a 4x4 homogeneous transform."""
    p = np.asarray(pose, dtype=float)
    t = np.eye(4)
    t[:3, :3] = rotvec_to_matrix(p[3:6])
    t[:3, 3] = p[:3]
    return t


def matrix_to_pose(t: np.ndarray) -> np.ndarray:
    """A 4x4 transform to UR's ``[x, y, z, rx, ry, rz]`` (rotation vector with angle in [0, pi])."""
    return np.concatenate([t[:3, 3], matrix_to_rotvec(t[:3, :3])])


def flange_matrix(model: URModel, q: np.ndarray) -> np.ndarray:
    """Base-to-flange transform (UR's tool0 with a zero TCP offset)."""
    return joint_frames(model, q)[-1]


def forward(model: URModel, q: np.ndarray, tcp_offset: np.ndarray | None = None) -> np.ndarray:
    """The TCP pose ``[x, y, z, rx, ry, rz]`` of joints ``q``; ``tcp_offset`` is the flange-to-TCP pose (set_tcp)."""
    t = flange_matrix(model, q)
    if tcp_offset is not None:
        t = t @ pose_to_matrix(tcp_offset)
    return matrix_to_pose(t)


def jacobian(model: URModel, q: np.ndarray, tcp_offset: np.ndarray | None = None) -> np.ndarray:
    """The 6x6 geometric Jacobian at the TCP in the base frame: rows vx, vy, vz, wx, wy, wz per unit joint speed."""
    frames = joint_frames(model, q)
    return _jacobian_from_frames(frames, _tip(frames, tcp_offset))


def pose_error(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Twist-like error from ``current`` to ``target`` 4x4 transforms: translation (m) and rotation vector (rad),
    both in the base frame."""
    dp = target[:3, 3] - current[:3, 3]
    dr = matrix_to_rotvec(target[:3, :3] @ current[:3, :3].T)
    return np.concatenate([dp, dr])


def inverse(
    model: URModel,
    pose: np.ndarray | list[float],
    q_near: np.ndarray,
    tcp_offset: np.ndarray | None = None,
    *,
    tol_m: float = 1e-7,
    tol_rad: float = 1e-6,
    max_iter: int = 200,
    damping: float = 1e-3,
) -> np.ndarray:
    """Joints reaching ``pose`` nearest the seed ``q_near`` (damped least squares; raises IKError when it does not
    converge). The result is wrapped to the joint range by whole turns towards the seed."""
    target = pose_to_matrix(pose)
    q = np.asarray(q_near, dtype=float).copy()
    lam2 = damping**2
    for _ in range(max_iter):
        frames = joint_frames(model, q)
        tip = _tip(frames, tcp_offset)
        err = pose_error(tip, target)
        if np.linalg.norm(err[:3]) < tol_m and np.linalg.norm(err[3:]) < tol_rad:
            return _nearest_turn(model, q, np.asarray(q_near, dtype=float))
        jac = _jacobian_from_frames(frames, tip)
        step = jac.T @ np.linalg.solve(jac @ jac.T + lam2 * np.eye(6), err)
        # Cap a single step so a far target does not throw the iteration across a singularity.
        norm = np.linalg.norm(step)
        if norm > 0.5:
            step *= 0.5 / norm
        q = q + step
    raise IKError(f"no inverse kinematics solution for pose {np.round(np.asarray(pose, dtype=float), 5).tolist()}")


def _nearest_turn(model: URModel, q: np.ndarray, q_near: np.ndarray) -> np.ndarray:
    """Add whole turns so each joint lies nearest its seed and inside the joint range."""
    out = q.copy()
    for i in range(6):
        out[i] = q_near[i] + np.arctan2(np.sin(q[i] - q_near[i]), np.cos(q[i] - q_near[i]))
        if out[i] > model.joint_max_rad[i]:
            out[i] -= _FULL_TURN
        elif out[i] < model.joint_min_rad[i]:
            out[i] += _FULL_TURN
    return out


def within_joint_limits(model: URModel, q: np.ndarray) -> bool:
    """True when every joint lies inside the model's position range."""
    return bool(np.all(q >= np.asarray(model.joint_min_rad)) and np.all(q <= np.asarray(model.joint_max_rad)))
