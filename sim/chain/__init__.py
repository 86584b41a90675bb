"""Chain of rigid bodies with revolute joints in the moving-frame / Lie-group form of paper 002.

Stable API: ``uniform_chain``, ``forward_kinematics``, ``transfer_matrix`` (plus the dynamics below), and Aiko's
shape from cardan joint angles (``link_poses_from_joint_angles``). See docs/chain.md.
"""

from sim.chain.cardan import (
    AIKO_AXIS_OFFSET_M,
    cardan_angles_from_rotations,
    cardan_chain,
    cardan_rates_from_velocities,
    link_poses_from_joint_angles,
)
from sim.chain.composite import composite_matrices
from sim.chain.dynamics import (
    EquationsOfMotion,
    assemble,
    forward_dynamics,
    generalized_force,
    inverse_dynamics,
    joint_torque_moments,
    kinetic_energy_j,
    potential_energy_j,
    total_energy_j,
)
from sim.chain.integrate import ChainTrajectory, rk4_step, simulate
from sim.chain.kinematics import ChainFrames, ChainPose, chain_frames, forward_kinematics
from sim.chain.model import Chain, ChainModelError, axes_from_letters, cylinder_inertia_kg_m2, uniform_chain
from sim.chain.motions import MOTIONS, PolynomialMotion, ValidationResult, table1_motion, validate_motion
from sim.chain.transfer import transfer_matrix, transfer_matrix_rate

__all__ = [
    "AIKO_AXIS_OFFSET_M",
    "MOTIONS",
    "Chain",
    "ChainFrames",
    "ChainModelError",
    "ChainPose",
    "ChainTrajectory",
    "EquationsOfMotion",
    "PolynomialMotion",
    "ValidationResult",
    "assemble",
    "axes_from_letters",
    "cardan_angles_from_rotations",
    "cardan_chain",
    "cardan_rates_from_velocities",
    "chain_frames",
    "composite_matrices",
    "cylinder_inertia_kg_m2",
    "forward_dynamics",
    "forward_kinematics",
    "generalized_force",
    "inverse_dynamics",
    "joint_torque_moments",
    "kinetic_energy_j",
    "link_poses_from_joint_angles",
    "potential_energy_j",
    "rk4_step",
    "simulate",
    "table1_motion",
    "total_energy_j",
    "transfer_matrix",
    "transfer_matrix_rate",
    "uniform_chain",
    "validate_motion",
]
