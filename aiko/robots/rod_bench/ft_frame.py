"""Where the F/T sensor sits between the flange and the rod: its reading moved to the frame the bench compares in.

The bench compares wrenches in the **flange frame at the rod's base point** (the bench's mount puts the rod's base
at the flange origin, axes along the flange's (tool0) axes; docs/bench.md). A sensor between the flange and the
clamp measures about *its own* origin, along *its own* axes: an OnRobot HEX, for example, measures at its
reference point tens of millimetres from the rod's base along the tool axis, and its x axis points wherever its
cable leaves, i.e. it is turned about the tool axis. ``[ft_sensor] offset_m`` and ``rotation_deg`` say where:

* ``offset_m`` = r: the sensor's origin in the flange frame at the rod's base (m). A sensor *behind* the rod's base
  (between it and the flange), its axis along the flange's z, has r = [0, 0, −d].
* ``rotation_deg``: the rotation vector (degrees) of the sensor's axes in the flange frame, R; a HEX turned by θ
  about the tool axis has [0, 0, θ].

Both readings are the wrench the tool side (clamp and rod) exerts **on** the sensor; a torque is about its frame's
origin. Moving it (the same in HIL and on the real bench, :meth:`SensorMount.to_flange`):

    F_flange = R F_sensor
    τ_flange = R τ_sensor + r × F_flange

(a force acting through the sensor's origin P = r has, about the base point O, the extra moment (P − O) × F; the
sensor's own torque τ_sensor is about P). The inverse, :meth:`SensorMount.from_flange`, is what the HIL plant
feeds the emulated sensor, so that the bench reads it back through the same transform as a real sensor:

    F_sensor = Rᵀ F_flange
    τ_sensor = Rᵀ (τ_flange − r × F_flange)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiko.devices.ur.kinematics import rotvec_to_matrix


@dataclass(frozen=True, eq=False)
class SensorMount:
    """The sensor's pose in the flange frame at the rod's base: origin ``offset_m`` (3,), axes ``rotation_matrix``
    (3x3, its columns the sensor's axes in the flange frame; a matrix, not scipy's ``Rotation``, whose import costs
    every ``aiko bench`` command ~0.3 s of start-up)."""

    offset_m: np.ndarray
    rotation_matrix: np.ndarray

    @classmethod
    def from_settings(cls, offset_m: Sequence[float], rotation_deg: Sequence[float]) -> SensorMount:
        return cls(np.asarray(offset_m, dtype=float), rotvec_to_matrix(np.radians(np.asarray(rotation_deg))))

    @property
    def is_identity(self) -> bool:
        return bool(np.all(self.offset_m == 0.0) and np.array_equal(self.rotation_matrix, np.eye(3)))

    def to_flange(self, wrench: Sequence[float]) -> np.ndarray:
        """A sensor reading ``[Fx, Fy, Fz, Tx, Ty, Tz]`` (sensor frame, about its origin) in the flange frame about
        the rod's base point."""
        w = np.asarray(wrench, dtype=float)
        force = self.rotation_matrix @ w[0:3]
        return np.concatenate([force, self.rotation_matrix @ w[3:6] + np.cross(self.offset_m, force)])

    def from_flange(self, wrench: Sequence[float]) -> np.ndarray:
        """What the sensor reads for a wrench ``[F; τ]`` in the flange frame about the rod's base point."""
        w = np.asarray(wrench, dtype=float)
        inverse = self.rotation_matrix.T
        return np.concatenate([inverse @ w[0:3], inverse @ (w[3:6] - np.cross(self.offset_m, w[0:3]))])


IDENTITY = SensorMount(np.zeros(3), np.eye(3))
