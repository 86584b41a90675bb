"""Where the rod sits on the arm: rod base pose (the simulator's ``alpha``) <-> UR flange pose, and the rod's base
wrench <-> what the controller reports at the flange.

The simulator's base pose ``alpha`` is ``[rotation vector; position]`` in the rod's world frame (table plane
z = 0); UR poses are ``[x, y, z, rx, ry, rz]`` (position, then rotation vector) in the arm's base frame (UR's
"pose" convention, ur_rtde's getActualTCPPose). The fixed rotations are 3x3 matrices, and every conversion composes
them with the UR kinematics' own Rodrigues formulas rather than scipy's ``Rotation``: the bench calls
`flange_pose` twice per control period, and the HIL rod plant calls `alpha` and `flange_wrench` at every 200 Hz
controller tick, where scipy's ``Rotation`` objects cost a third of the plant's time (a rotation vector's round trip
25 µs against scipy's 77 µs, measured under load), and importing scipy.spatial costs every ``aiko bench`` command
~0.3 s of start-up. The same poses and wrenches as scipy's compositions, to rounding:
tests/aiko/robots/rod_bench/test_mount.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiko.devices.ur.kinematics import matrix_to_rotvec, rotvec_to_matrix
from aiko.robots.rod_bench.settings import UR3Settings


@dataclass(frozen=True, eq=False)
class Mount:
    """The rigid transforms of :class:`~aiko.robots.rod_bench.settings.UR3Settings`: world in UR base, rod base
    in flange (rotation only; the rod's base point is the flange origin). Rotations are 3x3 matrices whose columns
    are the inner frame's axes in the outer one."""

    world_position_m: np.ndarray
    world_rotation_matrix: np.ndarray  # the world's axes in the UR base frame
    rod_in_flange_matrix: np.ndarray  # the rod base's axes in the flange frame

    @property
    def _world_matrix_inverse(self) -> np.ndarray:
        return self.world_rotation_matrix.T  # a rotation's inverse is its transpose (a view: nothing is copied)

    @classmethod
    def from_settings(cls, settings: UR3Settings) -> Mount:
        return cls(
            np.asarray(settings.bench_frame_position_m, dtype=float),
            rotvec_to_matrix(np.radians(settings.bench_frame_rotation_deg)),
            rotvec_to_matrix(np.radians(settings.mount_rotation_deg)),
        )

    def ur_base_from_world(self, vector: Sequence[float] | np.ndarray) -> np.ndarray:
        """A world-frame vector (a velocity, a force) in the UR base frame's axes."""
        rotated: np.ndarray = self.world_rotation_matrix @ np.asarray(vector, dtype=float)
        return rotated

    def flange_pose(self, alpha: Sequence[float]) -> np.ndarray:
        """UR flange pose ``[x, y, z, rx, ry, rz]`` that puts the rod's base at ``alpha`` (world frame)."""
        a = np.asarray(alpha, dtype=float)
        position = self.world_position_m + self.world_rotation_matrix @ a[3:6]
        # flange from rod = (rod in flange)^-1 = its transpose
        rotation = self.world_rotation_matrix @ rotvec_to_matrix(a[0:3]) @ self.rod_in_flange_matrix.T
        return np.concatenate([position, matrix_to_rotvec(rotation)])

    def alpha(self, flange_pose: Sequence[float]) -> np.ndarray:
        """The rod's base pose ``[rotation vector; position]`` (world frame) of a UR flange pose."""
        p = np.asarray(flange_pose, dtype=float)
        inverse = self._world_matrix_inverse
        position = inverse @ (p[0:3] - self.world_position_m)
        rotation = inverse @ rotvec_to_matrix(p[3:6]) @ self.rod_in_flange_matrix
        return np.concatenate([matrix_to_rotvec(rotation), position])

    def flange_wrench(self, base_wrench: Sequence[float]) -> np.ndarray:
        """What a force sensor at the flange reads, UR order ``[Fx, Fy, Fz, Tx, Ty, Tz]`` in the UR base frame, from
        the simulator's base wrench (``[moment about the base point; force]``, world frame, applied by the base
        on the rod): its negative, rotated into the UR base frame."""
        w = np.asarray(base_wrench, dtype=float)
        return np.concatenate([-(self.world_rotation_matrix @ w[3:6]), -(self.world_rotation_matrix @ w[0:3])])

    def base_wrench(self, flange_wrench: Sequence[float]) -> np.ndarray:
        """Inverse of :meth:`flange_wrench`: the simulator's base wrench (world frame) from a flange reading."""
        f = np.asarray(flange_wrench, dtype=float)
        inverse = self._world_matrix_inverse
        return np.concatenate([-(inverse @ f[3:6]), -(inverse @ f[0:3])])
