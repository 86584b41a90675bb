"""A small dense two-phase simplex (Bland's rule) compiled with numba, for the controller's tiny LPs.

Why hand-written: scipy's `linprog(method="highs")` costs ~1 ms per call on this machine, almost all of it
input validation and sparse conversion, while the controller solves dozens of LPs with <= ~10 variables and
<= ~40 rows every 5 ms. This solver does such a problem in microseconds. The analysis path keeps using
HiGHS; the tests compare the two on random feasible, infeasible and unbounded problems.

Problem: min cᵀx  s.t.  A_ub x <= b_ub,  A_eq x = b_eq,  x free.
Status codes follow scipy: 0 optimal, 2 infeasible, 3 unbounded, 1 iteration limit.
"""

from __future__ import annotations

import numba
import numpy as np

PIVOT_TOL = 1e-10
FEAS_TOL = 1e-9


@numba.njit(cache=True)
def _simplex(T, basis, n_cols, max_iter):
    """Minimise the last row of tableau T (rows: constraints, last row: reduced costs) over columns < n_cols.

    Bland's rule: entering = lowest index with negative reduced cost; leaving = min ratio, lowest basis index.
    Returns 0 optimal, 3 unbounded, 1 iteration limit.
    """
    m = T.shape[0] - 1
    rhs = T.shape[1] - 1
    for _ in range(max_iter):
        enter = -1
        for j in range(n_cols):
            if T[m, j] < -PIVOT_TOL:
                enter = j
                break
        if enter < 0:
            return 0
        leave = -1
        best = np.inf
        for i in range(m):
            a = T[i, enter]
            if a > PIVOT_TOL:
                ratio = T[i, rhs] / a
                if ratio < best - 1e-12 or (abs(ratio - best) <= 1e-12 and leave >= 0 and basis[i] < basis[leave]):
                    best = ratio
                    leave = i
        if leave < 0:
            return 3
        piv = T[leave, enter]
        for j in range(T.shape[1]):
            T[leave, j] /= piv
        for i in range(m + 1):
            if i != leave:
                f = T[i, enter]
                if f != 0.0:
                    for j in range(T.shape[1]):
                        T[i, j] -= f * T[leave, j]
        basis[leave] = enter
    return 1


@numba.njit(cache=True)
def dense_lp(c, A_ub, b_ub, A_eq, b_eq, max_iter=2000):
    """Returns (status, x, objective)."""
    n = c.size
    m_ub, m_eq = A_ub.shape[0], A_eq.shape[0]
    m = m_ub + m_eq
    n_var = 2 * n + m_ub  # x+, x-, slacks
    n_tot = n_var + m  # + artificials
    T = np.zeros((m + 1, n_tot + 1))
    basis = np.empty(m, np.int64)
    for i in range(m_ub):
        sign = 1.0 if b_ub[i] >= 0 else -1.0
        for j in range(n):
            T[i, j] = sign * A_ub[i, j]
            T[i, n + j] = -sign * A_ub[i, j]
        T[i, 2 * n + i] = sign
        T[i, n_tot] = sign * b_ub[i]
    for k in range(m_eq):
        i = m_ub + k
        sign = 1.0 if b_eq[k] >= 0 else -1.0
        for j in range(n):
            T[i, j] = sign * A_eq[k, j]
            T[i, n + j] = -sign * A_eq[k, j]
        T[i, n_tot] = sign * b_eq[k]
    for i in range(m):
        T[i, n_var + i] = 1.0
        basis[i] = n_var + i
    # phase I: minimise the sum of artificials
    for j in range(n_tot + 1):
        s = 0.0
        for i in range(m):
            s += T[i, j]
        T[m, j] = -s
    for i in range(m):
        T[m, n_var + i] = 0.0
    status = _simplex(T, basis, n_tot, max_iter)
    x = np.zeros(n)
    if status == 1:
        return 1, x, np.nan
    scale = 1.0
    for i in range(m):
        scale = max(scale, abs(T[i, n_tot]))
    if -T[m, n_tot] > FEAS_TOL * scale:
        return 2, x, np.nan
    # drive remaining artificials out of the basis where possible
    for i in range(m):
        if basis[i] >= n_var:
            for j in range(n_var):
                if abs(T[i, j]) > 1e-9:
                    piv = T[i, j]
                    for jj in range(n_tot + 1):
                        T[i, jj] /= piv
                    for r in range(m + 1):
                        if r != i:
                            f = T[r, j]
                            if f != 0.0:
                                for jj in range(n_tot + 1):
                                    T[r, jj] -= f * T[i, jj]
                    basis[i] = j
                    break
    # phase II: original objective on x+ - x-
    for j in range(n_tot + 1):
        T[m, j] = 0.0
    for j in range(n):
        T[m, j] = c[j]
        T[m, n + j] = -c[j]
    for i in range(m):
        b = basis[i]
        f = T[m, b]
        if f != 0.0:
            for jj in range(n_tot + 1):
                T[m, jj] -= f * T[i, jj]
    # artificial columns stay out (only columns < n_var may enter); a basic artificial sits at level 0
    status = _simplex(T, basis, n_var, max_iter)
    if status != 0:
        return status, x, np.nan
    for i in range(m):
        b = basis[i]
        if b < n:
            x[b] += T[i, n_tot]
        elif b < 2 * n:
            x[b - n] -= T[i, n_tot]
    obj = 0.0
    for j in range(n):
        obj += c[j] * x[j]
    return 0, x, obj


def solve(c, A_ub=None, b_ub=None, A_eq=None, b_eq=None):
    """Convenience wrapper with empty-matrix defaults; returns (status, x, objective)."""
    c = np.ascontiguousarray(c, dtype=float)
    n = c.size
    A_ub = np.zeros((0, n)) if A_ub is None else np.ascontiguousarray(A_ub, dtype=float).reshape(-1, n)
    b_ub = np.zeros(0) if b_ub is None else np.ascontiguousarray(b_ub, dtype=float).reshape(-1)
    A_eq = np.zeros((0, n)) if A_eq is None else np.ascontiguousarray(A_eq, dtype=float).reshape(-1, n)
    b_eq = np.zeros(0) if b_eq is None else np.ascontiguousarray(b_eq, dtype=float).reshape(-1)
    return dense_lp(c, A_ub, b_ub, A_eq, b_eq)
