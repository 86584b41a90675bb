"""Planar snake robot among circular obstacles: the hybrid model of Liljebäck et al. (paper 001)."""

from sim.planar_snake.contact import ContactTerms, all_gaps, contact_terms
from sim.planar_snake.model import (
    PlanarSnakeError,
    PlanarSnakeModel,
    coriolis_force,
    joint_angles,
    kinetic_energy,
    link_centres,
    link_jacobians,
    mass_matrix,
    state_from_joint_angles,
)
from sim.planar_snake.simulator import (
    PlanarSnakeState,
    SimulationError,
    SimulationStats,
    initial_state,
    joint_torques,
    step,
)

__all__ = [
    "ContactTerms",
    "PlanarSnakeError",
    "PlanarSnakeModel",
    "PlanarSnakeState",
    "SimulationError",
    "SimulationStats",
    "all_gaps",
    "contact_terms",
    "coriolis_force",
    "initial_state",
    "joint_angles",
    "joint_torques",
    "kinetic_energy",
    "link_centres",
    "link_jacobians",
    "mass_matrix",
    "state_from_joint_angles",
    "step",
]
