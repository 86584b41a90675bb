"""H-polytopes {x : N x >= e, A_eq x = b_eq} and the three polyhedral operations of paper 003.

Redundancy removal and Chebyshev balls are linear programs solved with scipy's HiGHS; Fourier–Motzkin
elimination is written out because no maintained numpy/scipy library projects H-polytopes, and the
paper's method (FM followed by LP reduction, Huynh–Lassez) is short when done on dense arrays.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.optimize import linprog

from . import dense_lp

LOG = logging.getLogger(__name__)

#: Feasibility / redundancy tolerance on normalised rows (|n_i| = 1).
POLYTOPE_TOL = 1e-9
#: Radius cap so that Chebyshev LPs of unbounded sets stay bounded.
RADIUS_CAP = 1e6


@dataclass(frozen=True)
class HPolytope:
    """Convex polyhedron {x : N x >= e, A_eq x = b_eq}; rows of N may be empty (then only equalities)."""

    N: np.ndarray
    e: np.ndarray
    A_eq: np.ndarray
    b_eq: np.ndarray

    @staticmethod
    def from_arrays(N, e, A_eq=None, b_eq=None) -> HPolytope:
        N = np.atleast_2d(np.asarray(N, dtype=float))
        dim = N.shape[1]
        e = np.asarray(e, dtype=float).reshape(-1)
        if A_eq is None:
            A_eq = np.zeros((0, dim))
            b_eq = np.zeros(0)
        b_eq = np.asarray(b_eq, dtype=float).reshape(-1)
        A_eq = np.asarray(A_eq, dtype=float).reshape(b_eq.size, dim)
        if N.shape[0] != e.size or A_eq.shape[0] != b_eq.size:
            raise ValueError(f"row mismatch: N {N.shape} e {e.shape} A_eq {A_eq.shape} b_eq {b_eq.shape}")
        return HPolytope(N, e, A_eq, b_eq)

    @staticmethod
    def whole_space(dim: int) -> HPolytope:
        return HPolytope.from_arrays(np.zeros((0, dim)), np.zeros(0))

    @property
    def dim(self) -> int:
        return self.N.shape[1]

    def contains(self, x: np.ndarray, tol: float = 1e-7) -> bool:
        x = np.asarray(x, dtype=float)
        scale = 1.0 + np.abs(x).max(initial=0.0)
        ok_ineq = bool(np.all(self.N @ x >= self.e - tol * scale))
        ok_eq = bool(np.all(np.abs(self.A_eq @ x - self.b_eq) <= tol * scale))
        return ok_ineq and ok_eq

    def intersect(self, other: HPolytope) -> HPolytope:
        if other.dim != self.dim:
            raise ValueError(f"dimension mismatch {self.dim} vs {other.dim}")
        return HPolytope(
            np.vstack([self.N, other.N]),
            np.concatenate([self.e, other.e]),
            np.vstack([self.A_eq, other.A_eq]),
            np.concatenate([self.b_eq, other.b_eq]),
        )


def _normalise(N: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Scale rows to unit norm; drop trivially true zero rows; report a trivially false one."""
    norms = np.linalg.norm(N, axis=1)
    zero = norms <= 1e-12
    if np.any(e[zero] > POLYTOPE_TOL):
        return N[:0], e[:0], False
    keep = ~zero
    return N[keep] / norms[keep, None], e[keep] / norms[keep], True


_BACKEND = {"name": "highs"}


@contextmanager
def lp_backend(name: str):
    """Temporarily solve this module's LPs with "highs" (scipy, default) or "dense" (`dense_lp`, for the
    controller's small problems where scipy's per-call overhead dominates)."""
    if name not in ("highs", "dense"):
        raise ValueError(f"unknown LP backend {name!r}; allowed: 'highs', 'dense'")
    previous = _BACKEND["name"]
    _BACKEND["name"] = name
    try:
        yield
    finally:
        _BACKEND["name"] = previous


def _lp(c, N, e, A_eq, b_eq, bounds=None):
    """min c x s.t. N x >= e, A_eq x = b_eq (free variables unless bounds given)."""
    dim = c.size
    if _BACKEND["name"] == "dense":
        rows, rhs = [-N], [-e]
        for j, (lo, hi) in enumerate(bounds or []):
            unit = np.zeros((1, dim))
            unit[0, j] = 1.0
            if hi is not None:
                rows.append(unit)
                rhs.append([hi])
            if lo is not None:
                rows.append(-unit)
                rhs.append([-lo])
        status, x, fun = dense_lp.solve(c, np.vstack(rows), np.concatenate([np.ravel(r) for r in rhs]), A_eq, b_eq)
        return SimpleNamespace(status=int(status), x=x, fun=fun)
    res = linprog(
        c,
        A_ub=-N if N.shape[0] else None,
        b_ub=-e if N.shape[0] else None,
        A_eq=A_eq if A_eq.shape[0] else None,
        b_eq=b_eq if A_eq.shape[0] else None,
        bounds=bounds if bounds is not None else [(None, None)] * dim,
        method="highs",
    )
    return res


def is_feasible(P: HPolytope) -> bool:
    res = _lp(np.zeros(P.dim), P.N, P.e, P.A_eq, P.b_eq)
    return res.status == 0


def _equality_parametrisation(P: HPolytope) -> tuple[np.ndarray, np.ndarray] | None:
    """x = x0 + Z y spans {A_eq x = b_eq}; None if the equalities are inconsistent."""
    if P.A_eq.shape[0] == 0:
        return np.zeros(P.dim), np.eye(P.dim)
    U, s, Vt = np.linalg.svd(P.A_eq)
    tol = max(P.A_eq.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0) * 1e3
    rank = int(np.sum(s > tol))
    x0 = Vt[:rank].T @ ((U[:, :rank].T @ P.b_eq) / s[:rank])
    if np.linalg.norm(P.A_eq @ x0 - P.b_eq) > 1e-8 * (1.0 + np.linalg.norm(P.b_eq)):
        return None
    return x0, Vt[rank:].T


def chebyshev_ball(P: HPolytope) -> tuple[np.ndarray | None, float]:
    """Largest ball inside P *within the affine hull of its equalities*: (center, radius).

    radius < 0 means empty; radius == 0 a lower-dimensional (degenerate) set; RADIUS_CAP unbounded-ish.
    """
    param = _equality_parametrisation(P)
    if param is None:
        return None, -1.0
    x0, Z = param
    Ny = P.N @ Z
    ey = P.e - P.N @ x0
    k = Z.shape[1]
    if k == 0:
        ok = bool(np.all(P.N @ x0 >= P.e - 1e-9 * (1 + np.abs(P.e).max(initial=0))))
        return (x0, 0.0) if ok else (None, -1.0)
    norms = np.linalg.norm(Ny, axis=1)
    zero = norms <= 1e-12
    if np.any(ey[zero] > POLYTOPE_TOL):
        return None, -1.0
    Ny, ey, norms = Ny[~zero], ey[~zero], norms[~zero]
    A = np.hstack([Ny, -norms[:, None]])
    c = np.zeros(k + 1)
    c[-1] = -1.0
    bounds = [(None, None)] * k + [(None, RADIUS_CAP)]
    res = _lp(c, A, ey, np.zeros((0, k + 1)), np.zeros(0), bounds)
    if res.status != 0:
        return None, -1.0
    radius = float(res.x[-1])
    if radius < -POLYTOPE_TOL:
        return None, -1.0
    return x0 + Z @ res.x[:k], max(radius, 0.0)


def remove_redundant(P: HPolytope) -> HPolytope | None:
    """Keep only supporting inequalities (one LP per row); None if P is empty.

    Row i is redundant iff min n_i x over the other rows is >= e_i. Rows are tested in turn and dropped
    as soon as found redundant, so duplicated rows keep exactly one copy.
    """
    N, e, ok = _normalise(P.N, P.e)
    if not ok or not is_feasible(P):
        return None
    # exact duplicates first (cheap), keeping the tightest
    if N.shape[0]:
        order = np.lexsort((-e,) + tuple(np.round(N, 12).T))
        N, e = N[order], e[order]
        keep = np.ones(N.shape[0], bool)
        for i in range(1, N.shape[0]):
            if np.allclose(N[i], N[i - 1], atol=1e-12):
                keep[i] = False
        N, e = N[keep], e[keep]
    active = np.ones(N.shape[0], bool)
    for i in range(N.shape[0]):
        active[i] = False
        res = _lp(N[i], N[active], e[active], P.A_eq, P.b_eq)
        if res.status == 3:  # unbounded below: row i is needed
            active[i] = True
        elif res.status == 0:
            active[i] = res.fun < e[i] - POLYTOPE_TOL
        else:  # numerical trouble: keep the row (conservative)
            active[i] = True
    return HPolytope(N[active], e[active], P.A_eq, P.b_eq)


def fourier_motzkin(P: HPolytope, keep: list[int] | np.ndarray, reduce: bool = True) -> HPolytope | None:
    """Project P onto the coordinates `keep` (in that order); None if P is empty.

    Equalities that involve an eliminated variable are used first (Gaussian substitution); then each
    remaining variable is eliminated by Fourier–Motzkin, pairing every row with a positive coefficient
    with every row with a negative one, each step followed by LP redundancy removal (the paper's
    "reduction", which keeps the row count from growing quadratically per step).
    """
    keep = [int(k) for k in keep]
    elim = [j for j in range(P.dim) if j not in keep]
    if reduce:
        red = remove_redundant(P)
        if red is None:
            return None
        N, e = red.N.copy(), red.e.copy()
    else:
        if not is_feasible(P):
            return None
        N, e = P.N.copy(), P.e.copy()
    A_eq, b_eq = P.A_eq.copy(), P.b_eq.copy()
    remaining = []
    for j in elim:  # 1) substitute equalities
        if A_eq.shape[0]:
            piv = int(np.argmax(np.abs(A_eq[:, j])))
            if abs(A_eq[piv, j]) > 1e-10 * (1.0 + np.abs(A_eq[piv]).max()):
                row, rhs = A_eq[piv] / A_eq[piv, j], b_eq[piv] / A_eq[piv, j]
                # x_j = rhs - (row - e_j) . x
                e = e - N[:, j] * rhs
                N = N - np.outer(N[:, j], row)
                others = np.arange(A_eq.shape[0]) != piv
                b_eq = b_eq[others] - A_eq[others, j] * rhs
                A_eq = A_eq[others] - np.outer(A_eq[others, j], row)
                continue
        remaining.append(j)
    for j in remaining:  # 2) Fourier–Motzkin on inequalities
        col = N[:, j]
        pos, neg, zero = col > 1e-12, col < -1e-12, np.abs(col) <= 1e-12
        new_rows = [N[zero]]
        new_rhs = [e[zero]]
        if np.any(pos) and np.any(neg):
            Np, ep = N[pos] / col[pos, None], e[pos] / col[pos]  # x_j + ... >= ep
            Nn, en = N[neg] / -col[neg, None], e[neg] / -col[neg]  # -x_j + ... >= en
            new_rows.append((Np[:, None, :] + Nn[None, :, :]).reshape(-1, N.shape[1]))
            new_rhs.append((ep[:, None] + en[None, :]).reshape(-1))
        N, e = np.vstack(new_rows), np.concatenate(new_rhs)
        N[:, j] = 0.0
        if A_eq.shape[0]:
            A_eq[:, j] = 0.0
        N, e, ok = _normalise(N, e)
        if not ok:
            return None
        if reduce and N.shape[0] > 1:
            red = remove_redundant(HPolytope(N, e, A_eq, b_eq))
            if red is None:
                return None
            N, e = red.N, red.e
    out = HPolytope(N[:, keep], e, A_eq[:, keep], b_eq)
    if out.A_eq.shape[0]:
        nz = np.linalg.norm(out.A_eq, axis=1) > 1e-12
        if np.any(np.abs(out.b_eq[~nz]) > 1e-9):
            return None
        out = HPolytope(out.N, out.e, out.A_eq[nz], out.b_eq[nz])
    return out


def project_by_lp(P: HPolytope, keep: list[int], x_keep: np.ndarray) -> bool:
    """Reference for tests: is x_keep in the projection of P? (LP feasibility in the other variables)."""
    keep = list(keep)
    elim = [j for j in range(P.dim) if j not in keep]
    N_fix, N_free = P.N[:, keep], P.N[:, elim]
    A_fix, A_free = P.A_eq[:, keep], P.A_eq[:, elim]
    Q = HPolytope.from_arrays(
        N_free.reshape(P.N.shape[0], len(elim)), P.e - N_fix @ x_keep, A_free, P.b_eq - A_fix @ x_keep
    )
    if len(elim) == 0:
        return P.contains(x_keep)
    return is_feasible(Q)


def eliminate_one_sided(N: np.ndarray, e: np.ndarray, first_eliminable: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact Fourier–Motzkin shortcut: a variable (index >= first_eliminable) whose non-zero coefficients all
    share one sign can grow without bound, so every row containing it is satisfiable and drops out of the
    projection together with the variable. Repeats until no such variable is left; returns (N, e) with the
    eliminated columns zeroed (no equality may involve these variables).
    """
    N = N.copy()
    changed = True
    while changed and N.shape[0]:
        changed = False
        for j in range(first_eliminable, N.shape[1]):
            col = N[:, j]
            nz = np.abs(col) > 1e-12
            if not nz.any():
                continue
            if np.all(col[nz] > 0) or np.all(col[nz] < 0):
                N, e = N[~nz], e[~nz]
                changed = True
                break
    return N, e


def _implicit_equalities(Ny: np.ndarray, ey: np.ndarray) -> np.ndarray | None:
    """Rows of {Ny y >= ey} that hold with equality on the whole set (None if the set is empty).

    LP: maximise Σ s_i over the candidate rows subject to Ny y − s >= ey, 0 <= s <= 1. Rows with s_i > 0 at
    the optimum can be strictly satisfied; repeating with the remaining candidates ends when the optimum is
    0, which proves every remaining candidate implicit (any strictly satisfiable one would raise the sum).
    """
    m, k = Ny.shape
    candidates = np.ones(m, bool)
    while candidates.any():
        c = np.concatenate([np.zeros(k), -candidates.astype(float)])
        A = np.hstack([Ny, -np.eye(m) * candidates[None, :]])
        bounds = [(None, None)] * k + [(0.0, 1.0 if cand else 0.0) for cand in candidates]
        res = _lp(c, A, ey, np.zeros((0, k + m)), np.zeros(0), bounds)
        if res.status != 0:
            return None
        slack = res.x[k:]
        strict = candidates & (slack > POLYTOPE_TOL)
        if not strict.any():
            return candidates
        candidates &= ~strict
    return candidates


def affine_hull(P: HPolytope) -> tuple[np.ndarray, np.ndarray] | None:
    """aff(P) as x0 + span(D) (D has orthonormal columns); None if P is empty.

    Besides the explicit equalities, inequality rows that hold with equality on all of P (implicit
    equalities) flatten the hull; they are found by `_implicit_equalities` and added to the equalities.
    """
    param = _equality_parametrisation(P)
    if param is None:
        return None
    x0, Z = param
    if Z.shape[1] == 0 or P.N.shape[0] == 0:
        return (x0, Z) if P.contains(x0, tol=1e-9) else None
    Ny, ey = P.N @ Z, P.e - P.N @ x0
    implicit = _implicit_equalities(Ny, ey)
    if implicit is None:
        return None
    if not implicit.any():
        return x0, Z
    flat = HPolytope(
        P.N[~implicit], P.e[~implicit], np.vstack([P.A_eq, P.N[implicit]]), np.concatenate([P.b_eq, P.e[implicit]])
    )
    param = _equality_parametrisation(flat)
    return None if param is None else param


def projected_dimension(P: HPolytope, coords: list[int] | np.ndarray) -> int:
    """Dimension of the projection of P onto `coords` (-1 if P is empty)."""
    hull = affine_hull(P)
    if hull is None:
        return -1
    _, D = hull
    rows = D[list(coords)]
    return int(np.linalg.matrix_rank(rows, tol=1e-9)) if rows.size else 0
