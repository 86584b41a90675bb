"""Small-amplitude vibration modes of a rod, and what a time step keeps of each.

Why this module: the rod's dynamic runs (a rod dropped on a plane, the bench's stick and slide tests) are
judged by how far a coarse step's path is from a fine step's, and that distance is decided by which of the rod's
vibration modes the step resolves. Implicit Euler damps a mode of angular frequency ω by the factor
1/√(1 + (ωh)²) per step; a Kelvin–Voigt rod (viscous stress τ·𝒦·ξ̇, `RodDescription.damping_time_s`) damps the
same mode physically with the modal damping ratio ζ = ωτ/2 (the damping matrix is τ·K, so the undamped modes
diagonalise it). Comparing the two per mode says, before any run, which part of a fine-step path a step of h
can reproduce at all: a mode the integrator erases much faster than the physics does is a mode whose share of
the motion a run at that h gets wrong, whatever its solver.

The modes are those of the linearised equations about a configuration q at rest, without gravity or contact
(their geometric stiffness is left out): M(q) φ̈ + K φ = 0, with the rod's own mass matrix M (composite
inertias, `forces.mass_matrix`) and its constant stiffness K on the strain dofs, restricted to the free dofs
(θ only for a clamped base; for a free base also the six base dofs, whose six rigid-body modes have ω = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from sim.cosserat.forces import kinematics, mass_matrix
from sim.cosserat.model import RodModel

RIGID_TOLERANCE = 1e-8  # ω² below this fraction of the largest ω² counts as a rigid-body mode


@dataclass(frozen=True)
class VibrationModes:
    """Angular frequencies (rad/s, ascending; rigid-body modes excluded) and mass-normalised mode shapes."""

    omega_rad_s: np.ndarray  # (k,)
    shapes: np.ndarray  # (n_free, k): φᵀ M φ = 1
    rigid_modes: int  # how many ω = 0 modes were dropped (6 for a free rod, 0 for a clamped one)
    free_dofs: np.ndarray

    @property
    def frequency_hz(self) -> np.ndarray:
        return self.omega_rad_s / (2 * math.pi)


def vibration_modes(model: RodModel, q: np.ndarray | None = None) -> VibrationModes:
    """The undamped modes about q (default: the reference shape, base at the origin), see the module docstring.

    Solved as the symmetric-definite generalised eigenproblem K φ = ω² M φ (LAPACK sygvd through scipy): M is
    symmetric positive definite on the free dofs, K symmetric positive semi-definite (zero on the base dofs)."""
    if q is None:
        q = np.zeros(model.n_dof)
    q = np.asarray(q, dtype=float)
    if q.shape != (model.n_dof,):
        raise ValueError(f"q must have {model.n_dof} entries, got shape {q.shape}")
    free = model.free_dofs
    M = mass_matrix(model, kinematics(model, q))[np.ix_(free, free)]
    K = np.zeros((model.n_dof, model.n_dof))
    K[6:, 6:] = model.stiffness
    K = K[np.ix_(free, free)]
    omega_sq, shapes = scipy.linalg.eigh(0.5 * (K + K.T), 0.5 * (M + M.T))
    rigid = omega_sq <= RIGID_TOLERANCE * max(float(omega_sq[-1]), 0.0)
    elastic = ~rigid
    return VibrationModes(np.sqrt(omega_sq[elastic]), shapes[:, elastic], int(np.sum(rigid)), free)


def implicit_euler_amplitude_per_step(omega_rad_s: np.ndarray, dt_s: float) -> np.ndarray:
    """|1/(1 + iωh)|: the amplitude implicit Euler keeps of an undamped mode per step (x'' = −ω²x, exactly)."""
    return 1.0 / np.sqrt(1.0 + (np.asarray(omega_rad_s) * dt_s) ** 2)


def implicit_euler_amplitude_after(omega_rad_s: np.ndarray, dt_s: float, duration_s: float) -> np.ndarray:
    """The amplitude implicit Euler keeps of an undamped mode after duration_s of steps of dt_s."""
    return implicit_euler_amplitude_per_step(omega_rad_s, dt_s) ** (duration_s / dt_s)


def kelvin_voigt_amplitude_after(omega_rad_s: np.ndarray, damping_time_s: float, duration_s: float) -> np.ndarray:
    """The amplitude the physics keeps after duration_s: exp(−ζωt) with ζ = ωτ/2 (overdamped modes: the slow
    root of s² + 2ζωs + ω² = 0, which is what is left of them)."""
    omega = np.asarray(omega_rad_s, dtype=float)
    zeta = 0.5 * omega * damping_time_s
    rate = np.where(zeta < 1.0, zeta * omega, omega * (zeta - np.sqrt(np.maximum(zeta**2 - 1.0, 0.0))))
    return np.exp(-rate * duration_s)


KEPT_FRACTION = 0.5  # a mode "is kept" over a window when at least this fraction of its amplitude is left


def largest_step_keeping(omega_rad_s: float, window_s: float, kept: float = KEPT_FRACTION) -> float:
    """The largest h with (1 + (ωh)²)^(−W/2h) ≥ kept: the coarsest implicit-Euler step that keeps that share of
    a mode of ω over a window W (bisection on log h: the kept amplitude falls monotonically with h)."""
    if not (omega_rad_s > 0 and window_s > 0 and 0 < kept < 1):
        raise ValueError("need omega_rad_s > 0, window_s > 0 and 0 < kept < 1")
    lo, hi = 1e-12, window_s
    if implicit_euler_amplitude_after(omega_rad_s, hi, window_s) >= kept:
        return hi
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if implicit_euler_amplitude_after(omega_rad_s, mid, window_s) >= kept else (lo, mid)
    return lo


@dataclass(frozen=True)
class StepResolution:
    """What steps of dt keep of a rod's modes over a window, against what its physics keeps (see the module
    docstring). Frequencies in Hz; None where there is no such mode."""

    window_s: float
    physics_keeps: int  # modes whose Kelvin–Voigt decay leaves ≥ KEPT_FRACTION over the window
    highest_kept_hz: float | None
    needed_dt_s: float | None  # the coarsest step that keeps every mode the physics keeps
    dt_s: tuple[float, ...]
    lowest_erased_hz: tuple[float | None, ...]  # per dt: the lowest mode the step keeps < KEPT_FRACTION of
    kept_by_physics_erased_by_step: tuple[int, ...]  # per dt


def step_resolution(
    omega_rad_s: np.ndarray, damping_time_s: float, dts_s: tuple[float, ...] | list[float], window_s: float
) -> StepResolution:
    """Per dt, the modes the physics keeps over window_s and implicit Euler erases: where a step's path must
    differ from a fine step's, whatever the solver."""
    omega = np.asarray(omega_rad_s, dtype=float)
    physics = kelvin_voigt_amplitude_after(omega, damping_time_s, window_s) >= KEPT_FRACTION
    highest = float(omega[physics].max()) if physics.any() else None
    lowest, erased = [], []
    for dt in dts_s:
        step_keeps = implicit_euler_amplitude_after(omega, dt, window_s) >= KEPT_FRACTION
        lowest.append(float(omega[~step_keeps].min() / (2 * math.pi)) if (~step_keeps).any() else None)
        erased.append(int(np.sum(physics & ~step_keeps)))
    return StepResolution(
        window_s=window_s,
        physics_keeps=int(physics.sum()),
        highest_kept_hz=None if highest is None else highest / (2 * math.pi),
        needed_dt_s=None if highest is None else largest_step_keeping(highest, window_s),
        dt_s=tuple(float(dt) for dt in dts_s),
        lowest_erased_hz=tuple(lowest),
        kept_by_physics_erased_by_step=tuple(erased),
    )
