"""The rod's mount on the arm: the flange pose by matrices is scipy's composition of rotations, and inverts."""

import numpy as np
from scipy.spatial.transform import Rotation

from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.settings import UR3Settings


def _scipy_flange_pose(mount: Mount, alpha: np.ndarray) -> np.ndarray:
    """The composition as scipy's Rotation writes it (what `flange_pose` computed before it used matrices)."""
    position = mount.world_position_m + mount.world_rotation.apply(alpha[3:6])
    rotation = mount.world_rotation * Rotation.from_rotvec(alpha[0:3]) * mount.rod_in_flange.inv()
    return np.concatenate([position, rotation.as_rotvec()])


def _mounts() -> list[Mount]:
    tilted = Mount(
        np.array([0.25, -0.1, 0.03]),
        Rotation.from_rotvec(np.radians([10.0, -20.0, 135.0])),
        Rotation.from_rotvec(np.radians([180.0, 0.0, 0.0])),
    )
    return [Mount.from_settings(UR3Settings()), tilted]


def test_the_flange_pose_is_scipys_composition_of_the_rotations():
    rng = np.random.default_rng(7)
    angles = np.concatenate([rng.uniform(0, np.pi, 200), [0.0, 1e-9, np.pi / 2, np.pi - 1e-9, np.pi - 1e-3]])
    for mount in _mounts():
        for angle in angles:
            axis = rng.normal(size=3)
            alpha = np.concatenate([angle * axis / np.linalg.norm(axis), rng.uniform(-0.3, 0.3, 3)])
            ours, theirs = mount.flange_pose(alpha), _scipy_flange_pose(mount, alpha)
            np.testing.assert_allclose(ours[0:3], theirs[0:3], rtol=0, atol=1e-15)
            # the same rotation (a rotation vector of angle ~pi may come out as its antipode: compare matrices)
            np.testing.assert_allclose(
                Rotation.from_rotvec(ours[3:6]).as_matrix(), Rotation.from_rotvec(theirs[3:6]).as_matrix(), atol=1e-12
            )
            assert np.linalg.norm(ours[3:6]) <= np.pi + 1e-12


def test_the_base_pose_of_a_flange_pose_is_where_the_rod_was_put():
    rng = np.random.default_rng(8)
    for mount in _mounts():
        for _ in range(100):
            alpha = np.concatenate([rng.uniform(-1.0, 1.0, 3), rng.uniform(-0.3, 0.3, 3)])
            back = mount.alpha(mount.flange_pose(alpha))
            np.testing.assert_allclose(back[3:6], alpha[3:6], rtol=0, atol=1e-14)
            np.testing.assert_allclose(
                Rotation.from_rotvec(back[0:3]).as_matrix(), Rotation.from_rotvec(alpha[0:3]).as_matrix(), atol=1e-12
            )
