"""The controller's dense simplex against scipy's HiGHS on random small LPs."""

import numpy as np
import pytest
from scipy.optimize import linprog

from sim.planar_contact.dense_lp import solve


def highs(c, A_ub, b_ub, A_eq, b_eq):
    return linprog(
        c,
        A_ub=A_ub,
        b_ub=b_ub,
        A_eq=A_eq if A_eq.shape[0] else None,
        b_eq=b_eq if A_eq.shape[0] else None,
        bounds=[(None, None)] * c.size,
        method="highs",
    )


@pytest.mark.parametrize("seed", range(60))
def test_matches_highs_on_random_problems(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    m_ub = int(rng.integers(n, 3 * n + 4))
    m_eq = int(rng.integers(0, max(1, n - 1)))
    A_ub = rng.normal(size=(m_ub, n))
    if seed % 5 == 0:
        A_ub[1] = A_ub[0]  # duplicated (degenerate) rows
    x_feas = rng.normal(size=n)
    b_ub = A_ub @ x_feas + rng.uniform(0.0 if seed % 3 else -1.0, 1.0, m_ub)  # some problems infeasible
    A_eq = rng.normal(size=(m_eq, n))
    b_eq = A_eq @ x_feas
    c = rng.normal(size=n)
    ref = highs(c, A_ub, b_ub, A_eq, b_eq)
    status, x, obj = solve(c, A_ub, b_ub, A_eq, b_eq)
    assert status == ref.status, (status, ref.status, ref.message)
    if status == 0:
        assert obj == pytest.approx(ref.fun, rel=1e-7, abs=1e-7)
        assert np.all(A_ub @ x <= b_ub + 1e-7)
        assert np.allclose(A_eq @ x, b_eq, atol=1e-7)


def test_reports_infeasible_and_unbounded():
    assert solve(np.array([1.0]), [[1.0], [-1.0]], [0.0, -1.0])[0] == 2  # x <= 0 and x >= 1
    assert solve(np.array([-1.0]), [[-1.0]], [0.0])[0] == 3  # max x with x >= 0
