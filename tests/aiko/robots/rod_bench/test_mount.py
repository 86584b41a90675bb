"""The rod's mount on the arm: the flange pose by matrices is scipy's composition of rotations, and inverts."""

import numpy as np
from scipy.spatial.transform import Rotation

from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.settings import UR3Settings


def _world(mount: Mount) -> Rotation:
    return Rotation.from_matrix(mount.world_rotation_matrix)


def _rod_in_flange(mount: Mount) -> Rotation:
    return Rotation.from_matrix(mount.rod_in_flange_matrix)


def _scipy_flange_pose(mount: Mount, alpha: np.ndarray) -> np.ndarray:
    """The composition as scipy's Rotation writes it (what `flange_pose` computed before it used matrices)."""
    position = mount.world_position_m + _world(mount).apply(alpha[3:6])
    rotation = _world(mount) * Rotation.from_rotvec(alpha[0:3]) * _rod_in_flange(mount).inv()
    return np.concatenate([position, rotation.as_rotvec()])


def _mounts() -> list[Mount]:
    tilted = Mount(
        np.array([0.25, -0.1, 0.03]),
        Rotation.from_rotvec(np.radians([10.0, -20.0, 135.0])).as_matrix(),
        Rotation.from_rotvec(np.radians([180.0, 0.0, 0.0])).as_matrix(),
    )
    return [Mount.from_settings(UR3Settings()), tilted]


def _angles(rng: np.random.Generator) -> np.ndarray:
    """Rotation angles over [0, pi], with the edges where rotation-vector formulas change branch."""
    return np.concatenate([rng.uniform(0, np.pi, 200), [0.0, 1e-9, np.pi / 2, np.pi - 1e-9, np.pi - 1e-3]])


def _rotation_vector(rng: np.random.Generator, angle: float) -> np.ndarray:
    axis = rng.normal(size=3)
    return angle * axis / np.linalg.norm(axis)


def _assert_same_rotation(ours: np.ndarray, theirs: np.ndarray) -> None:
    """The same rotation (a rotation vector of angle ~pi may come out as its antipode: compare matrices), and ours
    with its angle in [0, pi]."""
    np.testing.assert_allclose(
        Rotation.from_rotvec(ours).as_matrix(), Rotation.from_rotvec(theirs).as_matrix(), atol=1e-12
    )
    assert np.linalg.norm(ours) <= np.pi + 1e-12


def test_the_flange_pose_is_scipys_composition_of_the_rotations():
    rng = np.random.default_rng(7)
    angles = _angles(rng)
    for mount in _mounts():
        for angle in angles:
            alpha = np.concatenate([_rotation_vector(rng, angle), rng.uniform(-0.3, 0.3, 3)])
            ours, theirs = mount.flange_pose(alpha), _scipy_flange_pose(mount, alpha)
            np.testing.assert_allclose(ours[0:3], theirs[0:3], rtol=0, atol=1e-15)
            _assert_same_rotation(ours[3:6], theirs[3:6])


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


def _scipy_alpha(mount: Mount, flange_pose: np.ndarray) -> np.ndarray:
    """`Mount.alpha` as scipy's Rotation writes it (what it computed before it used matrices)."""
    inv = _world(mount).inv()
    rotation = inv * Rotation.from_rotvec(flange_pose[3:6]) * _rod_in_flange(mount)
    return np.concatenate([rotation.as_rotvec(), inv.apply(flange_pose[0:3] - mount.world_position_m)])


def test_the_base_pose_of_any_flange_pose_is_scipys_composition():
    rng = np.random.default_rng(9)
    angles = _angles(rng)
    for mount in _mounts():
        for angle in angles:
            rotation = _rotation_vector(rng, angle)
            pose = np.concatenate([rng.uniform(-0.4, 0.4, 3), rotation])
            ours, theirs = mount.alpha(pose), _scipy_alpha(mount, pose)
            np.testing.assert_allclose(ours[3:6], theirs[3:6], rtol=0, atol=1e-15)
            _assert_same_rotation(ours[0:3], theirs[0:3])


def test_the_flange_wrench_is_the_base_wrench_negated_and_rotated_and_inverts():
    rng = np.random.default_rng(10)
    for mount in _mounts():
        for _ in range(100):
            base = rng.normal(size=6)  # [moment; force], world frame
            flange = mount.flange_wrench(base)
            theirs = np.concatenate([-_world(mount).apply(base[3:6]), -_world(mount).apply(base[0:3])])
            np.testing.assert_allclose(flange, theirs, rtol=0, atol=1e-14)
            np.testing.assert_allclose(mount.base_wrench(flange), base, rtol=0, atol=1e-14)
    # the force is the UR order's first half, and the flange feels the reaction: on an untilted mount, a base
    # pushing the rod down (world -z) reads +z at the flange
    level = Mount(np.zeros(3), np.eye(3), np.eye(3))
    np.testing.assert_allclose(level.flange_wrench([0, 0, 0, 0, 0, -1.0]), [0, 0, 1.0, 0, 0, 0], atol=0)
