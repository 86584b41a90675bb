"""The coordinate transfer matrix B (X_dot = B q_dot, paper 002 eq. 61/89-90, corrected) and its rate B_dot.

Blocks are kept as two arrays: Bx (n, 3, n) with the CoM velocities (inertial) and Bw (n, 3, n) with the
angular velocities (each body's own frame); ``stack_blocks`` interleaves them into the paper's 6n x n layout
(x_dot^(1), omega^(1), x_dot^(2), omega^(2), ...).

The printed eq. 89 has three index errors; the recursion implemented here is the corrected one of the notes,
written for trees by replacing i-1 with the parent p = p(i):

    Bw_i = R^(i/p)^T Bw_p + g_i e_i^T                                  (eq. 58a)
    Bx_i = Bx_p + R^(p) T^(i/p) Bw_p   (columns j != i),   Bx_i[:, i] = R^(i) skew(d^(i/J_i))^T g_i
    T^(i/p) = skew(R^(i/p) d^(i/J_i) + d^(J_i/p))^T      (kinematic transfer variable, eq. 58b)

``transfer_blocks_geometric`` is the independent textbook form (a_j x (x_i - o_j), R_i^T a_j) used as a check.
"""

from __future__ import annotations

import numpy as np

from sim import lie
from sim.chain.kinematics import ChainFrames, chain_frames, check_coordinates
from sim.chain.model import Chain


def stack_blocks(Bx: np.ndarray, Bw: np.ndarray) -> np.ndarray:
    """(n, 3, m) translational and rotational blocks -> (6n, m) in the order x^(1), w^(1), x^(2), ..."""
    n, _, m = Bx.shape
    return np.concatenate([Bx, Bw], axis=1).reshape(6 * n, m)


def kinematic_transfer_variable(chain: Chain, frames: ChainFrames) -> np.ndarray:
    """T^(i/p(i)) for every body, (n, 3, 3) (eq. 58b with the d^(n/J_n) index fixed)."""
    arm = np.einsum("nij,nj->ni", frames.relative_rotations, chain.com_offset_m) + chain.joint_offset_m
    return np.swapaxes(lie.hat3(arm), 1, 2)


def transfer_blocks(chain: Chain, frames: ChainFrames) -> tuple[np.ndarray, np.ndarray]:
    """(Bx, Bw) by the paper's recursion (corrected eq. 89-90), O(n^2)."""
    n = chain.n_bodies
    g = chain.joint_axis
    T = kinematic_transfer_variable(chain, frames)
    Bx = np.zeros((n, 3, n))
    Bw = np.zeros((n, 3, n))
    diag_x = np.einsum("nij,nkj,nk->ni", frames.rotations, lie.hat3(chain.com_offset_m), g)  # R skew(d)^T g
    for i in range(n):
        p = chain.parent[i]
        if p >= 0:
            Bw[i] = frames.relative_rotations[i].T @ Bw[p]
            Bx[i] = Bx[p] + (frames.rotations[p] @ T[i]) @ Bw[p]
        Bw[i, :, i] = g[i]
        Bx[i, :, i] = diag_x[i]
    return Bx, Bw


def transfer_blocks_geometric(chain: Chain, frames: ChainFrames) -> tuple[np.ndarray, np.ndarray]:
    """(Bx, Bw) from B_{x_i, j} = a_j x (x_i - o_j), B_{w_i, j} = R_i^T a_j on the joint path (a check)."""
    mask = chain.path[:, None, :]
    lever = frames.com_positions_m[:, None, :] - frames.joint_origins_m[None, :, :]  # (i, j, 3)
    Bx = np.cross(frames.joint_axes[None, :, :], lever)  # (i, j, 3)
    Bw = np.einsum("iba,jb->iaj", frames.rotations, frames.joint_axes)
    return np.swapaxes(Bx, 1, 2) * mask, Bw * mask


def transfer_rate_blocks(
    chain: Chain, frames: ChainFrames, Bw: np.ndarray, q_dot: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(Bx_dot, Bw_dot): the recursion of transfer_blocks differentiated term by term (corrected eq. 91-92).

    Uses R_dot = R omega^ (body-frame omega), d/dt R^(i/p)^T = -theta_dot_i g_i^ R^(i/p)^T and
    T_dot = skew(theta_dot_i g_i x R^(i/p) d^(i/J_i))^T.
    """
    n = chain.n_bodies
    g = chain.joint_axis
    omega = np.einsum("nij,j->ni", Bw, q_dot)  # body-frame angular velocities
    T = kinematic_transfer_variable(chain, frames)
    rel_arm = np.einsum("nij,nj->ni", frames.relative_rotations, chain.com_offset_m)
    T_dot = np.swapaxes(lie.hat3(np.cross(g * q_dot[:, None], rel_arm)), 1, 2)
    W = lie.hat3(omega)
    diag_x = np.einsum("nij,njk,nlk,nl->ni", frames.rotations, W, lie.hat3(chain.com_offset_m), g)
    Bx_dot = np.zeros((n, 3, n))
    Bw_dot = np.zeros((n, 3, n))
    for i in range(n):
        p = chain.parent[i]
        if p >= 0:
            Rt = frames.relative_rotations[i].T
            Bw_dot[i] = -q_dot[i] * lie.hat3(g[i]) @ Rt @ Bw[p] + Rt @ Bw_dot[p]
            Rp = frames.rotations[p]
            Bx_dot[i] = Bx_dot[p] + (Rp @ (W[p] @ T[i] + T_dot[i])) @ Bw[p] + (Rp @ T[i]) @ Bw_dot[p]
        Bx_dot[i, :, i] = diag_x[i]
    return Bx_dot, Bw_dot


def transfer_rate_blocks_geometric(
    chain: Chain, frames: ChainFrames, q_dot: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(Bx_dot, Bw_dot) by differentiating the geometric form; an independent check of the recursion.

    a_j_dot = Omega_j x a_j and the joint origin moves with the parent body: o_j_dot = x_p_dot + Omega_p x
    (o_j - x_p). Omega are world angular velocities.
    """
    Bx, Bw = transfer_blocks_geometric(chain, frames)
    omega_world = np.einsum("nij,njk,k->ni", frames.rotations, Bw, q_dot)
    x_dot = np.einsum("nij,j->ni", Bx, q_dot)
    n = chain.n_bodies
    o_dot = np.zeros((n, 3))
    for j in range(n):
        p = chain.parent[j]
        if p >= 0:
            o_dot[j] = x_dot[p] + np.cross(omega_world[p], frames.joint_origins_m[j] - frames.com_positions_m[p])
    a = frames.joint_axes
    a_dot = np.cross(omega_world, a)
    lever = frames.com_positions_m[:, None, :] - frames.joint_origins_m[None, :, :]
    lever_dot = x_dot[:, None, :] - o_dot[None, :, :]
    Bx_dot = np.cross(a_dot[None], lever) + np.cross(a[None], lever_dot)  # (i, j, 3)
    rel = np.cross(omega_world[None, :, :] - omega_world[:, None, :], a[None, :, :])  # (Omega_j - Omega_i) x a_j
    Bw_dot = np.einsum("iba,ijb->iaj", frames.rotations, rel)
    mask = chain.path[:, None, :]
    return np.swapaxes(Bx_dot, 1, 2) * mask, Bw_dot * mask


def transfer_matrix(chain: Chain, q: np.ndarray) -> np.ndarray:
    """B (6n x n): X_dot = B q_dot; blocks x_dot^(1), omega^(1), x_dot^(2), ...; omega in body frames."""
    return stack_blocks(*transfer_blocks(chain, chain_frames(chain, q)))


def transfer_matrix_rate(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> np.ndarray:
    """B_dot (6n x n) = sum_k dB/dtheta_k theta_dot_k, same layout as transfer_matrix."""
    q_dot = check_coordinates(chain, q_dot, "q_dot")
    frames = chain_frames(chain, q)
    _, Bw = transfer_blocks(chain, frames)
    return stack_blocks(*transfer_rate_blocks(chain, frames, Bw, q_dot))
