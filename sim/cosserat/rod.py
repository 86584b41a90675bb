"""Rod description: geometry, material and the section properties ℳ(X), 𝒦(X) along the arc length X ∈ [0, L].

The section is circular with a linear taper r(X) = r0 + (r1 − r0) X/L. An optional concentric core (the
bench rod's steel string, Table II of paper 004) is combined with the sheath by the parallel rule:
stiffnesses and inertias add, ΣE·I and Σρ·A, which is exact for a perfectly bonded composite beam.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Gauss–Legendre rule of mass_kg, computed once: leggauss solves an eigenproblem (~0.1 ms), and the dynamics
# asks for the rod mass at every step.
_GAUSS_6 = np.polynomial.legendre.leggauss(6)


class RodParameterError(ValueError):
    """A rod, core or discretisation parameter is out of its physical range."""


def _require_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise RodParameterError(f"{name} must be a positive finite number, got {value!r}")


@dataclass(frozen=True)
class Material:
    """Linear elastic isotropic material."""

    young_modulus_pa: float
    poisson_ratio: float
    density_kg_m3: float

    def __post_init__(self) -> None:
        _require_positive("young_modulus_pa", self.young_modulus_pa)
        _require_positive("density_kg_m3", self.density_kg_m3)
        if not (-1.0 < self.poisson_ratio < 0.5):
            raise RodParameterError(f"poisson_ratio must be in (-1, 0.5), got {self.poisson_ratio!r}")

    @property
    def shear_modulus_pa(self) -> float:
        return self.young_modulus_pa / (2.0 * (1.0 + self.poisson_ratio))


@dataclass(frozen=True)
class Core:
    """A concentric cylindrical core of constant radius (e.g. a steel string through a silicone rod)."""

    radius_m: float
    material: Material

    def __post_init__(self) -> None:
        _require_positive("core radius_m", self.radius_m)


@dataclass(frozen=True)
class RodDescription:
    """Immutable description of a (possibly tapered, possibly composite) circular rod.

    `damping_time_s` is the Kelvin–Voigt retardation time τ: the viscous stress is τ·𝒦·ξ̇ (0 = undamped).
    """

    length_m: float
    radius_base_m: float
    radius_tip_m: float
    material: Material
    core: Core | None = None
    damping_time_s: float = 0.0

    def __post_init__(self) -> None:
        _require_positive("length_m", self.length_m)
        _require_positive("radius_base_m", self.radius_base_m)
        _require_positive("radius_tip_m", self.radius_tip_m)
        if self.damping_time_s < 0 or not math.isfinite(self.damping_time_s):
            raise RodParameterError(f"damping_time_s must be >= 0, got {self.damping_time_s!r}")
        if self.core is not None and self.core.radius_m >= min(self.radius_base_m, self.radius_tip_m):
            raise RodParameterError(
                f"core radius_m {self.core.radius_m} must be smaller than the rod radius "
                f"(min {min(self.radius_base_m, self.radius_tip_m)})"
            )

    def radius_m(self, x_m: np.ndarray | float) -> np.ndarray:
        """Outer radius at arc length X."""
        s = np.asarray(x_m, dtype=float) / self.length_m
        return self.radius_base_m + (self.radius_tip_m - self.radius_base_m) * s

    def _areas(self, x_m):
        r = self.radius_m(x_m)
        area = np.pi * r**2
        second_moment = np.pi * r**4 / 4.0
        return area, second_moment

    def inertia_diagonal(self, x_m: np.ndarray | float) -> np.ndarray:
        """Diagonal of ℳ(X) = ρ·diag(J_p, I_y, I_z, A, A, A) per unit length, shape (..., 6)."""
        area, i2 = self._areas(x_m)
        rho = self.material.density_kg_m3
        out = np.stack([rho * 2 * i2, rho * i2, rho * i2, rho * area, rho * area, rho * area], axis=-1)
        if self.core is not None:
            rc = self.core.radius_m
            ac, ic = np.pi * rc**2, np.pi * rc**4 / 4.0
            d_rho = self.core.material.density_kg_m3 - rho
            out = out + d_rho * np.array([2 * ic, ic, ic, ac, ac, ac])
        return out

    def stiffness_diagonal(self, x_m: np.ndarray | float) -> np.ndarray:
        """Diagonal of 𝒦(X) = diag(G J_p, E I_y, E I_z, E A, G A, G A), shape (..., 6).

        No shear correction factor (the notes' resolution); it changes only the tiny shear term of a
        slender rod's deflection.
        """
        area, i2 = self._areas(x_m)
        e, g = self.material.young_modulus_pa, self.material.shear_modulus_pa
        out = np.stack([g * 2 * i2, e * i2, e * i2, e * area, g * area, g * area], axis=-1)
        if self.core is not None:
            rc = self.core.radius_m
            ac, ic = np.pi * rc**2, np.pi * rc**4 / 4.0
            de = self.core.material.young_modulus_pa - e
            dg = self.core.material.shear_modulus_pa - g
            out = out + np.array([dg * 2 * ic, de * ic, de * ic, de * ac, dg * ac, dg * ac])
        return out

    def mass_kg(self) -> float:
        x, w = _GAUSS_6
        xm = 0.5 * self.length_m * (x + 1.0)
        return float(0.5 * self.length_m * np.sum(w * self.inertia_diagonal(xm)[:, 3]))

    def bending_stiffness_n_m2(self, x_m: float = 0.0) -> float:
        return float(self.stiffness_diagonal(x_m)[1])


def uniform_rod(
    length_m: float,
    radius_m: float,
    young_modulus_pa: float,
    density_kg_m3: float,
    poisson_ratio: float = 0.3,
    damping_time_s: float = 0.0,
) -> RodDescription:
    """Convenience constructor for a prismatic rod."""
    return RodDescription(
        length_m=length_m,
        radius_base_m=radius_m,
        radius_tip_m=radius_m,
        material=Material(young_modulus_pa, poisson_ratio, density_kg_m3),
        damping_time_s=damping_time_s,
    )
