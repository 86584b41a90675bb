"""3D non-smooth snake simulator (Transeth et al., paper 000): time-stepping with set-valued contact and friction."""

from sim.snake3d.kinematics import posture_state, total_energy
from sim.snake3d.model import SimulationDivergedError, SnakeModel, SnakeModelError, SnakeState
from sim.snake3d.simulator import RunStats, SnakeSimulator

__all__ = [
    "RunStats",
    "SimulationDivergedError",
    "SnakeModel",
    "SnakeModelError",
    "SnakeSimulator",
    "SnakeState",
    "posture_state",
    "total_energy",
]
