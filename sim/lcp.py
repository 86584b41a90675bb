"""Linear complementarity problems: find z >= 0 with w = M z + q >= 0 and z^T w = 0.

Shared by every contact model of the stack. Three solvers:

* ``"lemke"`` — Lemke's complementary pivoting with the lexicographic minimum-ratio rule, so degenerate
  problems cannot cycle. Exact (up to round-off) on small dense problems; the final complementary basis is
  re-solved with a direct linear solve so the answer is accurate to machine precision, not to pivot round-off.
* ``"pgs"`` — projected Gauss–Seidel (with over-relaxation), warm-startable; for large problems with
  symmetric positive (semi)definite or diagonally dominant M, where an approximate answer suffices.
* ``"enumerate"`` — brute force over all 2^n complementary index sets; the oracle for tests (n <= ~12).

Failures (ray termination, proven infeasibility, iteration limit) are reported in ``status``; ``z`` and ``w``
are then ``None``, never a wrong answer.

``p_matrix_test`` is the recursive P-matrix test of Tsatsomeros & Li (BIT 40, 2000), reporting the smallest
principal minor it met.

No library in the allowed stack (numpy/scipy/numba) solves LCPs, hence the hand-written pivoting;
scipy's HiGHS is used to certify infeasibility after a ray termination.
"""

from __future__ import annotations

import enum
import itertools
import logging
from dataclasses import dataclass

import numba
import numpy as np
from scipy.optimize import linprog

__all__ = [
    "LCPError",
    "LCPResult",
    "LCPStatus",
    "PMatrixResult",
    "complementarity_residual",
    "p_matrix_test",
    "p_matrix_test_reference",
    "solve_lcp",
]

log = logging.getLogger(__name__)


class LCPError(ValueError):
    """Malformed LCP data (shape, non-finite entries, unknown method)."""


class LCPStatus(enum.StrEnum):
    SOLVED = "solved"
    RAY_TERMINATION = "ray_termination"  # Lemke left on an unbounded ray: no answer found
    INFEASIBLE = "infeasible"  # proven: {z >= 0, Mz + q >= 0} is empty, or no complementary solution exists
    MAX_ITERATIONS = "max_iterations"


@dataclass(frozen=True)
class LCPResult:
    """Outcome of :func:`solve_lcp`. ``z``/``w`` are set only when ``status`` is SOLVED."""

    z: np.ndarray | None
    w: np.ndarray | None
    status: LCPStatus
    iterations: int  # pivots (lemke), sweeps (pgs), index sets tried (enumerate)
    method: str
    residual: float  # natural residual ||min(z, w)||_inf of the answer (inf when unsolved)
    message: str = ""

    @property
    def success(self) -> bool:
        return self.status is LCPStatus.SOLVED


def complementarity_residual(z: np.ndarray, w: np.ndarray) -> float:
    """Natural residual ||min(z, w)||_inf: zero iff (z, w) is complementary and non-negative."""
    if z.size == 0:
        return 0.0
    return float(np.max(np.abs(np.minimum(z, w))))


def _check_data(M: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    M = np.asarray(M, dtype=float)
    q = np.asarray(q, dtype=float)
    if q.ndim != 1:
        raise LCPError(f"q must be a vector, got shape {q.shape}")
    n = q.shape[0]
    if M.shape != (n, n):
        raise LCPError(f"M must have shape ({n}, {n}) to match q, got {M.shape}")
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(q))):
        raise LCPError("M and q must be finite (found NaN or inf)")
    return M, q


def solve_lcp(
    M: np.ndarray,
    q: np.ndarray,
    method: str = "lemke",
    *,
    z0: np.ndarray | None = None,
    max_iterations: int | None = None,
    tol: float = 1e-10,
    relaxation: float = 1.0,
    check_input: bool = True,
) -> LCPResult:
    """Solve the LCP (q, M).

    ``z0`` warm-starts PGS (ignored by the others). ``tol`` is the PGS stopping residual and the feasibility
    tolerance of the enumeration. ``max_iterations`` defaults to 50 n + 100 pivots (lemke), 1000 sweeps (pgs).
    ``check_input=False`` skips the shape/finiteness checks, for callers in a hot loop that build M and q
    themselves (float64 arrays of matching shape).
    """
    if check_input:
        M, q = _check_data(M, q)
    if method == "lemke":
        return _lemke(M, q, max_iterations if max_iterations is not None else 50 * q.size + 100)
    if method == "pgs":
        return _pgs(M, q, z0, max_iterations if max_iterations is not None else 1000, tol, relaxation)
    if method == "enumerate":
        return _enumerate(M, q, tol)
    raise LCPError(f"unknown LCP method {method!r}; allowed: 'lemke', 'pgs', 'enumerate'")


# ----------------------------------------------------------------------------------------------- Lemke


def _lex_min_row(T: np.ndarray, rows: np.ndarray, col: int, n: int, rhs: int) -> int:
    """Lexicographic minimum-ratio rule: compare (rhs, B^-1 row) / pivot-column entry, column by column.

    Because the rows of B^-1 are linearly independent the minimum is unique, which is what rules out cycling.
    """
    piv = T[rows, col]
    keys = np.concatenate([T[rows, rhs][:, None], T[rows, :n]], axis=1) / piv[:, None]
    candidates = np.arange(rows.size)
    scale = max(1.0, float(np.max(np.abs(keys))))
    for c in range(n + 1):
        vals = keys[candidates, c]
        best = vals.min()
        candidates = candidates[vals <= best + 1e-11 * scale]
        if candidates.size == 1:
            break
    return int(rows[candidates[0]])


def _lemke_reference(M: np.ndarray, q: np.ndarray, max_iterations: int) -> LCPResult:
    """Plain-numpy Lemke (the readable reference of the compiled :func:`_lemke_kernel`)."""
    n = q.size
    if n == 0 or np.all(q >= 0.0):
        z = np.zeros(n)
        return LCPResult(z, q.copy(), LCPStatus.SOLVED, 0, "lemke", 0.0, "trivial: q >= 0")
    # Tableau for  w - M z - d z0 = q  with covering vector d = 1. Columns: w (0..n-1), z (n..2n-1), z0, rhs.
    z0_col, rhs = 2 * n, 2 * n + 1
    T = np.zeros((n, 2 * n + 2))
    T[:, :n] = np.eye(n)
    T[:, n : 2 * n] = -M
    T[:, z0_col] = -1.0
    T[:, rhs] = q
    basis = np.arange(n)  # basic variable of each row
    pivot_tol = 1e-12 * max(1.0, float(np.max(np.abs(M))))

    def pivot(row: int, col: int) -> None:
        T[row] /= T[row, col]
        others = np.arange(n) != row
        T[others] -= np.outer(T[others, col], T[row])
        basis[row] = col

    # First pivot: z0 enters at the level that makes every w_i >= 0 (row of the most negative q_i).
    most_negative = np.flatnonzero(q <= q.min() + 1e-14 * max(1.0, abs(q.min())))
    T_neg = T.copy()
    T_neg[:, z0_col] = 1.0  # ratio q_i / d_i on the rows tied for the minimum
    leave_row = _lex_min_row(T_neg, most_negative, z0_col, n, rhs) if most_negative.size > 1 else most_negative[0]
    leaving = int(basis[leave_row])
    pivot(leave_row, z0_col)
    iterations = 1
    while iterations < max_iterations:
        entering = leaving + n if leaving < n else leaving - n  # complement of the variable that just left
        column = T[:, entering]
        rows = np.flatnonzero(column > pivot_tol)
        if rows.size == 0:
            return _ray_termination(M, q, iterations)
        z0_rows = rows[basis[rows] == z0_col]
        leave_row = _lex_min_row(T, rows, entering, n, rhs)
        if z0_rows.size and T[z0_rows[0], rhs] / T[z0_rows[0], entering] <= (
            T[leave_row, rhs] / T[leave_row, entering] + 1e-13
        ):
            leave_row = int(z0_rows[0])  # prefer z0 leaving on ties: it ends the path
        leaving = int(basis[leave_row])
        pivot(leave_row, entering)
        iterations += 1
        if leaving == z0_col:
            return _polish(M, q, basis, T, n, rhs, iterations)
    return LCPResult(None, None, LCPStatus.MAX_ITERATIONS, iterations, "lemke", np.inf, "pivot limit reached")


@numba.njit(cache=True)
def _lex_min_row_kernel(T, rows, col, n, rhs):  # pragma: no cover - compiled
    k = rows.size
    keys = np.empty((k, n + 1))
    scale = 1.0
    for a in range(k):
        piv = T[rows[a], col]
        keys[a, 0] = T[rows[a], rhs] / piv
        for c in range(n):
            keys[a, c + 1] = T[rows[a], c] / piv
        for c in range(n + 1):
            if abs(keys[a, c]) > scale:
                scale = abs(keys[a, c])
    alive = np.ones(k, dtype=np.bool_)
    count = k
    for c in range(n + 1):
        best = np.inf
        for a in range(k):
            if alive[a] and keys[a, c] < best:
                best = keys[a, c]
        for a in range(k):
            if alive[a] and keys[a, c] > best + 1e-11 * scale:
                alive[a] = False
                count -= 1
        if count == 1:
            break
    for a in range(k):
        if alive[a]:
            return rows[a]
    return rows[0]


@numba.njit(cache=True)
def _pivot_kernel(T, basis, row, col):  # pragma: no cover - compiled
    n, width = T.shape
    p = T[row, col]
    for j in range(width):
        T[row, j] /= p
    for i in range(n):
        if i != row:
            f = T[i, col]
            if f != 0.0:
                for j in range(width):
                    T[i, j] -= f * T[row, j]
    basis[row] = col


@numba.njit(cache=True)
def _lemke_kernel(M, q, max_iterations):  # pragma: no cover - compiled
    """Same pivoting as :func:`_lemke_reference`. Returns (status, tableau, basis, pivots) with status
    0 = solved, 1 = ray termination, 2 = pivot limit."""
    n = q.size
    z0_col, rhs = 2 * n, 2 * n + 1
    T = np.zeros((n, 2 * n + 2))
    for i in range(n):
        T[i, i] = 1.0
        for j in range(n):
            T[i, n + j] = -M[i, j]
        T[i, z0_col] = -1.0
        T[i, rhs] = q[i]
    basis = np.arange(n)
    pivot_tol = 1e-12 * max(1.0, np.max(np.abs(M)))
    qmin = q.min()
    tied = np.flatnonzero(q <= qmin + 1e-14 * max(1.0, abs(qmin)))
    if tied.size > 1:
        T_neg = T.copy()
        T_neg[:, z0_col] = 1.0
        leave_row = _lex_min_row_kernel(T_neg, tied, z0_col, n, rhs)
    else:
        leave_row = tied[0]
    leaving = basis[leave_row]
    _pivot_kernel(T, basis, leave_row, z0_col)
    iterations = 1
    while iterations < max_iterations:
        entering = leaving + n if leaving < n else leaving - n
        rows = np.flatnonzero(T[:, entering] > pivot_tol)
        if rows.size == 0:
            return 1, T, basis, iterations
        leave_row = _lex_min_row_kernel(T, rows, entering, n, rhs)
        for r in rows:
            if basis[r] == z0_col:
                if T[r, rhs] / T[r, entering] <= T[leave_row, rhs] / T[leave_row, entering] + 1e-13:
                    leave_row = r
                break
        leaving = basis[leave_row]
        _pivot_kernel(T, basis, leave_row, entering)
        iterations += 1
        if leaving == z0_col:
            return 0, T, basis, iterations
    return 2, T, basis, iterations


@numba.njit(cache=True)
def _polish_kernel(M, q, basis, T):  # pragma: no cover - compiled
    """Compiled twin of :func:`_polish`'s refinement: z_S = −M_SS⁻¹ q_S on the final complementary basis."""
    n = q.size
    rhs = 2 * n + 1
    z = np.zeros(n)
    count = 0
    for row in range(n):
        var = basis[row]
        if n <= var < 2 * n:
            z[var - n] = T[row, rhs]
            count += 1
    if count == 0:
        return z
    idx = np.empty(count, dtype=np.int64)
    k = 0
    for row in range(n):
        var = basis[row]
        if n <= var < 2 * n:
            idx[k] = var - n
            k += 1
    block = np.empty((count, count))
    b = np.empty(count)
    for a in range(count):
        b[a] = -q[idx[a]]
        for c in range(count):
            block[a, c] = M[idx[a], idx[c]]
    try:
        sol = np.linalg.solve(block, b)
    except Exception:  # noqa: BLE001 - singular block (degenerate PSD problem): keep the tableau values
        return z
    floor = -1e-9 * (1.0 + np.max(np.abs(z)))
    for a in range(count):
        if not sol[a] >= floor:  # also rejects NaN
            return z
    for a in range(n):
        z[a] = 0.0
    for a in range(count):
        z[idx[a]] = sol[a]
    return z


def _lemke(M: np.ndarray, q: np.ndarray, max_iterations: int) -> LCPResult:
    n = q.size
    if n == 0 or np.all(q >= 0.0):
        return LCPResult(np.zeros(n), q.copy(), LCPStatus.SOLVED, 0, "lemke", 0.0, "trivial: q >= 0")
    M = np.ascontiguousarray(M)
    status, T, basis, iterations = _lemke_kernel(M, q, max_iterations)
    if status == 1:
        return _ray_termination(M, q, iterations)
    if status == 2:
        return LCPResult(None, None, LCPStatus.MAX_ITERATIONS, iterations, "lemke", np.inf, "pivot limit reached")
    z = np.maximum(_polish_kernel(M, q, basis, T), 0.0)
    w = M @ z + q
    return LCPResult(z, w, LCPStatus.SOLVED, iterations, "lemke", complementarity_residual(z, w))


def _polish(M, q, basis, T, n, rhs, iterations) -> LCPResult:
    """Re-solve the final complementary basis directly: z_S = -M_SS^-1 q_S, which removes pivot round-off."""
    z = np.zeros(n)
    for row, var in enumerate(basis):
        if n <= var < 2 * n:
            z[var - n] = T[row, rhs]
    basic_z = basis[(basis >= n) & (basis < 2 * n)] - n
    if basic_z.size:
        try:
            z_refined = np.zeros(n)
            z_refined[basic_z] = np.linalg.solve(M[np.ix_(basic_z, basic_z)], -q[basic_z])
            if np.all(z_refined >= -1e-9 * (1.0 + np.abs(z).max())):
                z = z_refined
        except np.linalg.LinAlgError:
            pass  # singular basis block (degenerate PSD problem): keep the tableau values
    z = np.maximum(z, 0.0)
    w = M @ z + q
    residual = complementarity_residual(z, w)
    return LCPResult(z, w, LCPStatus.SOLVED, iterations, "lemke", residual)


def _ray_termination(M: np.ndarray, q: np.ndarray, iterations: int) -> LCPResult:
    """Lemke stopped on a secondary ray. For copositive-plus M (e.g. PSD) that proves infeasibility; we
    certify infeasibility independently by an LP feasibility check
    with HiGHS and report RAY_TERMINATION otherwise."""
    n = q.size
    lp = linprog(np.zeros(n), A_ub=-M, b_ub=q, bounds=[(0, None)] * n, method="highs")
    if lp.status == 2:
        return LCPResult(
            None, None, LCPStatus.INFEASIBLE, iterations, "lemke", np.inf,
            "ray termination; HiGHS proves {z >= 0, Mz + q >= 0} empty",
        )  # fmt: skip
    return LCPResult(
        None, None, LCPStatus.RAY_TERMINATION, iterations, "lemke", np.inf,
        "ray termination on a feasible problem: M is not copositive-plus or the LCP has no solution",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------- PGS


@numba.njit(cache=True)
def _pgs_sweeps(M, q, z, max_sweeps, tol, omega):  # pragma: no cover - compiled
    n = q.size
    for sweep in range(1, max_sweeps + 1):
        for i in range(n):
            r = q[i]
            for j in range(n):
                r += M[i, j] * z[j]
            zi = z[i] - omega * r / M[i, i]
            z[i] = zi if zi > 0.0 else 0.0
        res = 0.0
        for i in range(n):
            wi = q[i]
            for j in range(n):
                wi += M[i, j] * z[j]
            m = min(z[i], wi)
            if abs(m) > res:
                res = abs(m)
        if res <= tol:
            return sweep, res
    return max_sweeps, res


def _pgs(M, q, z0, max_iterations, tol, relaxation) -> LCPResult:
    n = q.size
    if np.any(np.diag(M) <= 0.0):
        raise LCPError("method 'pgs' needs a positive diagonal of M; use method='lemke'")
    if not 0.0 < relaxation < 2.0:
        raise LCPError(f"relaxation must lie in (0, 2), got {relaxation}")
    z = np.zeros(n) if z0 is None else np.maximum(np.asarray(z0, dtype=float).copy(), 0.0)
    if z.shape != (n,):
        raise LCPError(f"z0 must have shape ({n},), got {z.shape}")
    if n == 0:
        return LCPResult(z, q.copy(), LCPStatus.SOLVED, 0, "pgs", 0.0)
    sweeps, res = _pgs_sweeps(np.ascontiguousarray(M), q, z, max_iterations, tol, relaxation)
    if res > tol:
        return LCPResult(None, None, LCPStatus.MAX_ITERATIONS, sweeps, "pgs", float(res),
                         f"residual {res:.3g} > tol {tol:.3g} after {sweeps} sweeps")  # fmt: skip
    w = M @ z + q
    return LCPResult(z, w, LCPStatus.SOLVED, sweeps, "pgs", complementarity_residual(z, w))


# ------------------------------------------------------------------------------------------- enumerate


def _enumerate(M: np.ndarray, q: np.ndarray, tol: float) -> LCPResult:
    n = q.size
    if n > 16:
        raise LCPError(f"method 'enumerate' tries 2^n index sets; n = {n} is too large (max 16)")
    tried = 0
    scale = 1.0 + float(np.max(np.abs(q))) if n else 1.0
    for size in range(n + 1):
        for support in itertools.combinations(range(n), size):
            tried += 1
            idx = np.array(support, dtype=int)
            z = np.zeros(n)
            if size:
                block = M[np.ix_(idx, idx)]
                sol, *_ = np.linalg.lstsq(block, -q[idx], rcond=None)
                if np.max(np.abs(block @ sol + q[idx])) > 1e-9 * scale:
                    continue  # singular block without a solution on this support
                z[idx] = sol
            w = M @ z + q
            if np.all(z >= -tol * scale) and np.all(w >= -tol * scale):
                z = np.maximum(z, 0.0)
                w = M @ z + q
                return LCPResult(z, w, LCPStatus.SOLVED, tried, "enumerate", complementarity_residual(z, w))
    return LCPResult(None, None, LCPStatus.INFEASIBLE, tried, "enumerate", np.inf,
                     "no complementary index set gives a solution")  # fmt: skip


# ------------------------------------------------------------------------------------ P-matrix test


@dataclass(frozen=True)
class PMatrixResult:
    is_p_matrix: bool
    smallest_minor: float  # smallest principal minor met (all 2^n - 1 of them when is_p_matrix)
    minors_checked: int


@numba.njit(cache=True)
def _p_matrix_kernel(A):  # pragma: no cover - compiled
    """Depth-first Tsatsomeros–Li recursion with an explicit stack (same visiting order as the reference)."""
    n = A.shape[0]
    cap = 2 * n + 2
    mats = np.zeros((cap, n, n))
    sizes = np.zeros(cap, dtype=np.int64)
    factors = np.zeros(cap)
    mats[0] = A
    sizes[0] = n
    factors[0] = 1.0
    top = 1
    smallest = np.inf
    checked = 0
    while top > 0:
        top -= 1
        size, factor = sizes[top], factors[top]
        B = mats[top, :size, :size].copy()
        pivot = B[0, 0]
        minor = factor * pivot
        checked += 1
        if minor < smallest:
            smallest = minor
        if minor <= 0.0:
            return False, smallest, checked
        if size == 1:
            continue
        m = size - 1
        # push the Schur complement first so the trailing block (pushed last) is visited first
        for i in range(m):
            for j in range(m):
                mats[top, i, j] = B[i + 1, j + 1] - B[i + 1, 0] * B[0, j + 1] / pivot
        sizes[top], factors[top] = m, minor
        top += 1
        mats[top, :m, :m] = B[1:, 1:]
        sizes[top], factors[top] = m, factor
        top += 1
    return True, smallest, checked


def p_matrix_test(A: np.ndarray) -> PMatrixResult:
    """Recursive P-matrix test of Tsatsomeros & Li: A is P iff a11 > 0, A[1:,1:] is P and the Schur
    complement A/a11 is P. Every node of the recursion tree contributes exactly one principal minor,
    det A[S] = (product of the pivots on the path) * a11, so the test visits all 2^n - 1 minors in O(2^n)
    work and reports the smallest; it stops at the first non-positive minor. Compiled depth-first walk;
    :func:`p_matrix_test_reference` is the plain recursion."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise LCPError(f"P-matrix test needs a square matrix, got shape {A.shape}")
    if A.shape[0] == 0:
        return PMatrixResult(True, np.inf, 0)
    ok, smallest, checked = _p_matrix_kernel(np.ascontiguousarray(A))
    return PMatrixResult(bool(ok), float(smallest), int(checked))


def p_matrix_test_reference(A: np.ndarray) -> PMatrixResult:
    """Plain depth-first recursion of Tsatsomeros & Li: the readable reference for the batched one."""
    A = np.asarray(A, dtype=float)
    state = {"smallest": np.inf, "checked": 0}

    def recurse(B: np.ndarray, factor: float) -> bool:
        minor = factor * B[0, 0]
        state["checked"] += 1
        state["smallest"] = min(state["smallest"], minor)
        if minor <= 0.0:
            return False
        if B.shape[0] == 1:
            return True
        trailing = B[1:, 1:]
        schur = trailing - np.outer(B[1:, 0], B[0, 1:]) / B[0, 0]
        return recurse(trailing, factor) and recurse(schur, minor)

    ok = True if A.shape[0] == 0 else recurse(A, 1.0)
    return PMatrixResult(ok, float(state["smallest"]), int(state["checked"]))
