"""Polytope operations: LP redundancy removal, Fourier–Motzkin projection against LP feasibility."""

import numpy as np
import pytest

from sim.planar_contact.polytope import (
    HPolytope,
    chebyshev_ball,
    fourier_motzkin,
    project_by_lp,
    remove_redundant,
)


def random_polytope(rng, dim, rows):
    N = rng.normal(size=(rows, dim))
    e = -rng.uniform(0.5, 1.5, size=rows)  # contains the origin
    return HPolytope.from_arrays(N, e)


def test_redundancy_removal_keeps_the_set():
    rng = np.random.default_rng(1)
    box = HPolytope.from_arrays(np.vstack([np.eye(2), -np.eye(2)]), -np.ones(4))
    extra = HPolytope.from_arrays([[1.0, 1.0], [2.0, 0.0], [1.0, 0.0]], [-5.0, -2.0, -1.0])  # redundant/duplicate
    P = box.intersect(extra)
    R = remove_redundant(P)
    assert R.N.shape[0] == 4
    for x in rng.uniform(-2, 2, size=(500, 2)):
        assert P.contains(x) == R.contains(x)


def test_empty_polytope_is_reported():
    P = HPolytope.from_arrays([[1.0], [-1.0]], [1.0, 0.0])  # x >= 1 and x <= 0
    assert remove_redundant(P) is None
    assert chebyshev_ball(P)[1] < 0


@pytest.mark.parametrize("seed", range(4))
def test_fourier_motzkin_agrees_with_lp_feasibility(seed):
    rng = np.random.default_rng(seed)
    P = random_polytope(rng, 4, 9)
    T = fourier_motzkin(P, [0, 1])
    inside = 0
    for x in rng.uniform(-3, 3, size=(150, 2)):
        lp = project_by_lp(P, [0, 1], x)
        assert T.contains(x, tol=1e-7) == lp, x
        inside += lp
    assert 0 < inside < 150  # the test exercised both answers


def test_fourier_motzkin_uses_equalities():
    # x0 + x1 + x2 = 1, x >= 0 projected on (x0, x1) is the simplex x0, x1 >= 0, x0 + x1 <= 1
    P = HPolytope.from_arrays(np.eye(3), np.zeros(3), [[1.0, 1.0, 1.0]], [1.0])
    T = fourier_motzkin(P, [0, 1])
    assert T.contains([0.3, 0.3]) and not T.contains([0.6, 0.6]) and not T.contains([-0.1, 0.2])


def test_chebyshev_ball_of_a_square_and_a_degenerate_set():
    square = HPolytope.from_arrays(np.vstack([np.eye(2), -np.eye(2)]), -np.ones(4))
    c, r = chebyshev_ball(square)
    assert r == pytest.approx(1.0, abs=1e-9) and np.allclose(c, 0, atol=1e-9)
    flat = square.intersect(HPolytope.from_arrays([[0.0, 1.0], [0.0, -1.0]], [0.0, 0.0]))  # segment y = 0
    assert chebyshev_ball(flat)[1] == pytest.approx(0.0, abs=1e-9)
    # the same segment written as an equality is full-dimensional within its affine hull
    seg = HPolytope.from_arrays(square.N, square.e, [[0.0, 1.0]], [0.0])
    assert chebyshev_ball(seg)[1] == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_dense_backend_gives_the_same_projection(seed):
    from sim.planar_contact.polytope import lp_backend

    rng = np.random.default_rng(100 + seed)
    P = random_polytope(rng, 4, 9)
    T_highs = fourier_motzkin(P, [0, 1])
    with lp_backend("dense"):
        T_dense = fourier_motzkin(P, [0, 1])
    for x in rng.uniform(-3, 3, size=(150, 2)):
        assert T_highs.contains(x) == T_dense.contains(x)


def test_affine_hull_finds_implicit_equalities():
    from sim.planar_contact.polytope import affine_hull, projected_dimension

    # a segment in the plane written with inequalities only: 0 <= x <= 1, y >= 2, y <= 2
    seg = HPolytope.from_arrays([[1, 0], [-1, 0], [0, 1], [0, -1]], [0, -1, 2, -2])
    x0, D = affine_hull(seg)
    assert D.shape == (2, 1) and abs(D[1, 0]) < 1e-12 and x0[1] == pytest.approx(2.0)
    assert projected_dimension(seg, [0]) == 1 and projected_dimension(seg, [1]) == 0
    # a triangle in 3-D (explicit equality) projects onto a 2-D set, a line of it onto 1-D
    tri = HPolytope.from_arrays(np.eye(3), np.zeros(3), [[1.0, 1.0, 1.0]], [1.0])
    assert projected_dimension(tri, [0, 1]) == 2
    edge = tri.intersect(HPolytope.from_arrays([[0.0, 0.0, -1.0]], [0.0]))  # z <= 0 with z >= 0: z = 0
    assert projected_dimension(edge, [0, 1]) == 1
    assert affine_hull(HPolytope.from_arrays([[1.0], [-1.0]], [1.0, 0.0])) is None
