"""Gap functions and contact terms (eq. 13–20, 30) against finite differences."""

import numpy as np
import pytest

from sim.planar_snake import PlanarSnakeModel, all_gaps, contact_terms, link_centres
from sim.planar_snake.model import PlanarSnakeError
from sim.planar_snake.obstacles import (
    ObstacleField,
    check_assumption_3,
    lattice_field,
    random_field,
)


def model_with_obstacle_near(link: int, offset_along: float, side: float, rng):
    base = PlanarSnakeModel()
    q = np.r_[rng.uniform(-0.8, 0.8, 10), 0.1, -0.2]
    x, y = link_centres(base, q)
    th = q[link]
    t = np.array([np.cos(th), np.sin(th)])
    n = np.array([-np.sin(th), np.cos(th)])
    radius = 0.05
    centre = np.array([x[link], y[link]]) + offset_along * t + side * (radius + 0.01) * n
    return base.with_obstacles(centre[None, :], np.array([radius])), q


@pytest.mark.parametrize("offset_along", [0.0, 0.03, -0.05, 0.1, -0.12])  # interior and beyond the link ends
@pytest.mark.parametrize("side", [1.0, -1.0])
def test_rows_and_bias_are_gap_derivatives(offset_along, side):
    rng = np.random.default_rng(int(1000 + 100 * offset_along + 10 * side))
    model, q = model_with_obstacle_near(4, offset_along, side, rng)
    qd = rng.normal(size=12)
    terms = contact_terms(model, q, qd, np.array([4]), np.array([0]))
    gap = lambda qq: all_gaps(model, qq)[4, 0]  # noqa: E731
    eps = 1e-7
    grad = np.array([(gap(q + eps * e) - gap(q - eps * e)) / (2 * eps) for e in np.eye(12)])
    np.testing.assert_allclose(terms.rows[0], grad, atol=1e-7)
    h = 1e-4
    second = (gap(q + h * qd) - 2 * gap(q) + gap(q - h * qd)) / h**2
    assert terms.bias[0] == pytest.approx(second, abs=2e-4 * (1 + abs(second)))
    # interior contact: the force side α of eq. 15 is the side the obstacle is on, opposite sign
    if abs(offset_along) < model.link_half_length_m:
        assert terms.side[0] == -side


def test_friction_map_is_tangential_and_opposes_slip():
    rng = np.random.default_rng(9)
    model, q = model_with_obstacle_near(3, 0.02, 1.0, rng)
    qd = rng.normal(size=12)
    terms = contact_terms(model, q, qd, np.array([3]), np.array([0]))
    # generalised friction force −μ_o Λ λ does negative power (dissipates) and no work along the normal row
    power = -(terms.friction_map[:, 0] @ qd)
    assert power < 0 and abs(power + abs(terms.tangential_velocity[0])) < 1e-12


def test_lattice_and_random_fields_respect_assumption_3():
    lat = lattice_field((0.0, 2.0), [0.1, -0.15], 0.45, 0.04, [0.0, 0.22])
    assert check_assumption_3(lat, 0.14) > 0.14
    rnd = random_field(3, (0, 3), (-0.5, 0.5), 25, (0.03, 0.06), 0.14)
    assert rnd.count == 25 and check_assumption_3(rnd, 0.14) > 0.14
    assert np.array_equal(rnd.centres_m, random_field(3, (0, 3), (-0.5, 0.5), 25, (0.03, 0.06), 0.14).centres_m)
    with pytest.raises(PlanarSnakeError, match="Assumption 3"):
        check_assumption_3(ObstacleField(np.array([[0.0, 0.0], [0.2, 0.0]]), np.array([0.05, 0.05])), 0.14)
    with pytest.raises(PlanarSnakeError, match="could not place"):
        random_field(0, (0, 0.5), (0, 0.5), 50, (0.05, 0.05), 0.14, max_attempts=1000)


def test_compiled_contact_terms_match_numpy_reference():
    from sim.planar_snake.contact import all_gaps_reference, contact_terms_reference

    rng = np.random.default_rng(21)
    field = random_field(1, (-0.6, 0.6), (-0.4, 0.4), 12, (0.02, 0.06), 0.14)
    model = PlanarSnakeModel().with_obstacles(field.centres_m, field.radii_m)
    for _ in range(20):
        q, qd = np.r_[rng.uniform(-1, 1, 10), rng.normal(size=2) * 0.1], rng.normal(size=12)
        np.testing.assert_allclose(all_gaps(model, q), all_gaps_reference(model, q), atol=1e-14)
        links, obstacles = rng.integers(0, 10, 6), rng.integers(0, 12, 6)
        fast = contact_terms(model, q, qd, links, obstacles)
        ref = contact_terms_reference(model, q, qd, links, obstacles)
        for name in ("rows", "bias", "friction_map", "gaps", "side", "tangential_velocity"):
            np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), atol=1e-12, err_msg=name)
