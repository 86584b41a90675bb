"""Aiko as an emulated Vicon subject (aiko/robots/aiko/vicon_source.py) and the frames the server builds from it:
segment per link, marker per link, mm and rotation conventions, occlusion, log replay."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from aiko.core.errors import ConfigError
from aiko.devices.vicon import protocol as p
from aiko.devices.vicon.frames import FrameEncoder
from aiko.devices.vicon.impairments import Impairments, Occlusion, parse_occlusions
from aiko.log.recorder import McapRecorder
from aiko.robots.aiko.backends.sim_snake3d import LINK_POSES_CHANNEL as LINK_POSES_3D
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.joints import FEEDBACK_CHANNEL, REFERENCES_CHANNEL
from aiko.robots.aiko.vicon_source import AikoFrameSource, LogPoses, PoseProvider, aiko_subject, marker_offset_m
from tests.aiko.devices.vicon.processes import REPO

ROBOT = load_robot(REPO / "experiments" / "robots" / "aiko.toml")


class FixedPoses(PoseProvider):
    def __init__(self, positions_m, quaternions_wxyz):
        self.value = (np.asarray(positions_m, float), np.asarray(quaternions_wxyz, float))

    def at(self, t_s):
        return self.value


def _random_poses(n, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 3)), Rotation.random(n, random_state=seed).as_quat(scalar_first=True)


def test_one_segment_and_one_marker_per_link_in_a_chain():
    subject = aiko_subject(ROBOT)
    assert [s.name for s in subject.segments] == [f"link{k}" for k in range(1, 12)]
    assert [s.parent for s in subject.segments] == [None] + [f"link{k}" for k in range(1, 11)]
    assert [(m.name, m.segment) for m in subject.markers] == [(f"link{k}_m", f"link{k}") for k in range(1, 12)]


def test_frames_are_millimetres_and_segment_to_world_rotations():
    positions, quats = _random_poses(11)
    positions[4] = np.nan  # a link the source does not know is left out (occluded)
    frame = AikoFrameSource(ROBOT, FixedPoses(positions, quats)).frame(0.0)["aiko"]
    assert "link5" not in frame.segments and "link5_m" not in frame.markers
    x, r = frame.segments["link3"]
    np.testing.assert_allclose(x, positions[2] * 1e3)
    np.testing.assert_allclose(r, Rotation.from_quat(quats[2], scalar_first=True).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(frame.markers["link3_m"], (positions[2] + r @ marker_offset_m(ROBOT)) * 1e3)


def test_encoded_frame_leaves_out_occluded_links_and_their_markers():
    source = AikoFrameSource(ROBOT, FixedPoses(*_random_poses(11)))
    encoder = FrameEncoder(source.subjects(), 100.0)
    hidden = Impairments(occlusions=parse_occlusions("aiko/link6,link2_m@0-1")).hidden("aiko", 0.5)
    objects = p.decode_packet(p.encode_packet(encoder.objects(41, 0.41, source.frame(0.41), {"aiko": hidden}, 0.02)))
    by_type = {type(o).__name__: o for o in objects}
    assert by_type["FrameInfo"].frame_id == 41
    assert by_type["StreamInfo"].frame_period_ticks == 1_350_000
    assert by_type["LatencyInfo"].total_s == pytest.approx(0.02)
    info = by_type["SubjectInfo"]
    ids = {s.name: s.segment_id for s in info.segments}
    assert {s.name: s.parent_id for s in info.segments}["link7"] == ids["link6"]
    glob = {s.segment_id for s in by_type["GlobalSegments"].segments}
    local = {s.segment_id for s in by_type["LocalSegments"].segments}
    assert glob == set(ids.values()) - {ids["link6"]}
    assert local == glob - {ids["link7"]}  # link7's local pose needs link6's
    markers = {m.marker_id: m.name for m in info.markers}
    seen = {markers[r.marker_id] for r in by_type["LabeledRecons"].recons}
    assert seen == {f"link{k}_m" for k in range(1, 12)} - {"link6_m", "link2_m"}


def test_local_pose_is_relative_to_the_parent():
    positions, quats = _random_poses(11, seed=3)
    source = AikoFrameSource(ROBOT, FixedPoses(positions, quats))
    objects = FrameEncoder(source.subjects(), 50.0).objects(0, 0.0, source.frame(0.0))
    local = next(o for o in objects if isinstance(o, p.LocalSegments)).segments[3]  # link4, parent link3
    r3 = Rotation.from_quat(quats[2], scalar_first=True).as_matrix()
    r4 = Rotation.from_quat(quats[3], scalar_first=True).as_matrix()
    np.testing.assert_allclose(local.translation_mm, r3.T @ (positions[3] - positions[2]) * 1e3, atol=1e-9)
    np.testing.assert_allclose(np.reshape(local.rotation, (3, 3)), r3.T @ r4, atol=1e-12)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("link3", (Occlusion("link3"),)),
        ("aiko/link3@1.5-2", (Occlusion("link3", "aiko", 1.5, 2.0),)),
        ("link3@2-, link4", (Occlusion("link3", None, 2.0), Occlusion("link4"))),
    ],
)
def test_occlusion_specs(spec, expected):
    assert parse_occlusions(spec) == expected


@pytest.mark.parametrize("spec", ["link3@4-2", "a/b/c", "link3@x-2"])
def test_bad_occlusion_specs_are_one_line_errors(spec):
    with pytest.raises(ConfigError, match="--occlude"):
        parse_occlusions(spec)


def test_log_replay_interpolates_and_loops(tmp_path):
    path = tmp_path / "run.mcap"
    p0, q0 = np.zeros((11, 3)), np.tile([1.0, 0, 0, 0], (11, 1))
    p1 = np.ones((11, 3))
    q1 = np.tile(Rotation.from_euler("z", 90, degrees=True).as_quat(scalar_first=True), (11, 1))
    with McapRecorder(path) as rec:
        for t_s, pos, q in ((0.0, p0, q0), (1.0, p1, q1)):
            rec.record(LINK_POSES_3D, int(t_s * 1e9), {"t_s": t_s, "position_m": pos, "quaternion_wxyz": q})
    poses = LogPoses(path, ROBOT)
    assert poses.kind == "/sim/link_poses"
    pos, q = poses.at(0.5)
    np.testing.assert_allclose(pos, 0.5)
    np.testing.assert_allclose(q[0], Rotation.from_euler("z", 45, degrees=True).as_quat(scalar_first=True))
    np.testing.assert_allclose(poses.at(2.0 + 0.5)[0], 0.5)  # looped: period = duration + one sample interval


def test_log_without_link_poses_is_shaped_from_joint_feedback(tmp_path):
    path = tmp_path / "run.mcap"
    n = ROBOT.n_joints
    with McapRecorder(path) as rec:
        rec.record(
            FEEDBACK_CHANNEL,
            0,
            {
                "t_s": 0.0,
                "angle_h_rad": [0.0] * n,
                "angle_v_rad": [0.0] * n,
                "rate_h_rad_s": [0.0] * n,
                "rate_v_rad_s": [0.0] * n,
                "status": [1] * n,
            },
        )
    poses = LogPoses(path, ROBOT)
    pos, _ = poses.at(0.0)
    assert poses.kind == "/joint_feedback" and pos.shape == (11, 3)
    # straight, lying on the ground along world x from the origin
    np.testing.assert_allclose(pos[:, 0], np.arange(11) * ROBOT.link_length_m, atol=1e-9)
    np.testing.assert_allclose(pos[:, 2], ROBOT.link_radius_m, atol=1e-9)


def test_log_without_poses_is_refused(tmp_path):
    path = tmp_path / "run.mcap"
    with McapRecorder(path) as rec:
        angles = {k: [0.0] for k in ("angle_h_rad", "angle_v_rad", "rate_h_rad_s", "rate_v_rad_s")}
        rec.record(REFERENCES_CHANNEL, 0, {"t_s": 0.0, **angles})
    with pytest.raises(ConfigError, match="no /sim/link_poses or /joint_feedback"):
        LogPoses(path, ROBOT)
