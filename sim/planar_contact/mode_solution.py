"""Per-mode assembly (eq. 7–10, 24), the four SVD rank cases (26–31) and the domain N[τ; w] >= e (33)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from .modes import ContactKinematics, Mode, acceleration_rows
from .polytope import HPolytope
from .system import ContactModelError, ContactSnapshot

#: Singular values below RANK_RTOL * sigma_max count as zero.
RANK_RTOL = 1e-9


class RankCase(Enum):
    """The four rank cases of III-D."""

    UNIQUE = 1  # full row and column rank: z = A⁻¹(Bτ + b)
    AMBIGUOUS = 2  # full row rank only: z = A†(Bτ + b) + N(A) w for every τ
    RESTRICTED = 3  # full column rank only: unique z, but only for τ in an affine subspace
    AMBIGUOUS_RESTRICTED = 4  # neither


@dataclass(frozen=True)
class ModeSystem:
    """Equalities A z = B τ + b and inequalities N1 z >= E1 τ + e1 of one mode (z = [q̈; f])."""

    A: np.ndarray
    B: np.ndarray
    b: np.ndarray
    N1: np.ndarray
    E1: np.ndarray
    e1: np.ndarray
    task_N1: np.ndarray
    task_E1: np.ndarray
    task_e1: np.ndarray


def assemble_mode(snap: ContactSnapshot, kin: ContactKinematics, mode: Mode) -> ModeSystem:
    """Stack eq. (7) accelerations, (8) forces, physical constraints and dynamics (24); (9), (10) below."""
    n, k, t = snap.n_q, snap.n_contacts, snap.n_tau
    nz = n + 2 * k
    A_acc, b_acc, G_acc, g_acc = acceleration_rows(snap, kin, mode)
    rows_A, rows_B, rows_b = [], [], []
    ineq_N, ineq_E, ineq_e = [], [], []
    for r, rhs in zip(A_acc, b_acc, strict=True):
        rows_A.append(np.concatenate([r, np.zeros(2 * k)]))
        rows_B.append(np.zeros(t))
        rows_b.append(rhs)
    for r, rhs in zip(G_acc, g_acc, strict=True):
        ineq_N.append(np.concatenate([r, np.zeros(2 * k)]))
        ineq_E.append(np.zeros(t))
        ineq_e.append(rhs)

    def force_row(coeffs: dict[int, float]) -> np.ndarray:
        row = np.zeros(nz)
        for j, v in coeffs.items():
            row[n + j] = v
        return row

    for i, c in enumerate(mode):
        fn, ft, mu = 2 * i, 2 * i + 1, float(snap.mu[i])
        if c == "S":  # (8) with the erratum: I_2S, both force components vanish
            eqs, ges = [{fn: 1.0}, {ft: 1.0}], []
        elif c == "F":  # (10): friction cone
            eqs, ges = [], [{fn: 1.0}, {fn: mu, ft: -1.0}, {fn: mu, ft: 1.0}]
        elif c == "R":  # moving right: friction pushes left, f_t = -mu f_n
            eqs, ges = [{ft: 1.0, fn: mu}], [{fn: 1.0}]
        elif c == "L":
            eqs, ges = [{ft: 1.0, fn: -mu}], [{fn: 1.0}]
        else:
            raise ContactModelError(f"unknown contact mode letter {c!r}")
        for co in eqs:
            rows_A.append(force_row(co))
            rows_B.append(np.zeros(t))
            rows_b.append(0.0)
        for co in ges:
            ineq_N.append(force_row(co))
            ineq_E.append(np.zeros(t))
            ineq_e.append(0.0)
    if snap.physical is not None:
        p = snap.physical
        rows_A.extend(p.eq_z)
        rows_B.extend(p.eq_tau)
        rows_b.extend(p.eq_rhs)
        ineq_N.extend(p.ineq_z)
        ineq_E.extend(p.ineq_tau)
        ineq_e.extend(p.ineq_rhs)
    dyn = np.hstack([snap.M, -snap.J.T])  # M q̈ - Jᵀ f = S τ - (C q̇ + g)
    A = np.vstack([np.array(rows_A, float).reshape(len(rows_A), nz), dyn])
    B = np.vstack([np.array(rows_B, float).reshape(len(rows_B), t), snap.S])
    b = np.concatenate([np.array(rows_b, float), -snap.bias])
    task = snap.task
    if task is not None and task.eq_z.shape[0]:
        raise ContactModelError("task constraints must be inequalities (equalities would change N(A))")
    return ModeSystem(
        A,
        B,
        b,
        np.array(ineq_N, float).reshape(len(ineq_N), nz),
        np.array(ineq_E, float).reshape(len(ineq_E), t),
        np.array(ineq_e, float),
        task.ineq_z if task is not None else np.zeros((0, nz)),
        task.ineq_tau if task is not None else np.zeros((0, t)),
        task.ineq_rhs if task is not None else np.zeros(0),
    )


@dataclass(frozen=True)
class ModeSolution:
    """Closed-form response of one mode: z(τ, w) = Z_tau τ + z_0 + N_A w, valid on `domain`.

    `domain` lives in (τ, w) with the admissible-torque equalities U⊥ᵀ(Bτ + b) = 0 attached; task
    constraints are kept apart (`task_domain`) because mode intersections must be formed without them.
    """

    mode: Mode
    rank: int
    shape: tuple[int, int]
    case: RankCase
    Z_tau: np.ndarray
    z_0: np.ndarray
    null_basis: np.ndarray
    tau_eq: np.ndarray  # rows of U⊥ᵀ B
    tau_eq_rhs: np.ndarray  # -U⊥ᵀ b
    domain: HPolytope
    task_domain: HPolytope
    n_q: int

    @property
    def n_tau(self) -> int:
        return self.Z_tau.shape[1]

    @property
    def n_w(self) -> int:
        return self.null_basis.shape[1]

    def response(self, tau: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        z = self.Z_tau @ np.asarray(tau, float) + self.z_0
        if self.n_w:
            z = z + self.null_basis @ (np.zeros(self.n_w) if w is None else np.asarray(w, float))
        return z

    def acceleration_ambiguous(self, coords: list[int] | None = None, tol: float = 1e-9) -> bool:
        """Does w move q̈ (or the selected coordinates of q̈)? Otherwise the ambiguity is in forces only."""
        if self.n_w == 0:
            return False
        rows = self.null_basis[: self.n_q] if coords is None else self.null_basis[coords]
        return bool(np.abs(rows).max(initial=0.0) > tol)


def solve_mode(snap: ContactSnapshot, kin: ContactKinematics, mode: Mode) -> ModeSolution:
    """SVD of A; pseudo-inverse, null space N(A) and left null space U⊥ (erratum: [A −B], not [A B])."""
    sysm = assemble_mode(snap, kin, mode)
    A, B, b = sysm.A, sysm.B, sysm.b
    m, p = A.shape
    U, s, Vt = np.linalg.svd(A)
    tol = RANK_RTOL * (s[0] if s.size else 1.0) * max(m, p)
    r = int(np.sum(s > tol))
    pinv = Vt[:r].T @ (U[:, :r].T / s[:r, None])
    null = Vt[r:].T
    left_null = U[:, r:]
    frr, fcr = r == m, r == p
    case = {
        (True, True): RankCase.UNIQUE,
        (True, False): RankCase.AMBIGUOUS,
        (False, True): RankCase.RESTRICTED,
        (False, False): RankCase.AMBIGUOUS_RESTRICTED,
    }[(frr, fcr)]
    Z_tau, z_0 = pinv @ B, pinv @ b
    tau_eq, tau_eq_rhs = left_null.T @ B, -(left_null.T @ b)
    # rows of U⊥ᵀB that vanish numerically: drop them if U⊥ᵀb vanishes too (always admissible), otherwise
    # keep an exact 0 = c row so the domain is recognised as empty.
    scale = 1.0 + np.abs(B).max(initial=0.0) + np.abs(b).max(initial=0.0)
    zero_rows = np.linalg.norm(tau_eq, axis=1) <= 1e-12 * scale
    tau_eq[zero_rows] = 0.0
    keep = ~zero_rows | (np.abs(tau_eq_rhs) > 1e-9 * scale)
    tau_eq, tau_eq_rhs = tau_eq[keep], tau_eq_rhs[keep]
    nw = null.shape[1]
    t = snap.n_tau

    def domain_of(N1, E1, e1):
        # N1 (Z_tau τ + z_0 + N_A w) >= E1 τ + e1  ->  [N1 Z_tau − E1, N1 N_A] [τ; w] >= e1 − N1 z_0
        N = np.hstack([N1 @ Z_tau - E1, N1 @ null])
        e = e1 - N1 @ z_0
        A_eq = np.hstack([tau_eq, np.zeros((tau_eq.shape[0], nw))])
        return HPolytope.from_arrays(N.reshape(e.size, t + nw), e, A_eq, tau_eq_rhs)

    domain = domain_of(sysm.N1, sysm.E1, sysm.e1)
    task_rows = domain_of(sysm.task_N1, sysm.task_E1, sysm.task_e1)
    task_domain = domain.intersect(HPolytope.from_arrays(task_rows.N, task_rows.e))
    return ModeSolution(mode, r, (m, p), case, Z_tau, z_0, null, tau_eq, tau_eq_rhs, domain, task_domain, snap.n_q)
