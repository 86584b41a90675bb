"""The ``kinematic`` backend: ideal joints that follow their references with a first-order lag.

A stand-in plant for tests and for exercising the control loop and the logs without physics. It makes no claim
about how the robot moves through the world, so it reports no link poses.
"""

from __future__ import annotations

import math

import numpy as np

from aiko.core.config import Table
from aiko.core.registry import register_backend
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext


def parse_settings(table: Table) -> float:
    """``[backend.kinematic]``: the joints' first-order time constant."""
    time_constant_s = table.number("time_constant_s", 0.05, min=0.0, min_exclusive=True, max=10.0)
    table.finish()
    return time_constant_s


class KinematicBackend(JointInterface):
    name = "kinematic"

    def __init__(self) -> None:
        self.time_constant_s = 0.05
        self._active = False

    def configure(self, ctx: RunContext) -> None:
        time_constant_s = ctx.backend_settings(KinematicBackend.name)  # the parsed [backend.kinematic] table
        if time_constant_s is not None:
            self.time_constant_s = time_constant_s
        self.robot = ctx.robot
        posture = ctx.gait.initial_posture() if ctx.gait is not None else None
        n = ctx.robot.n_joints
        self._angle = np.zeros((2, n)) if posture is None else np.vstack([posture.angle_h_rad, posture.angle_v_rad])
        self._target = self._angle.copy()
        self._t_s = 0.0
        self._steps = 0

    def activate(self) -> None:
        self._active = True

    def write(self, refs: JointReferences) -> None:
        if not self._active:
            return
        h, v = self.robot.clamp(refs.angle_h_rad, refs.angle_v_rad)
        self._target = np.vstack([h, v])

    def advance_to(self, t_s: float) -> None:
        dt = t_s - self._t_s
        if dt <= 0:
            return
        # Exact solution of τ·α̇ = α_r − α over the interval, the reference being held (zero-order hold).
        self._angle = self._target + (self._angle - self._target) * math.exp(-dt / self.time_constant_s)
        self._t_s = t_s
        self._steps += 1

    def read(self) -> JointFeedback:
        rate = (self._target - self._angle) / self.time_constant_s
        status = np.full(self.robot.n_joints, int(JointStatus.ENABLED) if self._active else 0, dtype=np.uint8)
        return JointFeedback(self._t_s, self._angle[0].copy(), self._angle[1].copy(), rate[0], rate[1], status)

    def deactivate(self) -> None:
        if self._active:
            self._target = self._angle.copy()
        self._active = False

    def summary(self) -> dict:
        return {"kinematic_steps": self._steps, "time_constant_s": self.time_constant_s}


register_backend(
    "kinematic", KinematicBackend, "ideal joints with a first-order lag (no physics; for tests)", parse_settings
)
