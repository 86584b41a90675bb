"""LCP toolkit: Lemke vs brute force, degeneracy, infeasibility, PGS, P-matrix test."""

import itertools

import numpy as np
import pytest

from sim.lcp import (
    LCPError,
    LCPStatus,
    complementarity_residual,
    p_matrix_test,
    p_matrix_test_reference,
    solve_lcp,
)

SIZES = range(1, 9)
N_PROBLEMS = 500


def random_p_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    """Non-symmetric P-matrices: positive definite (not symmetric) plus, half the time, a row scaling
    (D A with D > 0 keeps the P property but destroys positive definiteness)."""
    B = rng.normal(size=(n, n))
    S = rng.normal(size=(n, n))
    A = B @ B.T + 0.1 * np.eye(n) + (S - S.T)
    if rng.random() < 0.5:
        A = np.diag(rng.uniform(0.1, 10.0, n)) @ A
    return A


def random_psd(rng: np.random.Generator, n: int) -> np.ndarray:
    rank = rng.integers(1, n + 1)
    B = rng.normal(size=(n, rank))
    return B @ B.T


def check_solution(M, q, res, tol=1e-9):
    assert res.status is LCPStatus.SOLVED, res.message
    scale = 1.0 + np.abs(q).max()
    assert np.all(res.z >= 0.0)
    assert np.all(res.w >= -tol * scale)
    np.testing.assert_allclose(res.w, M @ res.z + q, atol=1e-12 * scale)
    assert complementarity_residual(res.z, res.w) < tol * scale


@pytest.mark.parametrize("n", SIZES)
def test_lemke_matches_enumeration_on_p_matrices(n):
    rng = np.random.default_rng(1000 + n)
    for _ in range(N_PROBLEMS):
        M = random_p_matrix(rng, n)
        q = rng.normal(size=n) * 3.0
        lemke = solve_lcp(M, q, "lemke")
        brute = solve_lcp(M, q, "enumerate")
        check_solution(M, q, lemke)
        check_solution(M, q, brute)
        # P-matrix: the solution is unique, so the two must agree
        np.testing.assert_allclose(lemke.z, brute.z, atol=1e-9 * (1 + np.abs(brute.z).max()), rtol=0)


@pytest.mark.parametrize("n", SIZES)
def test_lemke_matches_enumeration_on_psd_matrices(n):
    """Symmetric PSD (often singular): z need not be unique but w is (M(z1 - z2) = 0), and a solution exists
    when the problem is feasible; we build feasible q = w* - M z* from a complementary pair."""
    rng = np.random.default_rng(2000 + n)
    for _ in range(N_PROBLEMS):
        M = random_psd(rng, n)
        support = rng.random(n) < 0.5
        z_star = np.where(support, rng.uniform(0, 2, n), 0.0)
        w_star = np.where(support, 0.0, rng.uniform(0, 2, n))
        q = w_star - M @ z_star
        lemke = solve_lcp(M, q, "lemke")
        brute = solve_lcp(M, q, "enumerate")
        check_solution(M, q, lemke)
        check_solution(M, q, brute)
        np.testing.assert_allclose(lemke.w, brute.w, atol=1e-9 * (1 + np.abs(q).max()), rtol=0)


def test_trivial_and_empty():
    res = solve_lcp(np.eye(3), np.array([1.0, 0.0, 2.0]))
    assert res.success and res.iterations == 0 and np.all(res.z == 0)
    res = solve_lcp(np.zeros((0, 0)), np.zeros(0))
    assert res.success and res.z.size == 0


def test_one_dimensional_analytic():
    # w = 2 z - 4  ->  z = 2, w = 0
    res = solve_lcp(np.array([[2.0]]), np.array([-4.0]))
    assert res.z[0] == pytest.approx(2.0, abs=1e-15) and res.w[0] == pytest.approx(0.0, abs=1e-15)


def test_degenerate_problem_does_not_cycle():
    """Ties in every ratio test (q with repeated entries, a permutation-symmetric M, zero levels in the
    basis): the lexicographic rule must still terminate with the unique answer."""
    n = 6
    M = np.ones((n, n)) + np.eye(n)  # P-matrix with fully symmetric, tie-prone structure
    q = -np.ones(n)
    res = solve_lcp(M, q, "lemke", max_iterations=200)
    check_solution(M, q, res)
    np.testing.assert_allclose(res.z, np.full(n, 1.0 / (n + 1)), atol=1e-12)
    # degenerate rhs: several zeros in q with a negative entry (basic variables at zero level)
    q2 = np.array([-1.0, 0.0, 0.0, 0.0, -1.0, 0.0])
    res2 = solve_lcp(M, q2, "lemke", max_iterations=200)
    check_solution(M, q2, res2)
    brute = solve_lcp(M, q2, "enumerate")
    np.testing.assert_allclose(res2.z, brute.z, atol=1e-12)


def test_murty_hard_problem_terminates():
    """Murty's upper-triangular family (exponential for some pivoting rules) stays within the pivot limit."""
    n = 8
    M = np.eye(n) + 2 * np.triu(np.ones((n, n)), 1)
    q = -np.ones(n)
    res = solve_lcp(M, q, "lemke")
    check_solution(M, q, res)
    np.testing.assert_allclose(res.z, solve_lcp(M, q, "enumerate").z, atol=1e-12)


def test_infeasible_problem_is_reported():
    # w = -z - 1 can never be >= 0 for z >= 0: PSD-negative direction, Lemke ray-terminates, HiGHS proves it.
    M = np.array([[0.0, 0.0], [0.0, 1.0]])
    q = np.array([-1.0, 1.0])
    res = solve_lcp(M, q, "lemke")
    assert res.status is LCPStatus.INFEASIBLE and res.z is None and res.w is None
    assert solve_lcp(M, q, "enumerate").status is LCPStatus.INFEASIBLE


def test_ray_termination_on_feasible_problem_is_reported_not_answered():
    """M = [[-1, 2], [2, -1]] is not copositive: Lemke runs off on a ray at once although z = (1, 1), w = 0
    solves the LCP. That must come back as RAY_TERMINATION without a z, not as an answer or 'infeasible'."""
    M = np.array([[-1.0, 2.0], [2.0, -1.0]])
    q = np.array([-1.0, -1.0])
    brute = solve_lcp(M, q, "enumerate")
    assert brute.success
    np.testing.assert_allclose(brute.z, [1.0, 1.0])
    res = solve_lcp(M, q, "lemke")
    assert res.status is LCPStatus.RAY_TERMINATION and res.z is None and res.w is None
    assert not res.success


def test_iteration_limit_is_reported():
    rng = np.random.default_rng(3)
    M = random_p_matrix(rng, 8)
    q = -np.abs(rng.normal(size=8)) - 1
    res = solve_lcp(M, q, "lemke", max_iterations=2)
    assert res.status is LCPStatus.MAX_ITERATIONS and res.z is None


def test_pgs_converges_to_lemke_on_spd_and_warm_start_helps():
    rng = np.random.default_rng(4)
    for n in (5, 20, 60):
        B = rng.normal(size=(n, n))
        M = B @ B.T + n * np.eye(n)
        q = rng.normal(size=n) * 5
        exact = solve_lcp(M, q, "lemke")
        cold = solve_lcp(M, q, "pgs", tol=1e-12)
        assert cold.success
        np.testing.assert_allclose(cold.z, exact.z, atol=1e-9)
        warm = solve_lcp(M, q + 1e-3 * rng.normal(size=n), "pgs", z0=exact.z, tol=1e-12)
        assert warm.success and warm.iterations <= cold.iterations


def test_pgs_reports_iteration_limit():
    rng = np.random.default_rng(5)
    B = rng.normal(size=(30, 3))
    M = B @ B.T + 1e-6 * np.eye(30)  # badly conditioned: PGS converges slowly
    q = rng.normal(size=30)
    res = solve_lcp(M, q, "pgs", max_iterations=3, tol=1e-14)
    assert res.status is LCPStatus.MAX_ITERATIONS and res.z is None


def test_bad_input_raises_specific_errors():
    with pytest.raises(LCPError, match="shape"):
        solve_lcp(np.eye(2), np.ones(3))
    with pytest.raises(LCPError, match="finite"):
        solve_lcp(np.eye(2), np.array([np.nan, 1.0]))
    with pytest.raises(LCPError, match="allowed"):
        solve_lcp(np.eye(2), np.ones(2), method="dantzig")
    with pytest.raises(LCPError, match="positive diagonal"):
        solve_lcp(-np.eye(2), np.ones(2), method="pgs")


def all_principal_minors(A):
    n = A.shape[0]
    return [np.linalg.det(A[np.ix_(s, s)]) for k in range(1, n + 1) for s in itertools.combinations(range(n), k)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_p_matrix_test_matches_principal_minors(n):
    rng = np.random.default_rng(10 + n)
    for _ in range(100):
        A = random_p_matrix(rng, n) if rng.random() < 0.6 else rng.normal(size=(n, n))
        minors = all_principal_minors(A)
        expected = min(minors) > 0
        fast = p_matrix_test(A)
        ref = p_matrix_test_reference(A)
        assert fast.is_p_matrix == expected == ref.is_p_matrix
        if expected:
            assert fast.minors_checked == ref.minors_checked == 2**n - 1
            assert fast.smallest_minor == pytest.approx(min(minors), rel=1e-8, abs=1e-12)
            assert ref.smallest_minor == pytest.approx(min(minors), rel=1e-8, abs=1e-12)
        else:
            assert fast.smallest_minor <= 0 and ref.smallest_minor <= 0
            assert fast.minors_checked == ref.minors_checked  # same visiting order, same early exit


def test_p_matrix_examples():
    assert p_matrix_test(np.array([[1.0, 2.0], [0.0, 1.0]])).is_p_matrix  # non-symmetric, not PD-symmetric part
    assert not p_matrix_test(np.array([[1.0, 2.0], [2.0, 1.0]])).is_p_matrix  # det = -3
    assert not p_matrix_test(np.array([[0.0]])).is_p_matrix
    assert p_matrix_test(np.zeros((0, 0))).is_p_matrix
    with pytest.raises(LCPError):
        p_matrix_test(np.ones((2, 3)))


def test_compiled_lemke_matches_numpy_reference():
    from sim.lcp import _lemke_reference

    rng = np.random.default_rng(77)
    for n in range(1, 9):
        for _ in range(60):
            M = random_p_matrix(rng, n) if rng.random() < 0.5 else random_psd(rng, n)
            q = rng.normal(size=n)
            fast = solve_lcp(M, q, "lemke")
            ref = _lemke_reference(M, q, 50 * n + 100)
            assert fast.status == ref.status and fast.iterations == ref.iterations
            if fast.success:
                np.testing.assert_allclose(fast.z, ref.z, atol=1e-12)


# ------------------------------------------------------------------ result contract (mutation-testing survivors)
def test_complementarity_residual_is_the_largest_violation_and_zero_when_empty():
    assert complementarity_residual(np.array([1.0, 2.0, 0.0]), np.array([0.0, 3.0, -0.5])) == 2.0
    assert complementarity_residual(np.array([3.0]), np.array([0.0])) == 0.0
    assert complementarity_residual(np.zeros(0), np.zeros(0)) == 0.0


def test_every_outcome_reports_method_iterations_residual_and_why():
    """The fields of LCPResult are the contract callers log and branch on, for every status."""
    trivial = solve_lcp(np.eye(2), np.array([1.0, 0.0]))
    assert (trivial.method, trivial.iterations, trivial.residual, trivial.message) == (
        "lemke",
        0,
        0.0,
        "trivial: q >= 0",
    )
    solved = solve_lcp(np.array([[2.0]]), np.array([-4.0]))
    assert (solved.method, solved.iterations, solved.residual) == ("lemke", 2, 0.0)  # z0 enters, then z1
    infeasible = solve_lcp(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([-1.0, 1.0]))
    assert (infeasible.method, infeasible.residual) == ("lemke", np.inf) and infeasible.iterations >= 1
    assert "HiGHS proves" in infeasible.message
    ray = solve_lcp(np.array([[-1.0, 2.0], [2.0, -1.0]]), np.array([-1.0, -1.0]))
    assert (ray.method, ray.residual) == ("lemke", np.inf) and ray.iterations >= 1
    assert "not copositive-plus" in ray.message
    B = np.random.default_rng(5).normal(size=(30, 3))
    stuck = solve_lcp(B @ B.T + 1e-6 * np.eye(30), np.ones(30) - 2.0, "pgs", max_iterations=3, tol=1e-14)
    assert stuck.status is LCPStatus.MAX_ITERATIONS
    assert (stuck.method, stuck.iterations) == ("pgs", 3) and stuck.residual > 1e-14
    assert "after 3 sweeps" in stuck.message
    pgs = solve_lcp(np.array([[2.0]]), np.array([-4.0]), "pgs", tol=1e-12)
    assert pgs.method == "pgs" and pgs.w[0] == pytest.approx(0.0, abs=1e-12)
    assert pgs.residual == complementarity_residual(pgs.z, pgs.w) and pgs.iterations >= 1
    empty = solve_lcp(np.zeros((0, 0)), np.zeros(0), "pgs")
    assert empty.success and empty.z.shape == empty.w.shape == (0,)
    assert (empty.method, empty.iterations, empty.residual) == ("pgs", 0, 0.0)


def test_ray_termination_is_not_called_infeasible_when_every_solution_is_small():
    """Feasibility is checked over z >= 0 exactly: here every feasible z has z1 + z2 <= 1.5 (so none has all
    components >= 1), the LCP is solved by z = (0.1, 0.1, 0), and Lemke ray-terminates (M is not copositive)."""
    M = np.array([[-1.0, 2.0, 0.0], [2.0, -1.0, 0.0], [-1.0, -1.0, 0.0]])
    q = np.array([-0.1, -0.1, 1.5])
    np.testing.assert_allclose(solve_lcp(M, q, "enumerate").z, [0.1, 0.1, 0.0], atol=1e-12)
    assert solve_lcp(M, q, "lemke").status is LCPStatus.RAY_TERMINATION


def test_pgs_solves_one_dimensional_problems_and_uses_the_warm_start():
    res = solve_lcp(np.array([[2.0]]), np.array([-4.0]), "pgs", tol=1e-12)
    assert res.success and res.z[0] == pytest.approx(2.0, abs=1e-12)
    M = np.array([[4.0, 1.0], [1.0, 3.0]])
    q = np.array([-1.0, -2.0])
    exact = solve_lcp(M, q, "lemke").z
    warm = solve_lcp(M, q, "pgs", z0=exact, tol=1e-12)
    assert warm.iterations == 1  # started at the answer: one sweep confirms it
    clipped = solve_lcp(M, q, "pgs", z0=[-5.0, -5.0], tol=1e-12)  # a negative warm start is projected to z = 0
    assert clipped.iterations == solve_lcp(M, q, "pgs", tol=1e-12).iterations


def test_pgs_refuses_what_it_cannot_iterate():
    with pytest.raises(LCPError, match="positive diagonal"):
        solve_lcp(np.array([[0.0, 1.0], [1.0, 2.0]]), np.ones(2), method="pgs")  # zero pivot
    for relaxation in (0.0, 2.0, 2.5):
        with pytest.raises(LCPError, match=r"relaxation must lie in \(0, 2\)"):
            solve_lcp(np.eye(2), -np.ones(2), method="pgs", relaxation=relaxation)
    with pytest.raises(LCPError, match=r"z0 must have shape \(2,\)"):
        solve_lcp(np.eye(2), -np.ones(2), method="pgs", z0=np.zeros(3))


def test_enumeration_size_limit_and_count():
    with pytest.raises(LCPError, match="n = 17 is too large"):
        solve_lcp(np.eye(17), -np.ones(17), method="enumerate")
    sixteen = solve_lcp(np.eye(16), np.ones(16), method="enumerate")  # 16 is allowed; q >= 0: the empty set
    assert sixteen.success and sixteen.iterations == 1
    # z = (1, 0): supports tried in order {}, {0}: two index sets
    assert solve_lcp(np.eye(2), np.array([-1.0, 1.0]), method="enumerate").iterations == 2


def test_lemke_pivot_limit_and_enumeration_report_their_fields():
    rng = np.random.default_rng(3)
    limited = solve_lcp(random_p_matrix(rng, 8), -np.abs(rng.normal(size=8)) - 1, "lemke", max_iterations=2)
    assert (limited.status, limited.method, limited.residual) == (LCPStatus.MAX_ITERATIONS, "lemke", np.inf)
    assert limited.iterations == 2 and limited.message == "pivot limit reached"
    solved = solve_lcp(np.eye(2), np.array([-1.0, 1.0]), "enumerate")
    assert (solved.method, solved.iterations, solved.residual) == ("enumerate", 2, 0.0)
    infeasible = solve_lcp(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([-1.0, 1.0]), "enumerate")
    assert (infeasible.status, infeasible.method, infeasible.iterations) == (LCPStatus.INFEASIBLE, "enumerate", 4)
    assert infeasible.residual == np.inf and "no complementary index set" in infeasible.message
    empty = solve_lcp(np.zeros((0, 0)), np.zeros(0), "enumerate")
    assert empty.success and empty.iterations == 1


def test_integer_input_is_solved_as_floating_point():
    """Callers pass lists of ints; M z = -q must not be solved in integer arithmetic (z = 1/3 here)."""
    for method in ("lemke", "pgs", "enumerate"):
        res = solve_lcp([[2, 1], [1, 2]], [-1, -1], method, tol=1e-12)
        np.testing.assert_allclose(res.z, [1 / 3, 1 / 3], atol=1e-10, err_msg=method)
    as_ints = p_matrix_test([[2, 1], [1, 1]])
    assert as_ints.is_p_matrix and as_ints.smallest_minor == pytest.approx(1.0)  # det, not integer-truncated
    empty = p_matrix_test(np.zeros((0, 0)))
    assert (empty.smallest_minor, empty.minors_checked) == (np.inf, 0)
    with pytest.raises(LCPError, match=r"needs a square matrix, got shape \(2, 3\)"):
        p_matrix_test(np.ones((2, 3)))
