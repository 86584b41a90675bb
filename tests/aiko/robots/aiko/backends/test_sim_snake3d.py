"""The ``snake3d`` model of the ``sim`` backend driven by the control loop."""

import math

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.run import RunOptions, run_experiment

SIDEWINDING = "experiments/sidewinding.toml"


def run(duration_s: float, **overrides):
    experiment = load_experiment(SIDEWINDING, overrides)
    recorder = MemoryRecorder()
    _, summary = run_experiment(experiment, recorder, RunOptions(backend="sim", duration_s=duration_s))
    return summary, recorder


@pytest.fixture(scope="module")
def held_run():
    return run(1.0)


def test_run_logs_poses_contacts_and_a_20_hz_tracked_point(held_run):
    summary, recorder = held_run
    assert summary["sim_steps"] == 4000  # physics steps at the paper's 0.25 ms
    assert summary["newton_iterations_mean"] >= 1
    mocap = recorder.channels["/mocap/tracked_point"]
    assert len(mocap) == 21  # 0, 0.05, …, 1.0 s
    times = [payload["t_s"] for _, payload in mocap]
    np.testing.assert_allclose(np.diff(times), 0.05, atol=1e-9)
    # the summary's tracked point is link 6's centre, the same point the mocap stream logs
    np.testing.assert_allclose(summary["tracked_point_end_m"], mocap[-1][1]["position_m"], atol=1e-12)
    np.testing.assert_allclose(summary["tracked_point_start_m"][:2], [0.0, 0.0], atol=1e-12)
    poses = recorder.channels["/sim/link_poses"]
    assert len(poses) == 21
    positions = np.array(poses[-1][1]["position_m"])
    np.testing.assert_allclose(positions[5], summary["tracked_point_end_m"], atol=1e-12)
    # the robot stands on the ground: on average the normal forces carry its weight (within the 25 % dynamics of a
    # gait). One step's forces swing from 0 to several weights as links land and lift (measured: 10 % of the steps
    # of this run above twice the weight), so the logged samples are averaged, not read at one instant.
    weight = 11 * 0.682 * 9.81
    normal = [sum(payload["normal_n"]) for _, payload in recorder.channels["/sim/contacts"][1:]]
    assert np.mean(normal) == pytest.approx(weight, rel=0.25)
    assert len(recorder.channels["/references"]) == 11  # 10 Hz, held in between


def test_joint_feedback_follows_the_references(held_run):
    _, recorder = held_run
    refs = recorder.channels["/references"][-1][1]
    feedback = recorder.channels["/joint_feedback"][-1][1]
    # K_hp = 40 N m/rad tracks within a few degrees; K_vp = 800 N m/rad within a fraction of a degree
    assert np.abs(np.subtract(feedback["angle_h_rad"], refs["angle_h_rad"])).max() < math.radians(10)
    assert np.abs(np.subtract(feedback["angle_v_rad"], refs["angle_v_rad"])).max() < math.radians(3)
    assert "effort_h" in feedback


def test_continuous_references_sample_the_gait_every_step(held_run):
    held, _ = held_run
    continuous, _ = run(1.0, **{"sim.reference_hold": False})
    assert continuous["reference_hold"] is False
    assert continuous["sim_steps"] == held["sim_steps"]
    # same gait, different sampling: close but not identical motion of link 6
    gap = np.linalg.norm(np.subtract(continuous["tracked_point_end_m"], held["tracked_point_end_m"]))
    assert 0.0 < gap < 0.05


@pytest.mark.parametrize(
    ("override", "message"),
    [({"sim.mu_longitudinal": 0.0}, "sim.mu_longitudinal"), ({"sim.dt_s": -1e-3}, "sim.dt_s"),
     ({"sim.mu_x": 0.3}, "sim.mu_x: unknown key"), ({"sim.reference_hold": 1}, "sim.reference_hold"),
     ({"sim.max_step_halvings": -1}, "sim.max_step_halvings")],
)  # fmt: skip
def test_bad_sim_settings_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(SIDEWINDING, override)


def test_obstacles_from_the_sim_table():
    summary, recorder = run(0.3, **{"sim.obstacles": [[0.0, 0.2, 0.05], [0.3, -0.2, 0.05]], "sim.mu_obstacle": 0.3})
    contacts = recorder.channels["/sim/contacts"][-1][1]
    posts = contacts["obstacle_forces"]  # per link, a record of each obstacle's forces (no arrays of arrays)
    assert len(posts) == 11 and all(np.shape(link["normal_n"]) == (2,) for link in posts)
    with pytest.raises(ConfigError, match=r"sim.obstacles\[0\]"):
        load_experiment(SIDEWINDING, {"sim.obstacles": [[0.0, 0.2]]})
