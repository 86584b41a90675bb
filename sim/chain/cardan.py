"""Aiko's body shape from its joint angles: ten cardan joints as yaw-then-pitch revolute pairs (paper 000).

Link frames follow paper 000 (Transeth et al.): e_z^{B_i} points along link i towards link i+1, the horizontal
joint angle alpha_h,i turns about e_y^{B_i} and the vertical angle alpha_v,i about e_x^{B_{i+1}}, so

    R^{B_i}_{B_{i+1}} = R_y(alpha_h,i) R_x(alpha_v,i)                  (eq. 65-66 invert it)

Each cardan joint becomes two revolute joints of a ``Chain``: a massless cross turning about e_y, then link
i+1 turning about e_x. Aiko's yaw and pitch axes do not intersect: ``axis_offset_m`` (2.2 cm on Aiko, paper
000 Sec. VIII-F) separates them along the link axis, placed symmetrically about the nominal joint centre so
the straight robot keeps its link spacing L. With a zero offset the cardan centre is at G_i + (L/2) e_z^{B_i}.

The base is floating: the pose of one link (from motion capture or a simulator) fixes all others.
"""

from __future__ import annotations

import numpy as np

from sim import lie
from sim.chain.kinematics import chain_frames
from sim.chain.model import Chain, ChainModelError

#: Distance between Aiko's yaw and pitch axes (paper 000, Sec. VIII-F).
AIKO_AXIS_OFFSET_M = 0.022


def cardan_chain(
    n_links: int,
    link_length_m: float,
    axis_offset_m: float = 0.0,
    link_mass_kg: float = 1.0,
    link_inertia_kg_m2: np.ndarray | None = None,
) -> Chain:
    """Chain of 2 (n_links - 1) bodies [cross_1, link_2, cross_2, link_3, ...] hanging from link 1 (the base).

    q = (alpha_h,1, alpha_v,1, alpha_h,2, alpha_v,2, ...). Crosses are massless (their motion is carried by
    the links), so M* stays positive definite.
    """
    if int(n_links) != n_links or n_links < 2:
        raise ChainModelError(f"n_links must be an integer >= 2, got {n_links!r}")
    if not link_length_m > 0:
        raise ChainModelError(f"link_length_m must be > 0, got {link_length_m!r}")
    if not 0 <= axis_offset_m < link_length_m:
        raise ChainModelError(f"axis_offset_m must be in [0, link_length_m = {link_length_m}), got {axis_offset_m!r}")
    n_joints = int(n_links) - 1
    ez = np.array([0.0, 0.0, 1.0])
    reach = 0.5 * (link_length_m - axis_offset_m)  # link centre -> nearest axis of a neighbouring joint
    if link_inertia_kg_m2 is None:
        link_inertia_kg_m2 = np.diag([1.0, 1.0, 0.1]) * link_mass_kg * link_length_m**2 / 12.0
    parent, axis, joint_offset, com_offset, mass, inertia = [], [], [], [], [], []
    for k in range(n_joints):
        cross = 2 * k
        parent += [cross - 1, cross]  # the first cross hangs from the base (-1), i.e. link 1
        axis += [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
        joint_offset += [
            reach * ez,
            np.zeros(3),
        ]  # link centre -> yaw axis; cross "CoM" sits on the pitch axis
        com_offset += [axis_offset_m * ez, reach * ez]
        mass += [0.0, link_mass_kg]
        inertia += [np.zeros((3, 3)), link_inertia_kg_m2]
    return Chain(
        parent=np.array(parent),
        joint_axis=np.array(axis),
        joint_offset_m=np.array(joint_offset),
        com_offset_m=np.array(com_offset),
        mass_kg=np.array(mass),
        inertia_kg_m2=np.array(inertia),
    )


def _check_angles(joint_angles_rad: np.ndarray) -> np.ndarray:
    angles = np.asarray(joint_angles_rad, dtype=float)
    if angles.ndim != 2 or angles.shape[1] != 2 or angles.shape[0] < 1:
        raise ChainModelError(
            f"joint_angles_rad must have shape (n_links - 1, 2) with columns (alpha_h, alpha_v), got {angles.shape}"
        )
    if not np.all(np.isfinite(angles)):
        raise ChainModelError("joint_angles_rad contains non-finite values")
    return angles


def link_poses_from_joint_angles(
    joint_angles_rad: np.ndarray,
    link_length_m: float,
    axis_offset_m: float = 0.0,
    tracked_link: int = 0,
    tracked_pose: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Centre positions (n, 3) and rotations (n, 3, 3) of all n links.

    joint_angles_rad: (n - 1, 2) columns (alpha_h, alpha_v). tracked_pose: 4x4 pose of link ``tracked_link``
    (0-based; e.g. link 6 of Aiko is index 5, the one Vicon tracks); default identity for link 0.
    """
    angles = _check_angles(joint_angles_rad)
    n_links = angles.shape[0] + 1
    if not 0 <= tracked_link < n_links:
        raise ChainModelError(f"tracked_link must be in 0..{n_links - 1}, got {tracked_link}")
    chain = cardan_chain(n_links, link_length_m, axis_offset_m)
    frames = chain_frames(chain, angles.reshape(-1))
    R = np.concatenate([np.eye(3)[None], frames.rotations[1::2]])
    x = np.concatenate([np.zeros((1, 3)), frames.com_positions_m[1::2]])
    if tracked_pose is not None:
        g_tracked = np.asarray(tracked_pose, dtype=float)
        if g_tracked.shape != (4, 4):
            raise ChainModelError(f"tracked_pose must be a 4x4 pose matrix, got shape {g_tracked.shape}")
        # pose of link 0 such that link `tracked_link` lands on the tracked pose
        g0 = g_tracked @ lie.pose_inv(lie.pose(R[tracked_link], x[tracked_link]))
        R = g0[:3, :3] @ R
        x = x @ g0[:3, :3].T + g0[:3, 3]
    return x, R


def cardan_angles_from_rotations(rotations: np.ndarray) -> np.ndarray:
    """Joint angles (n - 1, 2) = (alpha_h, alpha_v) from link rotations (n, 3, 3), paper 000 eq. 63, 65-66.

    alpha_v = atan2(R32, R33), alpha_h = -asin(R31) of R^{B_i}_{B_{i+1}} = R_i^T R_{i+1} (asin clipped to
    [-1, 1] against round-off; atan2 rather than tan^-1 of the ratio keeps the quadrant).
    """
    R = np.asarray(rotations, dtype=float)
    rel = np.swapaxes(R[:-1], 1, 2) @ R[1:]
    alpha_v = np.arctan2(rel[:, 2, 1], rel[:, 2, 2])
    alpha_h = -np.arcsin(np.clip(rel[:, 2, 0], -1.0, 1.0))
    return np.stack([alpha_h, alpha_v], axis=1)


def cardan_rates_from_velocities(rotations: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """Joint rates (n - 1, 2) = (omega_h, omega_v) by paper 000 eq. 67 from body-frame omegas (n, 3).

    omega_J,i = omega_{i+1} - R^{B_i T}_{B_{i+1}} omega_i (in frame B_{i+1}); omega_h = e_y . omega_J,
    omega_v = e_x . omega_J. Note: these are the paper's definitions; omega_h equals alpha_h_dot only when
    alpha_v = 0 (e_y^{B_i} expressed in B_{i+1} is (0, cos a_v, -sin a_v)).
    """
    R = np.asarray(rotations, dtype=float)
    w = np.asarray(omega_body, dtype=float)
    rel = np.swapaxes(R[:-1], 1, 2) @ R[1:]
    omega_joint = w[1:] - np.einsum("nji,nj->ni", rel, w[:-1])
    return np.stack([omega_joint[:, 1], omega_joint[:, 0]], axis=1)


def cardan_angle_rates(rotations: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """Exact joint-angle rates (n - 1, 2) = (alpha_h_dot, alpha_v_dot) from body-frame angular velocities.

    The relative angular velocity is alpha_h_dot e_y^{B_i} + alpha_v_dot e_x^{B_{i+1}}, and the two axes of a
    cardan joint are orthogonal, so each rate is a projection (eq. 67's omega_h is cos(alpha_v) alpha_h_dot).
    """
    R = np.asarray(rotations, dtype=float)
    w_world = np.einsum("nij,nj->ni", R, np.asarray(omega_body, dtype=float))
    rel = w_world[1:] - w_world[:-1]
    return np.stack([np.einsum("ni,ni->n", rel, R[:-1, :, 1]), np.einsum("ni,ni->n", rel, R[1:, :, 0])], axis=1)


def quaternions_wxyz(rotations: np.ndarray) -> np.ndarray:
    """(n, 3, 3) rotations -> (n, 4) unit quaternions, scalar first (the stack's link_poses convention).

    Shepperd's method as scipy's ``Rotation.from_matrix`` applies it to an orthogonal matrix (the largest of the
    trace and the three diagonal entries picks the well-conditioned formula), so the result is scipy's, sign
    included; written out because importing scipy.spatial costs every ``aiko`` command ~0.3 s of start-up and this
    is its only use on the run path. The chain's rotations are products of exact rotations (orthogonal to ~1e-15),
    so scipy's projection of non-orthogonal input is not needed here. (`sim.snake3d.rotations.matrix_to_quat` is
    one matrix at a time and picks w >= 0, where scipy does not: logged link quaternions keep scipy's sign.)"""
    m = np.asarray(rotations, dtype=float)
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    choice = np.argmax(np.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1), axis=-1)
    xyzw = np.empty(m.shape[:-2] + (4,))
    from_trace = choice == 3
    mt = m[from_trace]
    xyzw[from_trace] = np.stack(
        [mt[:, 2, 1] - mt[:, 1, 2], mt[:, 0, 2] - mt[:, 2, 0], mt[:, 1, 0] - mt[:, 0, 1], 1.0 + trace[from_trace]],
        axis=-1,
    )
    for i in range(3):  # the i-th diagonal entry is the largest: q_i is the well-conditioned component
        j, k = (i + 1) % 3, (i + 2) % 3
        sel = choice == i
        mi = m[sel]
        q = np.empty((mi.shape[0], 4))
        q[:, i] = 1.0 - trace[sel] + 2.0 * mi[:, i, i]
        q[:, j] = mi[:, j, i] + mi[:, i, j]
        q[:, k] = mi[:, k, i] + mi[:, i, k]
        q[:, 3] = mi[:, k, j] - mi[:, j, k]
        xyzw[sel] = q
    xyzw /= np.linalg.norm(xyzw, axis=-1, keepdims=True)
    return np.concatenate([xyzw[..., 3:], xyzw[..., :3]], axis=-1)
