"""The incline experiment: a straight rod lying on a plane tilted by ϑ, released from rest.

Coulomb predicts that it sticks iff tan ϑ ≤ μ and otherwise slides down at g(sin ϑ − μ cos ϑ). The plane is
z = 0 of the incline's own frame; gravity is tilted by ϑ in that frame (the same physics as tilting the plane).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cosserat.dynamics import step
from sim.cosserat.forces import kinematics
from sim.cosserat.model import ContactSettings, build_model, initial_state
from sim.cosserat.obstacles import Plane
from sim.cosserat.rod import RodDescription, uniform_rod
from sim.cosserat.slack import Smoothing


@dataclass
class InclineResult:
    sticks: bool
    acceleration_m_s2: float
    expected_acceleration_m_s2: float
    newton_iterations_mean: float
    normal_force_n: float


def run_incline(
    friction_coefficient: float,
    angle_rad: float,
    *,
    rod: RodDescription | None = None,
    n_sections: int = 10,
    dt_s: float = 0.005,
    duration_s: float = 0.5,
    smoothing: Smoothing | None = None,
    gravity_m_s2: float = 9.81,
) -> InclineResult:
    rod = rod or uniform_rod(0.3, 0.005, 1e6, 1000.0, poisson_ratio=0.45)
    contact = ContactSettings(
        (Plane(),),
        friction_coefficient=friction_coefficient,
        m_sections=n_sections,
        smoothing=smoothing or Smoothing("sigmoid", 50.0),
    )
    g = gravity_m_s2
    model = build_model(
        rod,
        n_sections,
        base="free",
        contact=contact,
        gravity_m_s2=(g * np.sin(angle_rad), 0.0, -g * np.cos(angle_rad)),
    )
    state = initial_state(model, base_position_m=(0.0, 0.0, rod.radius_base_m))
    state.slack[:, 0] = 1.0  # the rod starts lying on the plane: warm-start the normal slacks in contact
    n_steps = int(round(duration_s / dt_s))
    x_mean, iterations = [], []
    info = None
    for _ in range(n_steps):
        info = step(model, state, dt_s)
        iterations.append(info.iterations)
        x_mean.append(float(np.mean(kinematics(model, state.q).p[model.grid.node_index, 0])))
    t = dt_s * np.arange(1, n_steps + 1)
    half = n_steps // 2  # fit after the initial settling of the contact
    acceleration = 2.0 * np.polyfit(t[half:], np.array(x_mean)[half:], 2)[0]
    expected = max(0.0, g * (np.sin(angle_rad) - friction_coefficient * np.cos(angle_rad)))
    slide_distance = x_mean[-1] - x_mean[half]
    sticks = abs(slide_distance) < 1e-6 * rod.length_m
    return InclineResult(
        sticks=sticks,
        acceleration_m_s2=float(acceleration),
        expected_acceleration_m_s2=float(expected),
        newton_iterations_mean=float(np.mean(iterations)),
        normal_force_n=float(np.sum(info.contact_force_n[:, 2])),
    )
