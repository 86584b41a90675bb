"""Plant adapter for hardware-in-the-loop: the simulated joints driven by external torques.

The emulated joint controllers of the CAN stack read the joint state, run their own control law and apply torques;
this adapter is the only surface they need. Torques are held over ``dt_s`` (zero-order hold, like a motor driver
updated at the controller's rate).
"""

from __future__ import annotations

import math

import numpy as np

from sim.snake3d.model import SnakeModel, SnakeState
from sim.snake3d.simulator import SnakeSimulator


class Snake3DPlant:
    """``joint_state()`` → (angles (n−1, 2) [h, v] rad, rates (n−1, 2) rad/s); ``advance(torques_nm, dt_s)``."""

    def __init__(self, model: SnakeModel, state: SnakeState | None = None) -> None:
        self.simulator = SnakeSimulator(model, state)
        self.simulator.set_torques(np.zeros((model.n_joints, 2)))

    @property
    def n_joints(self) -> int:
        return self.simulator.model.n_joints

    @property
    def t_s(self) -> float:
        return self.simulator.state.t_s

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the joint angles and rates that the compiled step left after the last advance()."""
        return self.simulator.joint_angle_rad.copy(), self.simulator.joint_rate_rad_s.copy()

    def joint_state_views(self) -> tuple[np.ndarray, np.ndarray]:
        """The simulator's own (n−1, 2) angle and rate arrays, overwritten in place by every advance(): no copy, for
        a caller that reads them before the next advance (e.g. encoding them into CAN frames each tick)."""
        return self.simulator.joint_angle_rad, self.simulator.joint_rate_rad_s

    def advance(self, torques_nm: np.ndarray, dt_s: float) -> None:
        """Apply ``torques_nm`` (n−1, 2) for ``dt_s`` seconds (a whole number of simulator steps, at least one)."""
        tau = np.asarray(torques_nm, dtype=float)
        if tau.shape != (self.n_joints, 2):
            raise ValueError(f"torques_nm must have shape ({self.n_joints}, 2) [tau_h, tau_v], got {tau.shape}")
        if not (math.isfinite(dt_s) and dt_s > 0):
            raise ValueError(f"dt_s must be finite and > 0, got {dt_s}")
        self.simulator.set_torques(tau)
        self.simulator.step(max(1, int(round(dt_s / self.simulator.model.dt_s))))
