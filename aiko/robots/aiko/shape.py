"""Aiko's body shape from joint angles, for the live body view and for pose estimation from one tracked link.

Thin layer over :mod:`sim.chain.cardan` (the Lie-group chain model of paper 002 applied to Aiko's cardan joints):
it takes a :class:`RobotDescription` and joint feedback and returns every link's centre and orientation, placed
so that one tracked link (link 6 under Vicon, or any link a simulator reports) sits at its measured pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiko.core.errors import ConfigError
from aiko.log.foxglove_views import BodyDrawing
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.joints import JointFeedback
from sim import lie
from sim.chain import ChainModelError
from sim.chain.cardan import link_poses_from_joint_angles, quaternions_wxyz
from sim.snake3d.rotations import quat_to_matrix


@dataclass(frozen=True)
class BodyShape:
    """Link centres (n, 3) in metres and orientations (n, 4) as unit quaternions w, x, y, z (B_i -> world)."""

    positions_m: np.ndarray
    quaternions_wxyz: np.ndarray
    rotations: np.ndarray  # (n, 3, 3)


def body_shape(
    robot: RobotDescription,
    angle_h_rad: np.ndarray,
    angle_v_rad: np.ndarray | None = None,
    tracked_link: int = 1,
    tracked_position_m: np.ndarray | None = None,
    tracked_quaternion_wxyz: np.ndarray | None = None,
    use_axis_offset: bool = True,
) -> BodyShape:
    """Pose of every link from the joint angles and (optionally) the measured pose of one link.

    tracked_link is 1-based like the paper (Aiko's Vicon target is link 6). Without a tracked pose, link
    ``tracked_link`` is placed at the origin with identity orientation. ``use_axis_offset`` applies the
    robot's ``yaw_pitch_offset_m`` (a yaw-only robot has none).
    """
    n_joints = robot.n_joints
    h = np.asarray(angle_h_rad, dtype=float).reshape(-1)
    v = np.zeros(n_joints) if angle_v_rad is None else np.asarray(angle_v_rad, dtype=float).reshape(-1)
    if h.size != n_joints or v.size != n_joints:
        raise ConfigError(f"{robot.name} has {n_joints} joints; got {h.size} horizontal and {v.size} vertical angles")
    if not 1 <= tracked_link <= robot.n_links:
        raise ConfigError(f"tracked_link must be in 1..{robot.n_links}, got {tracked_link}")
    pose = None
    if tracked_position_m is not None or tracked_quaternion_wxyz is not None:
        if tracked_position_m is None or tracked_quaternion_wxyz is None:
            raise ConfigError("give both tracked_position_m and tracked_quaternion_wxyz, or neither")
        quat = np.asarray(tracked_quaternion_wxyz, dtype=float)
        if quat.shape != (4,) or not np.isfinite(quat).all() or np.linalg.norm(quat) < 1e-9:
            raise ConfigError(f"tracked_quaternion_wxyz must be 4 finite numbers (w, x, y, z), got {quat}")
        R = rotation_from_quaternion_wxyz(quat)
        pose = lie.pose(R, np.asarray(tracked_position_m, dtype=float).reshape(3))
    offset = robot.yaw_pitch_offset_m if (use_axis_offset and robot.has_vertical_axis) else 0.0
    try:
        x, R = link_poses_from_joint_angles(
            np.column_stack([h, v]), robot.link_length_m, offset, tracked_link - 1, pose
        )
    except ChainModelError as exc:
        raise ConfigError(str(exc)) from None
    return BodyShape(x, quaternions_wxyz(R), R)


def rotation_from_quaternion_wxyz(quat: np.ndarray) -> np.ndarray:
    """The rotation matrix of a quaternion (w, x, y, z), normalised first (as scipy's ``Rotation.from_quat``, which
    the run path no longer imports: scipy.spatial cost every run ~0.3 s of start-up for this one use, the tracked
    link's Vicon pose at every body drawing). The formula is the simulator's (`sim.snake3d.rotations`)."""
    q = np.asarray(quat, dtype=float)
    rotation: np.ndarray = quat_to_matrix(q / np.linalg.norm(q))
    return rotation


def body_shape_from_feedback(
    robot: RobotDescription,
    feedback: JointFeedback,
    tracked_link: int = 1,
    tracked_position_m: np.ndarray | None = None,
    tracked_quaternion_wxyz: np.ndarray | None = None,
    use_axis_offset: bool = True,
) -> BodyShape:
    """body_shape() from measured joint angles (the dashboard's body view, mocap-based pose estimates)."""
    return body_shape(
        robot,
        feedback.angle_h_rad,
        feedback.angle_v_rad,
        tracked_link,
        tracked_position_m,
        tracked_quaternion_wxyz,
        use_axis_offset,
    )


def body_drawing(robot: RobotDescription) -> BodyDrawing:
    """What a log's or a live view's 3D body needs of ``robot``, as data: its link sizes and its shape from joint
    angles (the viewers know no robot; the run hands them this)."""

    def shape_from_joints(
        angle_h_rad: np.ndarray,
        angle_v_rad: np.ndarray,
        tracked_link: int,
        tracked_position_m: np.ndarray | None,
        tracked_quaternion_wxyz: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        shape = body_shape(robot, angle_h_rad, angle_v_rad, tracked_link, tracked_position_m, tracked_quaternion_wxyz)
        return shape.positions_m, shape.quaternions_wxyz

    return BodyDrawing(robot.n_joints, robot.link_length_m, robot.link_radius_m, shape_from_joints)
