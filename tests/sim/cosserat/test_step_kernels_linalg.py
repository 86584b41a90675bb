"""The compiled step's dense linear algebra (`sim.cosserat._step_kernels`): plain loops, so the rod's trajectory does
not depend on the OpenBLAS kernel. Checked against numpy and, bit for bit, against the textbook one-row-at-a-time
elimination that the blocked Cholesky must reproduce (same operations on every element, in the same order)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.cosserat._step_kernels import (
    cholesky_in_place,
    cholesky_solve,
    cholesky_solve_rows,
    lu_in_place,
    lu_solve,
)


def _spd(n: int, seed: int, band: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, n))
    a = b @ b.T + n * np.eye(n)
    if band is not None:  # zeros off the band: rows whose multipliers are zero (the skipped updates)
        i, j = np.indices((n, n))
        a[np.abs(i - j) > band] = 0.0
    return a


def _cholesky_one_row_at_a_time(a: np.ndarray) -> np.ndarray:
    """The unblocked right-looking factor U (A = UᵀU), pure Python, each update in the order k = 0, 1, …"""
    a = a.copy()
    n = a.shape[0]
    for k in range(n):
        d = math.sqrt(a[k, k])
        a[k, k] = d
        for j in range(k + 1, n):
            a[k, j] *= 1.0 / d
        for i in range(k + 1, n):
            f = a[k, i]
            if f != 0.0:
                for j in range(i, n):
                    a[i, j] -= f * a[k, j]
    return np.triu(a)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 13, 30])
@pytest.mark.parametrize("band", [None, 2, 6])
def test_the_blocked_cholesky_is_bitwise_the_one_row_at_a_time_factor(n: int, band: int | None) -> None:
    a = _spd(n, seed=n, band=band)
    chol = a.copy()
    assert cholesky_in_place(chol)
    upper = np.triu(chol)
    assert np.array_equal(upper, _cholesky_one_row_at_a_time(a))
    assert np.array_equal(np.tril(chol), upper.T)  # Uᵀ mirrored into the lower triangle
    np.testing.assert_allclose(upper, np.linalg.cholesky(a).T, rtol=1e-12, atol=1e-12)


def test_cholesky_refuses_a_matrix_that_is_not_positive_definite() -> None:
    a = _spd(9, seed=1)
    a[6, 6] = -1.0
    assert not cholesky_in_place(a.copy())


@pytest.mark.parametrize("n, r", [(1, 1), (9, 4), (84, 39), (133, 63)])
def test_cholesky_solves_match_numpy(n: int, r: int) -> None:
    a = _spd(n, seed=n, band=12)
    chol = a.copy()
    assert cholesky_in_place(chol)
    rng = np.random.default_rng(7)
    rhs = rng.standard_normal((n, r))
    solved = rhs.copy()
    cholesky_solve_rows(chol, solved)
    np.testing.assert_allclose(solved, np.linalg.solve(a, rhs), rtol=1e-10, atol=1e-12)
    one = np.empty(n)
    cholesky_solve(chol, rhs[:, 0], one)
    np.testing.assert_allclose(one, solved[:, 0], rtol=1e-12, atol=1e-15)  # one column or many


def _lu_one_column_at_a_time(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unblocked Doolittle elimination with partial pivoting, pure Python: each update in step order."""
    a = a.copy()
    n = a.shape[0]
    piv = np.empty(n, dtype=np.int64)
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k]))) if abs(a[k, k]) < np.abs(a[k:, k]).max() else k
        piv[k] = p
        a[[k, p]] = a[[p, k]]
        inv = 1.0 / a[k, k]
        for i in range(k + 1, n):
            f = a[i, k] * inv
            a[i, k] = f
            if f != 0.0:
                for j in range(k + 1, n):
                    a[i, j] -= f * a[k, j]
    return a, piv


@pytest.mark.parametrize("n", [1, 2, 4, 5, 7, 8, 9, 13, 30])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_blocked_lu_is_bitwise_the_one_column_at_a_time_elimination(n: int, sparse: bool) -> None:
    rng = np.random.default_rng(100 + n)
    a = rng.standard_normal((n, n)) + 2.0 * np.eye(n)
    if sparse:  # zero multipliers: the skipped updates
        a[rng.random((n, n)) < 0.3] = 0.0
        a += 3.0 * np.eye(n)
    lu = a.copy()
    piv = np.empty(n, dtype=np.int64)
    assert lu_in_place(lu, piv)
    lu_ref, piv_ref = _lu_one_column_at_a_time(a)
    assert np.array_equal(piv, piv_ref)
    assert np.array_equal(lu, lu_ref)


@pytest.mark.parametrize("n", [1, 3, 39])
def test_lu_with_partial_pivoting_solves_and_refuses_a_singular_matrix(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n))
    if n > 1:
        a[0, 0] = 0.0  # the first pivot must be searched for
    b = rng.standard_normal(n)
    lu = a.copy()
    piv = np.empty(n, dtype=np.int64)
    assert lu_in_place(lu, piv)
    x = b.copy()
    lu_solve(lu, piv, x)
    np.testing.assert_allclose(a @ x, b, rtol=1e-9, atol=1e-10)
    singular = a.copy()
    singular[:, -1] = 0.0
    assert not lu_in_place(singular, np.empty(n, dtype=np.int64))
