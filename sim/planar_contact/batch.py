"""All modes of one state at once: vectorised assembly and one batched SVD (the controller's fast path).

Every contact contributes exactly two equality rows whatever its letter (F: ẍ_n = ẍ_t = 0; L/R: ẍ_n = 0 and
f_t = ±μ f_n; S: f_n = f_t = 0), so all modes share the shape of A and one `np.linalg.svd` call handles
them together. Inequality rows are padded to three per contact with the trivially true row 0 >= −1.
`tests` check that the result equals `mode_solution.solve_mode` mode by mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mode_solution import RANK_RTOL, ModeSolution, RankCase
from .modes import ContactKinematics, Mode
from .polytope import HPolytope
from .system import ContactModelError, ContactSnapshot

LETTER_INDEX = {"F": 0, "S": 1, "L": 2, "R": 3}


def _templates(snap: ContactSnapshot, kin: ContactKinematics):
    """Per contact and letter: 2 equality rows (z-space) with rhs, 3 inequality rows with rhs."""
    n, k = snap.n_q, snap.n_contacts
    nz = n + 2 * k
    EQ = np.zeros((k, 4, 2, nz))
    EQr = np.zeros((k, 4, 2))
    GE = np.zeros((k, 4, 3, nz))
    GEr = np.full((k, 4, 3), -1.0)  # padding rows read 0 >= -1
    J, Jd = snap.J, snap.Jdot_qdot
    for i in range(k):
        jn, jt = 2 * i, 2 * i + 1
        fn, ft = n + jn, n + jt
        mu = float(snap.mu[i])
        # F
        EQ[i, 0, 0, :n], EQr[i, 0, 0] = J[jn], -Jd[jn]
        EQ[i, 0, 1, :n], EQr[i, 0, 1] = J[jt], -Jd[jt]
        GE[i, 0, 0, fn], GEr[i, 0, 0] = 1.0, 0.0
        GE[i, 0, 1, fn], GE[i, 0, 1, ft], GEr[i, 0, 1] = mu, -1.0, 0.0
        GE[i, 0, 2, fn], GE[i, 0, 2, ft], GEr[i, 0, 2] = mu, 1.0, 0.0
        # S
        EQ[i, 1, 0, fn] = 1.0
        EQ[i, 1, 1, ft] = 1.0
        if kin.normal_zero[i]:
            GE[i, 1, 0, :n], GEr[i, 1, 0] = J[jn], -Jd[jn]
        # L (f_t = +mu f_n), R (f_t = -mu f_n)
        for letter, sign in ((2, -1.0), (3, 1.0)):
            EQ[i, letter, 0, :n], EQr[i, letter, 0] = J[jn], -Jd[jn]
            EQ[i, letter, 1, ft], EQ[i, letter, 1, fn] = 1.0, sign * mu
            GE[i, letter, 0, fn], GEr[i, letter, 0] = 1.0, 0.0
            if kin.tangential_zero[i]:
                s = 1.0 if letter == 3 else -1.0
                GE[i, letter, 1, :n], GEr[i, letter, 1] = s * J[jt], -s * Jd[jt]
    return EQ, EQr, GE, GEr


@dataclass
class BatchSolution:
    """Arrays for K modes (leading axis). `solution(j)` builds mode j's ModeSolution on demand."""

    modes: list[Mode]
    n_q: int
    n_tau: int
    ranks: np.ndarray  # (K,)
    Z_tau: np.ndarray  # (K, nz, t)
    z_0: np.ndarray  # (K, nz)
    Vt: np.ndarray  # (K, nz, nz): rows >= rank span N(A)
    UtB: np.ndarray  # (K, m, t): rows >= rank are U⊥ᵀB
    Utb: np.ndarray  # (K, m)
    N1Z: np.ndarray  # (K, 3k, t)
    N1z0: np.ndarray  # (K, 3k)
    N1V: np.ndarray  # (K, 3k, nz)
    e1: np.ndarray  # (K, 3k), padding rows have e1 = -1 and zero N1
    scale: np.ndarray  # (K,)
    task: object
    shape: tuple[int, int]

    def __len__(self) -> int:
        return len(self.modes)

    def solution(self, j: int) -> ModeSolution:
        nz = self.Z_tau.shape[1]
        r = int(self.ranks[j])
        null = self.Vt[j, r:].T
        tau_eq = self.UtB[j, r:].copy()
        tau_rhs = -self.Utb[j, r:]
        zero_rows = np.linalg.norm(tau_eq, axis=1) <= 1e-12 * self.scale[j]
        tau_eq[zero_rows] = 0.0
        sel = ~zero_rows | (np.abs(tau_rhs) > 1e-9 * self.scale[j])
        tau_eq, tau_rhs = tau_eq[sel], tau_rhs[sel]
        real = self.e1[j] > -0.5  # drop the padding rows
        nw = nz - r
        Nd = np.hstack([self.N1Z[j][real], self.N1V[j][real][:, r:]])
        ed = self.e1[j][real] - self.N1z0[j][real]
        A_eq = np.hstack([tau_eq, np.zeros((tau_eq.shape[0], nw))])
        domain = HPolytope(Nd, ed, A_eq, tau_rhs)
        task = self.task
        if task is not None:
            Nt = np.hstack([task.ineq_z @ self.Z_tau[j] - task.ineq_tau, task.ineq_z @ null])
            et = task.ineq_rhs - task.ineq_z @ self.z_0[j]
            task_domain = HPolytope(np.vstack([Nd, Nt]), np.concatenate([ed, et]), A_eq, tau_rhs)
        else:
            task_domain = domain
        m = self.shape[0]
        case = {
            (True, True): RankCase.UNIQUE,
            (True, False): RankCase.AMBIGUOUS,
            (False, True): RankCase.RESTRICTED,
            (False, False): RankCase.AMBIGUOUS_RESTRICTED,
        }[(r == m, r == nz)]
        return ModeSolution(
            self.modes[j],
            r,
            self.shape,
            case,
            self.Z_tau[j],
            self.z_0[j],
            null,
            tau_eq,
            tau_rhs,
            domain,
            task_domain,
            self.n_q,
        )


def solve_batch(snap: ContactSnapshot, kin: ContactKinematics, modes: list[Mode]) -> BatchSolution:
    """Assemble and SVD all modes at once."""
    if snap.physical is not None:
        raise ContactModelError("the batched path does not take physical constraints; use solve_mode")
    task = snap.task
    if task is not None and task.eq_z.shape[0]:
        raise ContactModelError("task constraints must be inequalities")
    n, k, t = snap.n_q, snap.n_contacts, snap.n_tau
    nz = n + 2 * k
    EQ, EQr, GE, GEr = _templates(snap, kin)
    idx = np.array([[LETTER_INDEX[c] for c in m] for m in modes]).reshape(len(modes), k)
    K = len(modes)
    ci = np.arange(k)[None, :]
    A_c = EQ[ci, idx].reshape(K, 2 * k, nz)
    b_c = EQr[ci, idx].reshape(K, 2 * k)
    dyn = np.hstack([snap.M, -snap.J.T])
    A = np.concatenate([A_c, np.broadcast_to(dyn, (K, n, nz))], axis=1)
    b = np.concatenate([b_c, np.broadcast_to(-snap.bias, (K, n))], axis=1)
    B = np.vstack([np.zeros((2 * k, t)), snap.S])  # common to all modes
    N1 = GE[ci, idx].reshape(K, 3 * k, nz)
    e1 = GEr[ci, idx].reshape(K, 3 * k)
    U, s, Vt = np.linalg.svd(A)
    m = A.shape[1]
    tol = RANK_RTOL * s[:, :1] * m
    keep = s > tol
    ranks = keep.sum(axis=1)
    inv_s = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    UtB = np.einsum("kji,jt->kit", U, B)
    Utb = np.einsum("kji,kj->ki", U, b)
    Z_tau = np.einsum("kji,kj,kjt->kit", Vt, inv_s, UtB)
    z_0 = np.einsum("kji,kj,kj->ki", Vt, inv_s, Utb)
    N1Z = N1 @ Z_tau
    N1z0 = np.einsum("kri,ki->kr", N1, z_0)
    N1V = N1 @ np.transpose(Vt, (0, 2, 1))
    scale = 1.0 + np.abs(B).max(initial=0.0) + np.abs(b).max(axis=1)
    return BatchSolution(list(modes), n, t, ranks, Z_tau, z_0, Vt, UtB, Utb, N1Z, N1z0, N1V, e1, scale, task, (m, nz))


def solve_modes(snap: ContactSnapshot, kin: ContactKinematics, modes: list[Mode]) -> list[ModeSolution]:
    """The same result as [solve_mode(snap, kin, m) for m in modes], computed in batch."""
    if not modes:
        return []
    bs = solve_batch(snap, kin, modes)
    return [bs.solution(j) for j in range(len(modes))]
