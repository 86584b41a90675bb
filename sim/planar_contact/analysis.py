"""The complete answer of paper 003 at one state: every feasible mode, its domain, its torque projection,
and both kinds of ambiguity (III-E, III-G); and the forward question for a given τ."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from .mode_solution import ModeSolution, solve_mode
from .modes import ContactKinematics, Mode, feasible_modes
from .polytope import HPolytope, chebyshev_ball, fourier_motzkin, is_feasible, projected_dimension, remove_redundant
from .system import ContactSnapshot

LOG = logging.getLogger(__name__)

#: A set counts as full-dimensional (an ambiguity, not a shared boundary) above this Chebyshev radius.
FULL_DIM_RADIUS = 1e-7


@dataclass(frozen=True)
class ModeAnalysis:
    """One kinematically feasible mode with its reduced domain D_c and torque projection T_c."""

    solution: ModeSolution
    domain: HPolytope | None  # reduced D_c in (τ, w); None = inconsistent for every τ
    torque_domain: HPolytope | None  # T_c
    within_mode_ambiguity: bool  # A lacks full column rank and D_c is non-degenerate in w

    @property
    def mode(self) -> Mode:
        return self.solution.mode

    @property
    def consistent_somewhere(self) -> bool:
        return self.domain is not None


def within_mode_radius(sol: ModeSolution, domain: HPolytope) -> float:
    """Largest ball in the w-directions only that fits in D_c for some τ (0 = degenerate in w)."""
    if sol.n_w == 0:
        return 0.0
    t = sol.n_tau
    Nw = domain.N[:, t:]
    norms = np.linalg.norm(Nw, axis=1)
    c = np.zeros(domain.dim + 1)
    c[-1] = -1.0
    A_ub = -np.hstack([domain.N, -norms[:, None]])
    res = linprog(
        c,
        A_ub=A_ub if A_ub.shape[0] else None,
        b_ub=-domain.e if A_ub.shape[0] else None,
        A_eq=np.hstack([domain.A_eq, np.zeros((domain.A_eq.shape[0], 1))]) if domain.A_eq.shape[0] else None,
        b_eq=domain.b_eq if domain.A_eq.shape[0] else None,
        bounds=[(None, None)] * domain.dim + [(None, 1e6)],
        method="highs",
    )
    return float(res.x[-1]) if res.status == 0 else 0.0


def analyse_mode(snap: ContactSnapshot, kin: ContactKinematics, mode: Mode, project: bool = True) -> ModeAnalysis:
    sol = solve_mode(snap, kin, mode)
    domain = remove_redundant(sol.domain)
    if domain is None:
        return ModeAnalysis(sol, None, None, False)
    torque = fourier_motzkin(domain, list(range(sol.n_tau))) if project else None
    within = sol.n_w > 0 and within_mode_radius(sol, domain) > FULL_DIM_RADIUS
    return ModeAnalysis(sol, domain, torque, within)


def full_dimensional_overlap(Ta: HPolytope, Tb: HPolytope) -> HPolytope | None:
    """Ta ∩ Tb if it is an ambiguity: as high-dimensional as Ta or Tb itself (affine hulls, implicit
    equalities included); None for empty or boundary-only overlaps."""
    inter = Ta.intersect(Tb)
    d_inter = projected_dimension(inter, range(inter.dim))
    if d_inter < 0:
        return None
    d_a = projected_dimension(Ta, range(Ta.dim))
    d_b = projected_dimension(Tb, range(Tb.dim))
    if d_inter < min(d_a, d_b):
        return None
    return remove_redundant(inter)


def subtract(T: HPolytope, K: HPolytope) -> list[HPolytope]:
    """Convex pieces covering T − K (up to shared boundaries): piece r violates row r of K, keeps rows < r."""
    pieces = []
    for r in range(K.N.shape[0]):
        N = np.vstack([T.N, K.N[:r], -K.N[r : r + 1]])
        e = np.concatenate([T.e, K.e[:r], -K.e[r : r + 1]])
        piece = HPolytope(N, e, T.A_eq, T.b_eq)
        _, radius = chebyshev_ball(piece)
        if radius > FULL_DIM_RADIUS:
            reduced = remove_redundant(piece)
            if reduced is not None:
                pieces.append(reduced)
    return pieces


def unambiguous_region(T: HPolytope, overlaps: list[HPolytope]) -> list[HPolytope]:
    """T*_c = T_c − ∪ overlaps (34), as a list of convex pieces (a non-convex union)."""
    pieces = [T]
    for K in overlaps:
        pieces = [q for p in pieces for q in subtract(p, K)]
    return pieces


@dataclass(frozen=True)
class ContactAnalysis:
    """Everything about one state: feasible modes, their analyses, the pairwise full-dimensional overlaps."""

    kinematics: ContactKinematics
    modes: list[ModeAnalysis]
    overlaps: dict[tuple[int, int], HPolytope] = field(default_factory=dict)

    def consistent(self) -> list[ModeAnalysis]:
        return [m for m in self.modes if m.consistent_somewhere]

    def ambiguous_pairs(self) -> list[tuple[Mode, Mode]]:
        return [(self.modes[i].mode, self.modes[j].mode) for i, j in self.overlaps]

    def unambiguous_torques(self, index: int) -> list[HPolytope]:
        """T*_c of mode `index` as convex pieces (task constraints not applied: do that afterwards)."""
        ma = self.modes[index]
        if ma.torque_domain is None:
            return []
        others = [P for (i, j), P in self.overlaps.items() if index in (i, j)]
        return unambiguous_region(ma.torque_domain, others)


def analyse(snap: ContactSnapshot, global_lp: bool = True, between_modes: bool = True) -> ContactAnalysis:
    modes, kin = feasible_modes(snap, global_lp=global_lp)
    analyses = [analyse_mode(snap, kin, m) for m in modes]
    overlaps: dict[tuple[int, int], HPolytope] = {}
    if between_modes:
        for i, a in enumerate(analyses):
            for j in range(i + 1, len(analyses)):
                b = analyses[j]
                if a.torque_domain is None or b.torque_domain is None:
                    continue
                ov = full_dimensional_overlap(a.torque_domain, b.torque_domain)
                if ov is not None:
                    overlaps[(i, j)] = ov
    return ContactAnalysis(kin, analyses, overlaps)


@dataclass(frozen=True)
class ConsistentMode:
    """A mode consistent with a given τ: z = z_tau + N_A w for w in `w_domain` (unique if n_w == 0)."""

    mode: Mode
    z_at_tau: np.ndarray  # response with w = 0 (the least-norm particular solution)
    null_basis: np.ndarray
    w_domain: HPolytope | None  # {w : N_w w >= e − N_τ τ}; None if no ambiguity variables
    n_q: int

    @property
    def qdd(self) -> np.ndarray:
        return self.z_at_tau[: self.n_q]

    @property
    def forces(self) -> np.ndarray:
        return self.z_at_tau[self.n_q :]

    def sample(self) -> np.ndarray:
        """One admissible z: w = 0 (the least-norm solution) if admissible, else the admissible w of least ‖w‖₁."""
        nw = self.null_basis.shape[1]
        if self.w_domain is None or self.w_domain.contains(np.zeros(nw), tol=1e-9):
            return self.z_at_tau
        W = self.w_domain  # smallest admissible ‖w‖₁: w = u − v, u, v >= 0
        res = linprog(
            np.ones(2 * nw), A_ub=-np.hstack([W.N, -W.N]), b_ub=-W.e, bounds=[(0, None)] * (2 * nw), method="highs"
        )
        if res.status == 0:
            return self.z_at_tau + self.null_basis @ (res.x[:nw] - res.x[nw:])
        center, _ = chebyshev_ball(W)
        return self.z_at_tau + self.null_basis @ center

    def qdd_range(self) -> np.ndarray:
        """(n_q, 2) bounds of each q̈ component over the ambiguity family (±inf when unbounded)."""
        out = np.repeat(self.qdd[:, None], 2, axis=1).astype(float)
        if self.w_domain is None:
            return out
        W = self.w_domain
        for i in range(self.n_q):
            row = self.null_basis[i]
            if np.abs(row).max() <= 1e-12:
                continue
            for k, sign in ((0, 1.0), (1, -1.0)):
                res = linprog(
                    sign * row,
                    A_ub=-W.N if W.N.shape[0] else None,
                    b_ub=-W.e if W.N.shape[0] else None,
                    bounds=[(None, None)] * W.dim,
                    method="highs",
                )
                if res.status == 0:
                    out[i, k] = self.qdd[i] + sign * res.fun
                else:
                    out[i, k] = -np.inf if k == 0 else np.inf
        return out


def modes_consistent_with(snap: ContactSnapshot, tau: np.ndarray, global_lp: bool = True, tol: float = 1e-8):
    """The forward question: every mode consistent with (q, q̇, τ), with q̈ and f (or their w-family)."""
    tau = np.atleast_1d(np.asarray(tau, float))
    modes, kin = feasible_modes(snap, global_lp=global_lp)
    out: list[ConsistentMode] = []
    for mode in modes:
        sol = solve_mode(snap, kin, mode)
        scale = 1.0 + np.abs(sol.tau_eq_rhs).max(initial=0.0) + np.abs(tau).max(initial=0.0)
        if sol.tau_eq.shape[0] and np.abs(sol.tau_eq @ tau - sol.tau_eq_rhs).max() > tol * scale:
            continue
        t = sol.n_tau
        D = sol.domain
        rhs = D.e - D.N[:, :t] @ tau
        z_tau = sol.Z_tau @ tau + sol.z_0
        if sol.n_w == 0:
            if np.all(rhs <= tol * (1.0 + np.abs(rhs).max(initial=0.0))):
                out.append(ConsistentMode(mode, z_tau, sol.null_basis, None, sol.n_q))
            continue
        W = HPolytope.from_arrays(D.N[:, t:], rhs)
        if is_feasible(W):
            out.append(ConsistentMode(mode, z_tau, sol.null_basis, W, sol.n_q))
    return out
