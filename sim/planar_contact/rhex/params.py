"""RHex planar flipping parameters: Table IV of paper 003 plus the assumptions it leaves open."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class RHexParameters:
    """Table IV (SI units). Fields marked *assumed* are not given in the paper."""

    half_length_m: float = 0.25  # d
    half_height_m: float = 0.05  # h
    hip_offsets_m: tuple[float, float, float] = (-0.19, 0.015, 0.22)  # d1 (rear), d2 (middle), d3 (front)
    leg_length_m: float = 0.17  # l
    mass_kg: float = 8.5
    inertia_kgm2: float = 0.144
    toe_mass_kg: float = 0.05
    body_stiffness_N_m: float = 10000.0  # k_b
    body_damping_Ns_m: float = 2000.0  # d_b
    leg_stiffness_N_m: float = 5000.0  # k_l
    leg_damping_Ns_m: float = 500.0  # d_l
    gravity_m_s2: float = 9.81
    mu_toe: float = 0.39
    mu_body: float = 0.3  # *assumed*
    torque_limit_Nm: float = 8.0  # *assumed*: per planar leg (a pair of RHex legs)
    body_normal_min_N: float = 5.0  # *assumed*: task constraint on the body–ground normal force
    toe_speed_thresholds_m_s: tuple[float, float, float] = (0.08, 0.001, 0.001)  # v_i^0 (IV-C.3)
    body_speed_threshold_m_s: float = 0.01  # *assumed*

    def with_mu_toe(self, mu: float) -> RHexParameters:
        if not 0.0 <= mu <= 5.0:
            raise ValueError(f"mu_toe must lie in [0, 5], got {mu}")
        return replace(self, mu_toe=mu)

    @property
    def weight_N(self) -> float:
        return self.mass_kg * self.gravity_m_s2

    def corner_body_frame(self) -> np.ndarray:
        """Body corners (x, z) in the body frame: rear-bottom, front-bottom, front-top, rear-top."""
        d, h = self.half_length_m, self.half_height_m
        return np.array([[-d, -h], [d, -h], [d, h], [-d, h]])
