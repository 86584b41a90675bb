"""The bench's command and observation: what the loop sends to the arm and what it reads back (``as_payload()``
for the log, as :class:`aiko.core.interfaces.Payload` asks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _list(a: Any) -> list[float]:
    return [float(x) for x in np.asarray(a, dtype=float).ravel()]


@dataclass(frozen=True)
class FlangeTarget:
    """Where the flange must be at ``target_t_s``: the servo set-point sent at run time ``t_s``.

    ``base_alpha`` is the same pose as the rod's base (``[rotation vector; position]``, the simulator's world frame),
    ``flange_pose`` as the arm takes it (UR ``[x, y, z, rx, ry, rz]``, base frame)."""

    t_s: float
    target_t_s: float
    base_alpha: np.ndarray
    flange_pose: np.ndarray

    def as_payload(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "target_t_s": self.target_t_s,
            "base_alpha": _list(self.base_alpha),
            "flange_pose": _list(self.flange_pose),
        }


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
