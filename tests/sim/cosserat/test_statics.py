"""Statics on the dynamics residual: linear cantilever, gravity, the elastica, the closed circle, error vs n."""

import numpy as np
import pytest

from sim.cosserat import build_model, uniform_rod
from sim.cosserat.statics import solve_statics

L, R, E, RHO = 1.0, 0.01, 1e7, 1000.0
ROD = uniform_rod(L, R, E, RHO, poisson_ratio=0.3)
EI = ROD.bending_stiffness_n_m2()
GA = ROD.material.shear_modulus_pa * np.pi * R**2


def test_small_tip_load_matches_beam_theory_with_shear():
    F = 1e-4 * EI / L**2
    res = solve_statics(build_model(ROD, 4, gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -F)))
    expected = F * L**3 / (3 * EI) + F * L / GA
    assert -res.tip_position_m[2] == pytest.approx(expected, rel=1e-3)  # bar 1 %


def test_uniform_gravity_matches_ql4_over_8ei():
    g = 1e-3  # small load: linear regime
    res = solve_statics(build_model(ROD, 10, gravity_m_s2=(0, 0, -g)))
    q = RHO * np.pi * R**2 * g
    assert -res.tip_position_m[2] == pytest.approx(q * L**4 / (8 * EI), rel=2e-3)  # bar 1 %


@pytest.mark.parametrize(
    "load, deflection, shortening, angle",
    [(1.0, 0.3017, 0.0564, 0.4614), (5.0, 0.7138, 0.3876, None)],
)
def test_large_deflection_elastica(load, deflection, shortening, angle):
    P = load * EI / L**2
    res = solve_statics(build_model(ROD, 8, gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -P)), load_steps=4)
    tip = res.tip_position_m
    assert -tip[2] / L == pytest.approx(deflection, rel=5e-3)
    assert 1 - tip[0] / L == pytest.approx(shortening, rel=5e-3)
    if angle is not None:
        assert np.arctan2(-res.tip_rotation[2, 0], res.tip_rotation[0, 0]) == pytest.approx(angle, rel=5e-3)


def test_tip_moment_two_pi_ei_over_l_closes_the_rod_into_a_circle():
    res = solve_statics(
        build_model(ROD, 12, gravity_m_s2=(0, 0, 0), tip_moment_n_m=(0, 0, 2 * np.pi * EI / L)), load_steps=6
    )
    assert np.linalg.norm(res.tip_position_m) < 1e-4 * L
    np.testing.assert_allclose(res.tip_rotation, np.eye(3), atol=1e-6)


def test_error_against_n():
    """Nodal curvature under uniform load (moment quadratic in X) converges like n⁻²; the tip of the
    PL²/EI = 5 elastica converges faster (≈ n⁻⁴, the Galerkin tip functional superconverges)."""
    g = 1e-3
    q = RHO * np.pi * R**2 * g
    curvature_err = []
    for n in (2, 4, 8):
        res = solve_statics(build_model(ROD, n, gravity_m_s2=(0, 0, -g)))
        x = np.linspace(0, L, n + 1)
        exact = q * (L - x) ** 2 / (2 * EI)
        curvature_err.append(np.max(np.abs(res.q[6:].reshape(-1, 6)[:, 1] - exact)) / exact[0])
    assert np.allclose(np.log2(np.array(curvature_err[:-1]) / curvature_err[1:]), 2.0, atol=0.05)
    load = dict(gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -5 * EI / L**2))
    ref = solve_statics(build_model(ROD, 16, **load), load_steps=5).tip_position_m
    tip_err = [
        np.max(np.abs(solve_statics(build_model(ROD, n, **load), load_steps=5).tip_position_m - ref)) for n in (2, 4)
    ]
    assert tip_err[0] / tip_err[1] > 4.0
