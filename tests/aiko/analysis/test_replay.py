"""Replay re-drives a simulator with the logged references: same times, same values, same start posture, so a
replay of a simulated run reproduces its trajectory."""

from pathlib import Path

import numpy as np
import pytest

import aiko.robots.aiko.mocap  # noqa: F401  (registers the [mocap] section)
from aiko.analysis.replay import LoggedReferences, replay
from aiko.log import LogReader
from aiko.robots.aiko.experiment import LoggedExperimentError, experiment_from_log, load_experiment
from aiko.robots.aiko.run import RunOptions, record_run
from tests.aiko.robots.aiko.chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[3]
EXPERIMENT = REPO / "experiments" / "sidewinding.toml"
OVERRIDES = {"run.duration_s": 4.0, "mocap.source": "simulated", "mocap.noise_std_m": 0.0}


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "original.mcap"
    experiment = load_experiment(EXPERIMENT, OVERRIDES)
    summary = record_run(experiment, path, RunOptions(backend="kinematic"), backend=ChainBackend())
    return path, summary


def test_log_holds_what_replay_needs(original):
    path, summary = original
    log = LogReader(path)
    meta = log.run_metadata
    assert "experiment_toml" in meta and "robot_toml" in meta and len(meta["initial_posture"]["angle_h_rad"]) == 10
    assert log.metadata["aiko.summary"]["mocap_samples"] == 81  # 20 Hz over 4 s, both ends
    assert log.channel("/mocap")["position_m"].shape == (81, 1, 3)
    assert summary["reference_updates"] == 41


def test_replay_reproduces_trajectory_and_references(original, tmp_path):
    path, _ = original
    out = tmp_path / "replay.mcap"
    replay(path, out, backend_name="kinematic", backend=ChainBackend())
    a, b = LogReader(path), LogReader(out)
    ra, rb = a.channel("/references"), b.channel("/references")
    np.testing.assert_array_equal(ra["t_s"], rb["t_s"])
    np.testing.assert_array_equal(ra["angle_h_rad"], rb["angle_h_rad"])  # bit-identical references
    np.testing.assert_array_equal(ra["angle_v_rad"], rb["angle_v_rad"])
    pa = a.channel("/mocap")["position_m"][:, 0]
    pb = b.channel("/mocap")["position_m"][:, 0]
    rms = np.sqrt(np.mean(np.sum((pa - pb) ** 2, axis=1)))
    assert rms < 1e-3 and np.ptp(pa[:, 0]) > 0.01  # reproduces within 1 mm and the robot did move
    assert rms < 1e-12  # the chain plant is deterministic: in fact exactly
    assert b.run_metadata["replay_of"] == str(path)
    assert b.run_metadata["replay_initial_posture_source"] == "commanded"


def test_replay_with_override_changes_the_run(original, tmp_path):
    path, _ = original
    out = tmp_path / "slow.mcap"
    replay(path, out, {"backend.kinematic.time_constant_s": 0.5}, backend_name="kinematic", backend=ChainBackend())
    pa = LogReader(path).channel("/mocap")["position_m"][:, 0]
    pb = LogReader(out).channel("/mocap")["position_m"][:, 0]
    assert np.sqrt(np.mean(np.sum((pa - pb) ** 2, axis=1))) > 1e-3
    assert LogReader(out).run_metadata["overrides"]["backend.kinematic.time_constant_s"] == 0.5


def test_zero_order_hold_between_logged_references():
    h = np.array([[0.1, 0.2], [0.3, 0.4]])
    initial = LoggedReferences(np.array([0.0]), h[:1], h[:1], h[:1], h[:1], None).references(0.0)
    gait = LoggedReferences(np.array([0.0, 0.1]), h, -h, 0 * h, 0 * h, initial)
    np.testing.assert_array_equal(gait.references(0.05).angle_h_rad, [0.1, 0.2])
    np.testing.assert_array_equal(gait.references(0.1).angle_h_rad, [0.3, 0.4])
    np.testing.assert_array_equal(gait.references(0.1 - 1e-12).angle_h_rad, [0.3, 0.4])  # k·T round-off
    np.testing.assert_array_equal(gait.references(7.0).angle_v_rad, [-0.3, -0.4])


def test_replay_errors_are_specific(tmp_path, original):
    from aiko.log import McapRecorder
    from aiko.robots.aiko.joints import REFERENCES_CHANNEL

    bare = tmp_path / "bare.mcap"
    with McapRecorder(bare) as rec:
        rec.record(REFERENCES_CHANNEL, 0, {"t_s": 0.0, "angle_h_rad": [0.0], "angle_v_rad": [0.0],
                                           "rate_h_rad_s": [0.0], "rate_v_rad_s": [0.0]})  # fmt: skip
    with pytest.raises(LoggedExperimentError, match="no experiment in its metadata"):
        experiment_from_log(LogReader(bare))
    path, _ = original
    with pytest.raises(Exception, match="must differ"):
        replay(path, path)


def test_a_replay_log_can_itself_be_replayed(original, tmp_path):
    """The replay log carries the original robot description (not the experiment file's text as the robot), so
    a replay of a replay rebuilds the same experiment and reproduces the same references."""
    path, _ = original
    first, second = tmp_path / "replay1.mcap", tmp_path / "replay2.mcap"
    replay(path, first, backend_name="kinematic", backend=ChainBackend())
    assert LogReader(first).run_metadata["robot_toml"] == LogReader(path).run_metadata["robot_toml"]
    replay(first, second, backend_name="kinematic", backend=ChainBackend())
    np.testing.assert_array_equal(
        LogReader(path).channel("/references")["angle_h_rad"], LogReader(second).channel("/references")["angle_h_rad"]
    )
