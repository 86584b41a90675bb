import time
from types import SimpleNamespace

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.log.reader import read_log
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.bench_run import COMMAND, OBSERVATION, record_bench_run
from aiko.robots.rod_bench.compare import compare_logs, error_percent
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.replay import replay_bench_log
from aiko.robots.rod_bench.settings import UR3Settings
from sim.cosserat.scenario import simulate

from .bench_files import write_experiment


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    experiment = load_bench_experiment(write_experiment(tmp))
    out = tmp / "sim.mcap"
    summary = record_bench_run(experiment, out, "sim")
    return experiment, out, summary


def test_sim_run_logs_the_bench_and_rod_channels_and_a_summary(sim_log):
    experiment, out, summary = sim_log
    reader = read_log(out)
    for topic in (COMMAND, OBSERVATION, "/sim/rod/centreline", "/sim/rod/contacts", "/sim/rod/base_wrench"):
        assert reader.has(topic), topic
    assert summary["backend"] == "sim" and summary["rod_steps"] == 40 and summary["deadlines_missed"] == 0
    assert reader.metadata["aiko.summary"]["rod_steps"] == 40
    assert "[base_motion]" in reader.run_metadata["experiment_toml"]
    obs = reader.channel(OBSERVATION)
    assert len(obs) == 11  # 50 Hz over 0.2 s, both ends
    # the base went down 2 mm along the file's trajectory
    assert obs["base_alpha"][-1][5] == pytest.approx(0.1909, abs=1e-9)
    cmd = reader.channel(COMMAND)
    assert np.allclose(np.asarray(cmd["target_t_s"]) - np.asarray(cmd["t_s"]), 0.01)
    # a simulated loop never stalls: the set-points are on the trajectory's time, never behind
    assert np.array_equal(cmd["trajectory_t_s"], cmd["target_t_s"]) and summary["set_point_lag_max_s"] == 0.0


def test_sim_backend_reproduces_the_simulator_on_the_same_file(sim_log):
    experiment, out, _ = sim_log
    ref = []
    simulate(experiment.scenario, lambda s: ref.append(s.state.q[6:].copy()), sample_every=4)
    logged = read_log(out).channel("/sim/rod/centreline")
    strain = np.asarray(logged["strain"]).reshape(len(logged), -1) - np.tile(
        experiment.scenario.model.xi_ref_nodes.ravel(), (len(logged), 1)
    )
    assert len(ref) == len(logged)
    assert np.max(np.abs(strain - np.asarray(ref))) < 1e-9


def test_replay_of_a_sim_log_reproduces_it(sim_log, tmp_path):
    _, out, _ = sim_log
    replay_out = tmp_path / "replay.mcap"
    summary = replay_bench_log(out, replay_out)
    assert summary["replay_of"] == str(out)
    result = compare_logs(replay_out, out)
    s = result.summary
    assert s["control_points"]
    assert s["strain_error_percent"] < 1e-6
    assert s["normal_force_error_percent"] < 1e-6
    assert s["tip_slide_error_percent"] < 1e-6
    assert read_log(replay_out).run_metadata["replay_of"] == str(out)


def test_compare_error_is_mean_abs_difference_over_the_reference_peak():
    t = np.linspace(0.0, 1.0, 101)
    b = np.sin(np.pi * t)  # peak 1
    a = b + 0.1
    assert error_percent(t, a, t, b) == pytest.approx(10.0)
    # A on another time base is interpolated onto B's samples
    t_a = np.linspace(0.0, 1.0, 1001)
    assert error_percent(t_a, 2 * np.sin(np.pi * t_a), t, b) == pytest.approx(100 * np.mean(np.abs(b)), rel=1e-4)


def test_mount_maps_rod_base_to_flange_and_back():
    mount = Mount.from_settings(UR3Settings())
    alpha = np.array([0.0, np.radians(70.0), 0.0, 0.01, -0.02, 0.19])
    pose = mount.flange_pose(alpha)
    assert np.allclose(mount.alpha(pose), alpha, atol=1e-12)
    # world origin at (-0.30, -0.11, 0) yawed 180 deg: world +x is the arm's -x
    assert np.allclose(pose[0:3], [-0.31, -0.09, 0.19])
    wrench = np.array([0.01, 0.02, 0.03, 1.0, 2.0, 3.0])
    flange = mount.flange_wrench(wrench)
    assert np.allclose(flange[0:3], [1.0, 2.0, -3.0])  # minus the force, yawed 180 deg
    assert np.allclose(mount.base_wrench(flange), wrench)


def test_trajectory_must_start_at_the_initial_pose(tmp_path):
    path = write_experiment(tmp_path)
    text = path.read_text().replace("base_position_m = [0.0, 0.0, 0.1929]", "base_position_m = [0.0, 0.0, 0.2]")
    path.write_text(text)
    with pytest.raises(ConfigError, match="base_motion at t = 0"):
        load_bench_experiment(path)


def test_the_plant_slide_at_a_marker_is_the_centreline_point_at_that_arc(sim_log):
    """At a node's arc the slide is that node's; at the rod's length it is the tip's (the default)."""
    from aiko.robots.rod_bench.compare import load_series

    experiment, out, _ = sim_log
    x_nodes = np.asarray(experiment.scenario.model.grid.x_nodes)
    cl = np.asarray(read_log(out).channel("/sim/rod/centreline")["centreline_m"], dtype=float)
    tip = load_series(out).tip_slide_m
    np.testing.assert_allclose(load_series(out, slide_arc_m=float(x_nodes[-1])).tip_slide_m, tip, atol=1e-15)
    k = len(x_nodes) // 2
    node_k = np.linalg.norm(cl[:, k, :2] - cl[0, k, :2], axis=1)
    np.testing.assert_allclose(load_series(out, slide_arc_m=float(x_nodes[k])).tip_slide_m, node_k, atol=1e-15)
    assert np.max(node_k) > 1e-4 and np.max(np.abs(node_k - tip)) > 1e-6  # the node moves, and not as the tip


def test_the_loop_wall_time_leaves_out_closing_the_backend(tmp_path, monkeypatch):
    """`realtime_factor` is the loop's: a backend that takes long to close (HIL: ur_rtde's disconnects and the
    emulator's exit, ~2.5 s) must not make a run that kept real time look slow. The bench's clock jumps 100 s while
    the backend closes, so the check does not depend on how fast the machine is."""
    from aiko.robots.rod_bench import bench_run
    from aiko.robots.rod_bench.backends.sim import BenchSimBackend

    jump = [0.0]
    monkeypatch.setattr(
        bench_run, "time", SimpleNamespace(perf_counter=lambda: time.perf_counter() + jump[0], time=time.time)
    )
    original_close = BenchSimBackend.close

    def slow_close(self):
        jump[0] += 100.0
        original_close(self)

    monkeypatch.setattr(BenchSimBackend, "close", slow_close)
    experiment = load_bench_experiment(write_experiment(tmp_path))
    summary = record_bench_run(experiment, tmp_path / "slow_close.mcap", "sim")
    assert summary["wall_time_s"] >= 100.0
    assert summary["loop_wall_time_s"] < 100.0
    assert summary["realtime_factor"] == pytest.approx(summary["duration_s"] / summary["loop_wall_time_s"])
