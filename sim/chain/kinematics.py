"""Forward kinematics of a chain: rotations, CoM positions, joint origins and world joint axes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim import lie
from sim.chain.model import Chain, ChainModelError


class ChainPose(NamedTuple):
    """Unpacks as ``x, R = forward_kinematics(chain, q)``."""

    com_positions_m: np.ndarray  # (n, 3) inertial
    rotations: np.ndarray  # (n, 3, 3) R^(i): body frame -> inertial


@dataclass(frozen=True)
class ChainFrames:
    """Everything the transfer matrix needs at one configuration (all in the inertial frame unless noted)."""

    relative_rotations: np.ndarray  # (n, 3, 3) R^(i/p(i)) = exp(theta_i g_i^)
    rotations: np.ndarray  # (n, 3, 3) R^(i)
    com_positions_m: np.ndarray  # (n, 3) x^(i)
    joint_origins_m: np.ndarray  # (n, 3) o_i
    joint_axes: np.ndarray  # (n, 3) a_i = R^(i) g_i


def check_coordinates(chain: Chain, q: np.ndarray, name: str = "q") -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape != (chain.n_bodies,):
        raise ChainModelError(f"{name} must have shape ({chain.n_bodies},) (one angle per joint), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ChainModelError(f"{name} contains non-finite values")
    return q


def check_base_pose(base_pose: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if base_pose is None:
        return np.eye(3), np.zeros(3)
    g = np.asarray(base_pose, dtype=float)
    if g.shape != (4, 4):
        raise ChainModelError(f"base_pose must be a 4x4 homogeneous matrix [[R, p], [0, 1]], got shape {g.shape}")
    R, p = lie.pose_parts(g)
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ChainModelError("base_pose rotation block is not a proper rotation (R^T R != I or det < 0)")
    return R.copy(), p.copy()


def chain_frames(chain: Chain, q: np.ndarray, base_pose: np.ndarray | None = None) -> ChainFrames:
    """Recursive forward kinematics (parents first); base_pose places the base frame (default: world)."""
    q = check_coordinates(chain, q)
    R_base, p_base = check_base_pose(base_pose)
    n = chain.n_bodies
    R_rel = lie.exp_so3(chain.joint_axis * q[:, None])
    R = np.empty((n, 3, 3))
    x = np.empty((n, 3))
    o = np.empty((n, 3))
    for i in range(n):
        p = chain.parent[i]
        Rp, xp = (R_base, p_base) if p < 0 else (R[p], x[p])
        o[i] = xp + Rp @ chain.joint_offset_m[i]
        R[i] = Rp @ R_rel[i]
        x[i] = o[i] + R[i] @ chain.com_offset_m[i]
    a = np.einsum("nij,nj->ni", R, chain.joint_axis)
    return ChainFrames(R_rel, R, x, o, a)


def forward_kinematics(chain: Chain, q: np.ndarray, base_pose: np.ndarray | None = None) -> ChainPose:
    """CoM positions (n, 3, inertial) and rotations (n, 3, 3) for joint angles q (n,)."""
    f = chain_frames(chain, q, base_pose)
    return ChainPose(f.com_positions_m, f.rotations)
