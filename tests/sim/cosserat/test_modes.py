"""Vibration modes against Euler–Bernoulli and the axial bar, and implicit Euler's modal damping on the rod itself."""

import math

import numpy as np
import pytest

from sim.cosserat import build_model, initial_state, kinematics, mass_matrix, step, uniform_rod
from sim.cosserat.modes import (
    implicit_euler_amplitude_after,
    implicit_euler_amplitude_per_step,
    kelvin_voigt_amplitude_after,
    largest_step_keeping,
    step_resolution,
    vibration_modes,
)

L, R, E, RHO = 1.0, 0.01, 1e7, 1000.0
ROD = uniform_rod(L, R, E, RHO)
BENDING_SCALE = math.sqrt(ROD.bending_stiffness_n_m2() / (RHO * math.pi * R**2)) / L**2  # ω = (βL)² · this


def _model(base: str, n: int = 8):
    return build_model(ROD, n, base=base, gravity_m_s2=(0, 0, 0))


@pytest.mark.parametrize(
    ("base", "beta_l"), [("clamped", (1.8751, 4.6941, 7.8548)), ("free", (4.7300, 7.8532, 10.9956))]
)
def test_bending_frequencies_match_euler_bernoulli(base, beta_l):
    modes = vibration_modes(_model(base))
    expected = np.repeat(np.array(beta_l) ** 2 * BENDING_SCALE, 2)  # two bending planes, equal for a round rod
    # slender (R/L = 0.01): Timoshenko's rotary inertia and shear lower the third pair by ~0.6 %
    np.testing.assert_allclose(modes.omega_rad_s[:6], expected, rtol=1e-2)
    assert np.all(modes.omega_rad_s[:6] <= expected * 1.001)  # the corrections only ever lower them
    assert modes.rigid_modes == (6 if base == "free" else 0)


def test_axial_mode_of_the_cantilever_is_the_bar_s():
    omega_axial = math.pi / 2 * math.sqrt(E / RHO) / L  # clamped-free bar, first mode
    omega = vibration_modes(_model("clamped", 16)).omega_rad_s
    assert np.min(np.abs(omega / omega_axial - 1)) < 2e-3


def test_modes_are_mass_normalised_and_need_a_full_configuration():
    model = _model("clamped", 4)
    modes = vibration_modes(model)
    assert modes.shapes.shape == (len(modes.free_dofs), len(modes.omega_rad_s))
    free = modes.free_dofs
    M = mass_matrix(model, kinematics(model, np.zeros(model.n_dof)))[np.ix_(free, free)]
    np.testing.assert_allclose(modes.shapes.T @ M @ modes.shapes, np.eye(len(modes.omega_rad_s)), atol=1e-9)
    with pytest.raises(ValueError, match="entries"):
        vibration_modes(model, np.zeros(3))


def test_implicit_euler_damps_a_rod_mode_exactly_as_the_formula_says():
    """A small-amplitude mode of the clamped rod, stepped by `step` at ωh ≈ 0.7: its modal amplitude
    √(a² + (ȧ/ω)²), a = φᵀMq, falls by 1/√(1 + (ωh)²) per step (the linear theory, to the rod's nonlinearity)."""
    model = _model("clamped")
    modes = vibration_modes(model)
    k = 2  # the second bending pair
    phi, omega = modes.shapes[:, k], modes.omega_rad_s[k]
    free = modes.free_dofs
    M = mass_matrix(model, kinematics(model, np.zeros(model.n_dof)))[np.ix_(free, free)]
    state = initial_state(model)
    state.q[free] = 1e-5 * phi
    h, n_steps = 0.7 / omega, 12
    for _ in range(n_steps):
        step(model, state, h)
    a, a_dot = phi @ M @ state.q[free], phi @ M @ state.v[free]
    measured = math.hypot(a, a_dot / omega) / 1e-5
    assert measured == pytest.approx(implicit_euler_amplitude_after(omega, h, n_steps * h), rel=1e-3)
    assert implicit_euler_amplitude_per_step(omega, h) == pytest.approx(1 / math.sqrt(1.49))


def test_kelvin_voigt_amplitude_light_and_overdamped():
    omega = np.array([10.0, 1e4])
    kept = kelvin_voigt_amplitude_after(omega, 1e-3, 0.1)  # ζ = 0.005 and 5
    assert kept[0] == pytest.approx(math.exp(-0.005 * 10.0 * 0.1))
    slow_root = 1e4 * (5 - math.sqrt(24))  # what is left of an overdamped mode decays at the slow root
    assert kept[1] == pytest.approx(math.exp(-slow_root * 0.1))
    assert np.all(kelvin_voigt_amplitude_after(omega, 0.0, 1.0) == 1.0)


def test_largest_step_keeping_is_the_boundary():
    omega, window = 2 * math.pi * 100.0, 0.1
    h = largest_step_keeping(omega, window)
    assert implicit_euler_amplitude_after(omega, h, window) == pytest.approx(0.5, rel=1e-9)
    assert implicit_euler_amplitude_after(omega, 1.01 * h, window) < 0.5
    assert largest_step_keeping(1e-3, window) == window  # a mode too slow to lose anything: any step
    with pytest.raises(ValueError):
        largest_step_keeping(0.0, window)


def test_step_resolution_counts_modes_the_physics_keeps_and_the_step_erases():
    omega = 2 * math.pi * np.array([1.0, 10.0, 100.0, 1000.0])
    undamped = step_resolution(omega, 0.0, [1e-5, 1e-3], 0.1)
    assert undamped.physics_keeps == 4 and undamped.highest_kept_hz == pytest.approx(1000.0)
    # 1e-5 s: (ωh)² = 0.004 at 1 kHz, 1e4 steps keep 0.0 of it; 1 ms keeps the 1 and 10 Hz modes only
    assert undamped.kept_by_physics_erased_by_step == (1, 2)
    assert undamped.lowest_erased_hz == pytest.approx((1000.0, 100.0))
    assert undamped.needed_dt_s == pytest.approx(largest_step_keeping(omega[-1], 0.1))
    damped = step_resolution(omega, 1e-3, [1e-3], 0.1)  # ζ = ωτ/2: 0.3 at 100 Hz, exp(−0.3·628·0.1) ≈ 0
    assert damped.physics_keeps == 2 and damped.kept_by_physics_erased_by_step == (0,)
