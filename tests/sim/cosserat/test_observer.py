"""Strain observer: a simulated bent rod -> noisy marker positions -> strains."""

import numpy as np
import pytest

from sim.cosserat import build_model, kinematics, uniform_rod
from sim.cosserat.observer import observe_strains
from sim.cosserat.statics import solve_statics


@pytest.mark.parametrize(
    "noise_m, compliance_m_per_n, bound",
    [(0.0, 0.0, 1e-6), (1e-5, 0.0, 0.1), (2e-4, 0.0, 1.5), (2e-4, 0.02, 0.25)],
)
def test_observer_recovers_bending_strains_from_markers(noise_m, compliance_m_per_n, bound):
    """Hard marker constraints interpolate the noise (error ∝ noise); a marker compliance filters it."""
    rod = uniform_rod(0.5, 0.005, 2e8, 1200.0)  # PL²/EI ≈ 0.1 and qL³/EI ≈ 1: visibly bent
    markers = tuple(np.linspace(0.05, 0.5, 10))
    truth_model = build_model(rod, 10, tip_force_n=(0.0, 0.02, -0.04), extra_points_m=markers)
    truth = solve_statics(truth_model, load_steps=3)
    kin = kinematics(truth_model, truth.q)
    seen = kin.p[truth_model.grid.extra_index] + np.random.default_rng(5).normal(size=(10, 3)) * noise_m
    observer_model = build_model(rod, 10, extra_points_m=markers)  # knows gravity, not the tip force
    est = observe_strains(observer_model, np.zeros(6), np.array(markers), seen, None, compliance_m_per_n)
    kappa_true = truth.q[6:].reshape(-1, 6)[:, 1:3]
    kappa_est = est.strain_nodes[:, 1:3]
    err = np.linalg.norm(kappa_est - kappa_true) / np.linalg.norm(kappa_true)
    assert err < bound, err
    if noise_m == 0:
        # the marker forces reproduce the hidden tip load's resultant
        np.testing.assert_allclose(est.marker_forces_n.sum(axis=0), [0.0, 0.02, -0.04], atol=2e-3)


@pytest.mark.parametrize("compliance_m_per_n", [0.0, 0.02])
def test_compiled_observer_solves_the_reference_observers_equations(compliance_m_per_n):
    """The compiled observer (`compiled=True`, the default) and the readable one (`compiled=False`) solve the same
    equations to the same tolerance (1e-8 of the scaled rows), from the homotopy and from a warm start: strains and
    marker forces agree to 1e-6 of their largest entry (the roots of the same equations; the iterations differ,
    finite-difference vs complex-step Jacobian)."""
    rod = uniform_rod(0.5, 0.005, 2e8, 1200.0)
    markers = tuple(np.linspace(0.05, 0.5, 8))
    truth_model = build_model(rod, 10, tip_force_n=(0.0, 0.02, -0.04), extra_points_m=markers)
    truth = solve_statics(truth_model, load_steps=3)
    seen = kinematics(truth_model, truth.q).p[truth_model.grid.extra_index]
    seen = seen + np.random.default_rng(7).normal(size=seen.shape) * 1e-4
    model = build_model(rod, 10, extra_points_m=markers)
    x = np.array(markers)
    fast = observe_strains(model, np.zeros(6), x, seen, None, compliance_m_per_n)
    reference = observe_strains(model, np.zeros(6), x, seen, None, compliance_m_per_n, compiled=False)
    moved = seen + np.random.default_rng(8).normal(size=seen.shape) * 1e-4  # the next frame, warm-started
    fast_warm = observe_strains(model, np.zeros(6), x, moved, fast.q, compliance_m_per_n)
    reference_warm = observe_strains(model, np.zeros(6), x, moved, reference.q, compliance_m_per_n, compiled=False)
    for a, b in ((fast, reference), (fast_warm, reference_warm)):
        scale_strain = np.max(np.abs(b.strain_nodes - model.xi_ref_nodes))
        assert np.max(np.abs(a.strain_nodes - b.strain_nodes)) <= 1e-6 * scale_strain
        assert np.max(np.abs(a.marker_forces_n - b.marker_forces_n)) <= 1e-6 * np.max(np.abs(b.marker_forces_n))
