"""The bench's command and observation: what the loop sends to the arm and what it reads back (``as_payload()``
for the log, as :class:`aiko.core.interfaces.Payload` asks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.core.messages import Channel, Message, boolean, integer, number, numbers, record

STRAIN_AXES = ("kappa_x", "kappa_y", "kappa_z", "eps_x", "eps_y", "eps_z")
"""A strain node's [κ; ε]: curvatures (1/m) about the rod frame's axes, then the linear strain (x along the rod: 1
when unstretched), as the rod's channels and the strain observer log them."""

_BASE_ALPHA = numbers("the flange pose as the rod's base pose [rotation vector (rad); position (m)], world frame")
_FLANGE_POSE = numbers("the flange pose as the arm takes it, UR [x, y, z (m), rx, ry, rz (rad)], base frame")


def _list(a: Any) -> list[float]:
    return [float(x) for x in np.asarray(a, dtype=float).ravel()]


@dataclass(frozen=True)
class FlangeTarget:
    """Where the flange must be at ``target_t_s``: the servo set-point sent at run time ``t_s``.

    ``base_alpha`` is the same pose as the rod's base (``[rotation vector; position]``, the simulator's world frame),
    ``flange_pose`` as the arm takes it (UR ``[x, y, z, rx, ry, rz]``, base frame). ``trajectory_t_s`` is the time on
    the experiment's trajectory of that pose: ``target_t_s``, except while the set-points catch up after a stall
    (:class:`aiko.robots.rod_bench.trajectory.SetPointTime`)."""

    t_s: float
    target_t_s: float
    base_alpha: np.ndarray
    flange_pose: np.ndarray
    trajectory_t_s: float

    def as_payload(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "target_t_s": self.target_t_s,
            "trajectory_t_s": self.trajectory_t_s,
            "base_alpha": _list(self.base_alpha),
            "flange_pose": _list(self.flange_pose),
        }


COMMAND_CHANNEL = Channel("/bench/command", Message(
    "aiko.bench.FlangeTarget",
    "The servo set-point streamed to the arm at the control rate: where the flange must be at target_t_s.",
    {
        "t_s": number("run time it was sent", "s"),
        "target_t_s": number("run time the flange must be there", "s"),
        "trajectory_t_s": number("the trajectory's time of this pose (behind target_t_s while catching up)", "s"),
        "base_alpha": _BASE_ALPHA,
        "flange_pose": _FLANGE_POSE,
    },
))  # fmt: skip


@dataclass(frozen=True)
class BenchObservation:
    """One read of the bench at run time ``t_s``.

    ``base_alpha`` is the measured flange pose as the rod's base pose (world frame); ``base_wrench`` the rod's base
    wrench ``[moment about the base point; force]`` in the world frame, applied by the base on the rod (the
    simulator's convention; a flange force sensor reads its negative). ``arm`` is the arm's state
    (:meth:`aiko.devices.ur.arm.ArmState.as_payload`), empty in simulation."""

    t_s: float
    base_alpha: np.ndarray
    flange_pose: np.ndarray
    flange_speed: np.ndarray
    base_wrench: np.ndarray
    controller_time_s: float | None = None
    arm: dict[str, Any] = field(default_factory=dict)

    def as_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "t_s": self.t_s,
            "base_alpha": _list(self.base_alpha),
            "flange_pose": _list(self.flange_pose),
            "flange_speed": _list(self.flange_speed),
            "base_moment_n_m": _list(self.base_wrench[0:3]),
            "base_force_n": _list(self.base_wrench[3:6]),
        }
        if self.controller_time_s is not None:
            out["controller_time_s"] = self.controller_time_s
        if self.arm:
            out["arm"] = self.arm
        return out


ARM_STATE = record(
    "the UR arm's state (aiko.devices.ur.arm.ArmState: RTDE outputs); absent in simulation",
    {
        "timestamp_s": number("the controller's time", "s"),
        "tcp_pose": numbers("TCP pose [x, y, z (m), rx, ry, rz (rad)], base frame"),
        "tcp_speed": numbers("TCP speed [vx, vy, vz (m/s), wx, wy, wz (rad/s)]"),
        "q_rad": numbers("joint angles, base first", "rad"),
        "safety_mode": integer("RTDE safety mode (1 normal, 3 protective stop, ...)"),
        "robot_mode": integer("RTDE robot mode (7 running, ...)"),
        "runtime_state": integer("RTDE runtime state (2 playing, ...)"),
        "protective_stopped": boolean("the controller is in a protective stop"),
    },
    optional=True,
)
OBSERVATION_CHANNEL = Channel("/bench/observation", Message(
    "aiko.bench.Observation",
    "One read of the bench at the observe rate: the measured flange pose and speed, the rod's base wrench, the "
    "arm's state.",
    {
        "t_s": number("run time of the read", "s"),
        "base_alpha": _BASE_ALPHA,
        "flange_pose": _FLANGE_POSE,
        "flange_speed": numbers("flange speed [vx, vy, vz (m/s), wx, wy, wz (rad/s)]"),
        "base_moment_n_m": numbers("moment the base applies on the rod, about the base point, world frame", "N m"),
        "base_force_n": numbers("force the base applies on the rod, world frame", "N"),
        "controller_time_s": number("the arm controller's clock at the read", "s", optional=True),
        "arm": ARM_STATE,
    },
))  # fmt: skip
