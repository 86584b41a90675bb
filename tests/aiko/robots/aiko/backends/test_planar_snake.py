"""The planar-snake sim backend through the ordinary run loop, and its experiment files."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.plugins import backend_names
from aiko.robots.aiko.run import RunOptions, run_experiment
from sim.planar_snake.obstacles import ObstacleField, check_assumption_3

backend_names()  # registers the [sim] section (imported lazily on main)


@pytest.fixture(params=["structured", "unstructured"])
def experiment(request, experiments_dir):
    return load_experiment(experiments_dir / f"obstacle_aided_{request.param}.toml", {"run.duration_s": 1.5})


def test_runs_through_the_loop_with_contacts_checked(experiment):
    recorder = MemoryRecorder()
    _, summary = run_experiment(experiment, recorder, RunOptions(backend="sim"))
    assert summary["sim_time_s"] == pytest.approx(1.5)
    assert summary["sim_steps"] == 750  # 1.5 s at 2 ms
    # the checks: no penetration beyond 1e-6 m, λ >= 0, complementarity < 1e-8, P-matrix every LCP
    assert summary["max_penetration_m"] < 1e-6
    assert summary["flow_lcp_solves"] > 0 and summary["min_lambda"] >= 0.0
    assert summary["max_complementarity_residual"] < 1e-8
    assert summary["p_matrix_checks"] == summary["flow_lcp_solves"] and summary["p_matrix_failures"] == 0
    if summary["impacts"]:
        assert summary["min_post_impact_normal_velocity_m_s"] >= -1e-12
    # the tracked point and the CM summary come from the simulated link poses
    assert summary["tracked_point_start_m"] is not None and len(summary["tracked_point_end_m"]) == 3
    assert summary["com_start_m"] == [0.0, 0.0]
    poses = recorder.channels["/sim/link_poses"]
    assert 29 <= len(poses) <= 31  # 20 Hz log, not every 2 ms step
    assert len(recorder.channels["/references"]) == 16
    kinds = [kind for _, kind, _ in recorder.events]
    assert "planar_snake_obstacles" in kinds


def test_unstructured_field_respects_assumption_3(experiments_dir):
    from aiko.core.config import Table
    from aiko.robots.aiko.backends.planar_snake import parse_obstacles

    exp = load_experiment(experiments_dir / "obstacle_aided_unstructured.toml")
    field, _ = parse_obstacles(Table(exp.tables["sim"]["obstacles"], "sim.obstacles"), 0.14)
    assert field.count == exp.tables["sim"]["obstacles"]["count"]
    assert check_assumption_3(field, 0.14) > 0.14


def test_assumption_3_violation_is_a_config_error(experiments_dir):
    # pegs 0.2 m apart with radius 0.05 m leave 0.1 m between edges, less than a link (0.14 m)
    with pytest.raises(ConfigError, match="Assumption 3"):
        load_experiment(experiments_dir / "obstacle_aided_structured.toml", {"sim.obstacles.spacing_x_m": 0.2})


def test_unknown_sim_key_names_itself(experiments_dir):
    with pytest.raises(ConfigError, match="sim.mu_groundd"):
        load_experiment(experiments_dir / "obstacle_aided_structured.toml", {"sim.mu_groundd": 0.3})


def test_three_d_robot_is_rejected(experiments_dir):
    from types import SimpleNamespace

    from aiko.core.config import Table
    from aiko.robots.aiko.backends.planar_snake import parse_sim_table
    from aiko.robots.aiko.description import load_robot

    aiko = SimpleNamespace(robot=load_robot(experiments_dir / "robots" / "aiko.toml"))
    with pytest.raises(ConfigError, match="yaw joints only"):
        parse_sim_table(Table({"model": "planar_snake"}, "sim"), aiko)


def test_field_helpers():
    f = ObstacleField(np.array([[0.0, 0.0]]), np.array([0.1]))
    assert check_assumption_3(f, 0.14) == np.inf


def test_cli_run_prints_the_json_summary(experiments_dir, tmp_path, monkeypatch, capsys):
    """`aiko run experiments/obstacle_aided_structured.toml --backend sim --json` (in-process). The MCAP recorder
    (aiko.log) is another issue's; a memory recorder stands in for it when it is not installed."""
    import json
    import sys
    import types

    from aiko.cli import main

    try:
        import aiko.log  # noqa: F401
    except ModuleNotFoundError:
        from aiko.core.recording import MemoryRecorder

        class StandIn(MemoryRecorder):
            def __init__(self, *args, **kwargs):
                super().__init__()

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        monkeypatch.setitem(sys.modules, "aiko.log", types.SimpleNamespace(McapRecorder=StandIn))
    argv = [str(experiments_dir / "obstacle_aided_structured.toml"), "--backend", "sim", "--json"]
    status = main(["run", *argv, "--duration", "0.5", "--out", str(tmp_path / "run.mcap")])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["backend"] == "sim" and summary["sim_model"] == "PlanarSnakeBackend"
    assert summary["sim_time_s"] == pytest.approx(0.5) and summary["com_start_m"] == [0.0, 0.0]
    for key in ("tracked_point_start_m", "tracked_point_end_m", "duration_s", "sim_steps", "log_path"):
        assert key in summary


@pytest.mark.slow
def test_structured_field_propels_the_snake_forward(experiments_dir):
    """Regression of the locomotion itself: 6 s in the structured field advance the CM well along +x
    (0.71 m at the time of writing; the bar here is 0.3 m, i.e. 5 cm/s)."""
    exp = load_experiment(experiments_dir / "obstacle_aided_structured.toml", {"run.duration_s": 6.0})
    _, summary = run_experiment(exp, MemoryRecorder(), RunOptions(backend="sim"))
    assert summary["distance_x_m"] > 0.3
    assert summary["p_matrix_failures"] == 0 and summary["max_penetration_m"] < 1e-6


def test_the_tracked_point_of_the_planar_model_is_its_centre_of_mass(experiment):
    """Paper 001 reports the centre of mass's progress, so the run summary tracks it (not link 6)."""
    _, summary = run_experiment(experiment, MemoryRecorder(), RunOptions(backend="sim", duration_s=0.5))
    assert summary["tracked_point"] == "centre_of_mass"
    assert summary["tracked_point_start_m"] == [*summary["com_start_m"], 0.0]
    assert summary["tracked_point_end_m"] == [*summary["com_end_m"], 0.0]
    assert summary["tracked_point_end_m"] != summary["tracked_point_start_m"]
