"""aiko.robots.aiko.shape: body shape from joint feedback and one tracked link; `aiko chain offset-effect`."""

import json

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from aiko.cli import main
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.joints import JointFeedback
from aiko.robots.aiko.shape import body_shape, body_shape_from_feedback, rotation_from_quaternion_wxyz


@pytest.fixture
def robot(experiments_dir):
    return load_robot(experiments_dir / "robots/aiko.toml")


def feedback(h, v):
    n = len(h)
    return JointFeedback(0.0, np.asarray(h), np.asarray(v), np.zeros(n), np.zeros(n), np.zeros(n, np.uint8))


def test_straight_robot_spacing_and_tracked_pose(robot):
    shape = body_shape(robot, np.zeros(10), np.zeros(10))
    np.testing.assert_allclose(np.diff(shape.positions_m[:, 2]), robot.link_length_m, atol=1e-15)
    q = Rotation.from_euler("z", 0.7).as_quat(scalar_first=True)
    p = np.array([1.0, 2.0, 0.05])
    tracked = body_shape(robot, np.zeros(10), None, 6, p, q)
    np.testing.assert_allclose(tracked.positions_m[5], p, atol=1e-15)
    np.testing.assert_allclose(np.abs(tracked.quaternions_wxyz[5] @ q), 1.0, atol=1e-15)


def test_rotation_from_quaternion_is_scipys_for_unnormalised_quaternions():
    quats = np.random.default_rng(4).normal(size=(50, 4)) * np.random.default_rng(5).uniform(0.1, 10.0, size=(50, 1))
    for q in quats:
        expected = Rotation.from_quat(q, scalar_first=True).as_matrix()
        np.testing.assert_allclose(rotation_from_quaternion_wxyz(q), expected, rtol=0, atol=1e-15)


def test_feedback_shape_respects_joint_angles_and_offset(robot):
    rng = np.random.default_rng(1)
    h, v = rng.uniform(-0.7, 0.7, 10), rng.uniform(-0.3, 0.3, 10)
    shape = body_shape_from_feedback(robot, feedback(h, v))
    R = shape.rotations
    rel = np.swapaxes(R[:-1], 1, 2) @ R[1:]
    np.testing.assert_allclose(-np.arcsin(rel[:, 2, 0]), h, atol=1e-13)
    np.testing.assert_allclose(np.arctan2(rel[:, 2, 1], rel[:, 2, 2]), v, atol=1e-13)
    no_offset = body_shape_from_feedback(robot, feedback(h, v), use_axis_offset=False)
    shift = np.linalg.norm(shape.positions_m - no_offset.positions_m, axis=1)
    assert shift[0] == 0.0 and 1e-4 < shift.max() < 0.05


def test_wrong_sizes_are_config_errors(robot):
    with pytest.raises(ConfigError, match="10 joints; got 9 horizontal"):
        body_shape(robot, np.zeros(9), np.zeros(10))
    with pytest.raises(ConfigError, match="tracked_link must be in 1..11"):
        body_shape(robot, np.zeros(10), tracked_link=0)
    with pytest.raises(ConfigError, match="give both"):
        body_shape(robot, np.zeros(10), tracked_position_m=np.zeros(3))


def test_offset_effect_cli_on_sidewinding(capsys, experiments_dir):
    rc = main(["chain", "offset-effect", str(experiments_dir / "sidewinding.toml"), "--duration", "5", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["axis_offset_m"] == 0.022 and out["link"] == 6 and out["samples"] == 101
    # centimetre-scale: smaller than the offset itself, far above mocap noise
    assert 1e-3 < out["link_shift_rel_link1_max_m"] < 0.022
    assert out["link_shift_rel_link1_rms_m"] <= out["link_shift_rel_link1_max_m"]
    rc = main(["chain", "offset-effect", str(experiments_dir / "sidewinding.toml"), "--offset", "0", "--json"])
    assert rc == 0
    zero = json.loads(capsys.readouterr().out)
    assert zero["link_shift_rel_link1_max_m"] == 0.0 and zero["other_links_error_from_tracked_link_max_m"] < 1e-15
    assert main(["chain", "offset-effect", str(experiments_dir / "sidewinding.toml"), "--link", "12"]) == 2
    assert "--link must be in 1..11" in capsys.readouterr().err
