"""Chain dynamics M* q_dd + N* q_d = F* (paper 002 eq. 85-87), assembled block-wise from B and B_dot.

M = blockdiag(m_i I3, J_i), D = blockdiag(0, omega_i^) (eq. 65, 76), so with B = (Bx, Bw) per body:

    M* = sum_i m_i Bx_i^T Bx_i + Bw_i^T J_i Bw_i
    N* = sum_i m_i Bx_i^T Bx_dot_i + Bw_i^T (J_i Bw_dot_i + omega_i^ J_i Bw_i)
    F* = sum_i Bx_i^T F_i + Bw_i^T M_i       (forces inertial, moments in body frames, eq. 83)

This is the readable reference: it never forms the 6n x 6n block-diagonal matrices (B has O(n^2) non-zero
blocks; the block sums cost O(n^3/3)). forward_dynamics/inverse_dynamics use the O(n^2) composite-body kernel of
composite.py, which the tests hold to this reference.
Gravity acts along chain.gravity_m_s2 (-e3 by default; eq. 79 prints e1 for some bodies, an erratum).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim import lie
from sim.chain.composite import composite_forward_dynamics, composite_matrices
from sim.chain.kinematics import ChainFrames, chain_frames, check_coordinates
from sim.chain.model import Chain, ChainModelError
from sim.chain.transfer import stack_blocks, transfer_blocks, transfer_rate_blocks

NOT_SPD_MESSAGE = "M* is not positive definite: some joint moves no mass or inertia (check masses/inertias)"


@dataclass(frozen=True)
class EquationsOfMotion:
    """M*, N* and the gravity part of F* at one state, plus the kinematics they came from."""

    M_star: np.ndarray  # (n, n) symmetric positive definite
    N_star: np.ndarray  # (n, n)
    F_star_gravity: np.ndarray  # (n,)
    Bx: np.ndarray  # (n, 3, n)
    Bw: np.ndarray  # (n, 3, n)
    Bx_dot: np.ndarray
    Bw_dot: np.ndarray
    omega: np.ndarray  # (n, 3) body-frame angular velocities
    frames: ChainFrames

    @property
    def B(self) -> np.ndarray:
        return stack_blocks(self.Bx, self.Bw)

    @property
    def B_dot(self) -> np.ndarray:
        return stack_blocks(self.Bx_dot, self.Bw_dot)


def assemble(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> EquationsOfMotion:
    """B, B_dot, M*, N* and the gravity generalized force at (q, q_dot)."""
    q = check_coordinates(chain, q)
    q_dot = check_coordinates(chain, q_dot, "q_dot")
    frames = chain_frames(chain, q)
    Bx, Bw = transfer_blocks(chain, frames)
    Bx_dot, Bw_dot = transfer_rate_blocks(chain, frames, Bw, q_dot)
    m, J = chain.mass_kg, chain.inertia_kg_m2
    omega = np.einsum("nij,j->ni", Bw, q_dot)
    JBw = np.einsum("nab,nbj->naj", J, Bw)
    M_star = np.einsum("n,naj,nak->jk", m, Bx, Bx) + np.einsum("naj,nak->jk", Bw, JBw)
    gyro = np.einsum("nab,nbk->nak", lie.hat3(omega), JBw) + np.einsum("nab,nbk->nak", J, Bw_dot)
    N_star = np.einsum("n,naj,nak->jk", m, Bx, Bx_dot) + np.einsum("naj,nak->jk", Bw, gyro)
    F_gravity = np.einsum("naj,na->j", Bx, m[:, None] * chain.gravity_m_s2[None, :])
    M_star = 0.5 * (M_star + M_star.T)  # exact symmetry (round-off only)
    return EquationsOfMotion(M_star, N_star, F_gravity, Bx, Bw, Bx_dot, Bw_dot, omega, frames)


def joint_torque_moments(chain: Chain, tau: np.ndarray) -> np.ndarray:
    """Body-frame moments of the joint motors, (n, 3): M_i = tau_i g_i - sum_{children c} tau_c g_c.

    The reaction of motor c on its parent i is -tau_c times c's axis expressed in frame i, R^(c/i) g_c = g_c
    (a rotation leaves its own axis fixed; eq. 79, corrected). F* of these moments is exactly tau.
    """
    tau = check_coordinates(chain, tau, "tau")
    moments = chain.joint_axis * tau[:, None]
    for c in range(chain.n_bodies):
        p = chain.parent[c]
        if p >= 0:
            moments[p] -= moments[c]
    return moments


def generalized_force(
    eom: EquationsOfMotion,
    forces_world_n: np.ndarray | None = None,
    moments_body_n_m: np.ndarray | None = None,
) -> np.ndarray:
    """F* = B^T F for forces at the CoMs (inertial, (n, 3)) and moments (body frames, (n, 3))."""
    out = np.zeros(eom.Bx.shape[2])
    if forces_world_n is not None:
        out += np.einsum("naj,na->j", eom.Bx, forces_world_n)
    if moments_body_n_m is not None:
        out += np.einsum("naj,na->j", eom.Bw, moments_body_n_m)
    return out


def forward_dynamics(
    chain: Chain,
    q: np.ndarray,
    q_dot: np.ndarray,
    tau: np.ndarray | None = None,
    F_star_extra: np.ndarray | None = None,
    reference: bool = False,
) -> np.ndarray:
    """q_dd = M*^-1 (F*_gravity + tau + F*_extra - N* q_dot) (eq. 87), by Cholesky since M* is SPD.

    Uses the O(n^2) composite-body numba kernel (sim.chain.composite); reference=True uses the numpy
    assembly of B^T M B instead.
    """
    q = check_coordinates(chain, q)
    q_dot = check_coordinates(chain, q_dot, "q_dot")
    extra = np.zeros(chain.n_bodies)
    if tau is not None:
        extra += check_coordinates(chain, tau, "tau")  # the motor part of F* is exactly tau
    if F_star_extra is not None:
        extra += np.asarray(F_star_extra, dtype=float)
    if reference:
        eom = assemble(chain, q, q_dot)
        return _solve_spd(eom.M_star, eom.F_star_gravity + extra - eom.N_star @ q_dot)
    q_ddot, ok = composite_forward_dynamics(chain, q, q_dot, extra)
    if not ok:
        raise ChainModelError(NOT_SPD_MESSAGE)
    return q_ddot


def accelerations(eom: EquationsOfMotion, q_dot: np.ndarray, tau=None, F_star_extra=None) -> np.ndarray:
    """Forward dynamics from an already assembled EquationsOfMotion."""
    rhs = eom.F_star_gravity - eom.N_star @ q_dot
    if tau is not None:
        rhs = rhs + tau
    if F_star_extra is not None:
        rhs = rhs + F_star_extra
    return _solve_spd(eom.M_star, rhs)


def _matrices(chain: Chain, q, q_dot, reference: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = check_coordinates(chain, q)
    q_dot = check_coordinates(chain, q_dot, "q_dot")
    if reference:
        eom = assemble(chain, q, q_dot)
        return eom.M_star, eom.N_star, eom.F_star_gravity
    return composite_matrices(chain, q, q_dot)


def _solve_spd(M_star: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    # imported on first use (a dictionary lookup after that): scipy.linalg is ~0.2 s of start-up for every aiko
    # command, and the run path imports sim.chain for its kinematics only
    from scipy.linalg import cho_factor, cho_solve

    try:
        return cho_solve(cho_factor(M_star), rhs)
    except np.linalg.LinAlgError as exc:
        raise ChainModelError(NOT_SPD_MESSAGE) from exc


def inverse_dynamics(
    chain: Chain,
    q: np.ndarray,
    q_dot: np.ndarray,
    q_ddot: np.ndarray,
    F_star_extra: np.ndarray | None = None,
    reference: bool = False,
) -> np.ndarray:
    """Joint torques F*_a = M* q_dd + N* q_d - F*_c (eq. 94); F*_c is gravity plus F_star_extra."""
    q_ddot = check_coordinates(chain, q_ddot, "q_ddot")
    M_star, N_star, F_gravity = _matrices(chain, q, q_dot, reference)
    tau = M_star @ q_ddot + N_star @ np.asarray(q_dot, dtype=float) - F_gravity
    if F_star_extra is not None:
        tau = tau - F_star_extra
    return tau


def kinetic_energy_j(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> float:
    """K = 1/2 X_dot^T M X_dot evaluated body by body (independent of M*; eq. 66)."""
    frames = chain_frames(chain, q)
    Bx, Bw = transfer_blocks(chain, frames)
    v = np.einsum("naj,j->na", Bx, q_dot)
    w = np.einsum("naj,j->na", Bw, q_dot)
    return float(
        0.5 * np.sum(chain.mass_kg * np.sum(v * v, axis=1)) + 0.5 * np.einsum("na,nab,nb->", w, chain.inertia_kg_m2, w)
    )


def potential_energy_j(chain: Chain, q: np.ndarray) -> float:
    """U = -sum_i m_i g . x_i (zero at the origin's height)."""
    x = chain_frames(chain, q).com_positions_m
    return float(-np.sum(chain.mass_kg * (x @ chain.gravity_m_s2)))


def total_energy_j(chain: Chain, q: np.ndarray, q_dot: np.ndarray) -> float:
    return kinetic_energy_j(chain, q, q_dot) + potential_energy_j(chain, q)
