"""Foxglove-schema channels beside aiko's JSON ones: a log opens in Foxglove's 3D panel with Aiko moving."""

import time

import numpy as np
from mcap.reader import make_reader

from aiko.core.mocap import MOCAP_CHANNEL
from aiko.log import LogReader, McapRecorder
from aiko.log.foxglove_views import FoxgloveViews
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.joints import FEEDBACK_CHANNEL
from aiko.robots.aiko.shape import body_drawing

ROBOT = load_robot("experiments/robots/aiko.toml")
BODY = body_drawing(ROBOT)


def _feedback(k: int) -> dict:
    n = ROBOT.n_joints
    return {
        "t_s": 0.01 * k,
        "angle_h_rad": [0.3 * np.sin(0.1 * k + j) for j in range(n)],
        "angle_v_rad": [0.1 * np.cos(0.1 * k + j) for j in range(n)],
        "rate_h_rad_s": [0.0] * n,
        "rate_v_rad_s": [0.0] * n,
        "status": [1] * n,
    }


def test_a_run_log_has_frame_transforms_a_body_scene_and_joint_states_on_epoch_time(tmp_path):
    path = tmp_path / "fg.mcap"
    t0 = time.monotonic_ns()
    with McapRecorder(path, foxglove_views=FoxgloveViews(BODY, tracked_link=6)) as rec:
        rec.record(MOCAP_CHANNEL, t0, {"names": ["link6"], "position_m": [[1.0, 2.0, 0.05]],
                                       "quaternion_wxyz": [[1.0, 0.0, 0.0, 0.0]], "occluded": [False],
                                       "capture_t_ns": t0, "latency_s": 0.0, "frame": 1, "source": "test"})  # fmt: skip
        for k in range(20):  # 100 Hz for 0.2 s
            rec.record(FEEDBACK_CHANNEL, t0 + k * 10_000_000, _feedback(k))
    with open(path, "rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        by_topic = {}
        for schema, channel, message in reader.iter_messages():
            by_topic.setdefault(channel.topic, []).append((schema, channel, message))
    schema, channel, _ = by_topic["/foxglove/tf"][0]
    assert schema.name == "foxglove.FrameTransforms"
    assert schema.encoding == channel.message_encoding == "protobuf"
    assert by_topic["/foxglove/body"][0][0].name == "foxglove.SceneUpdate"
    assert by_topic["/foxglove/joint_states"][0][0].name == "foxglove.JointStates"
    assert len(by_topic["/foxglove/joint_states"]) == 20
    assert len(by_topic["/foxglove/tf"]) == 4  # 20 Hz body poses from 100 Hz feedback
    first_tf = by_topic["/foxglove/tf"][0][2]
    assert abs(first_tf.log_time - time.time_ns()) < 60 * 10**9  # today, not 1970
    for i in range(1, ROBOT.n_links + 1):
        assert f"link{i}".encode() in first_tf.data
    # the bytes are the SDK's own encoding of the body shape placed at the tracked link's mocap pose
    views = FoxgloveViews(BODY, tracked_link=6)
    views.messages("/mocap", 0, {"names": ["link6"], "position_m": [[1.0, 2.0, 0.05]],
                                 "quaternion_wxyz": [[1.0, 0.0, 0.0, 0.0]], "occluded": [False]})  # fmt: skip
    expected = dict(views.messages("/joint_feedback", first_tf.log_time, _feedback(0)))
    assert first_tf.data == expected["/foxglove/tf"].encode()
    assert summary.statistics.message_count == sum(len(v) for v in by_topic.values())
    # aiko's reader lists the views but reads its own JSON channels as before
    log = LogReader(path)
    info = log.channel_info()
    assert info["/foxglove/tf"].count == 4 and info["/foxglove/tf"].schema_name == "foxglove.FrameTransforms"
    assert "/foxglove/tf" not in log.topics
    assert log.channel("/joint_feedback").t_ns[0] == t0


def test_simulator_poses_and_the_rod_give_their_own_views():
    views = FoxgloveViews(None)
    planar = views.messages("/sim/link_poses", 5, {"x_m": [0.0, 0.1, 0.2], "y_m": [0.0, 0.0, 0.0],
                                                   "theta_rad": [0.0, 0.1, 0.2]})  # fmt: skip
    assert [topic for topic, _ in planar] == ["/foxglove/tf", "/foxglove/body"]
    rod = views.messages("/sim/rod/centreline", 5, {"centreline_m": [[0, 0, 0], [0, 0, 0.1], [0, 0.01, 0.2]]})
    assert [type(m).__name__ for _, m in rod] == ["SceneUpdate"]
    wrench = views.messages("/sim/rod/base_wrench", 5, {"force_n": [0.0, 0.0, -2.0], "moment_n_m": [0, 0, 0]})
    assert [topic for topic, _ in wrench] == ["/foxglove/rod/base_wrench"]
    assert views.messages("/sim/link_poses", 5, {"x_m": "garbage"}) == [] and views.errors == 1


def test_a_simulator_that_logs_its_poses_draws_the_body_from_them_only():
    views = FoxgloveViews(BODY, body_from_joints=False)  # the first feedback comes before the first pose
    assert [topic for topic, _ in views.messages("/joint_feedback", 5, _feedback(0))] == ["/foxglove/joint_states"]
