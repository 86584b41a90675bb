"""``aiko optimize`` on the kinematic backend (cheap, deterministic): CMA-ES improves the metric over the start, every
evaluation is a row (a failing one too), the written experiment loads and runs as is, ``--resume`` replays without
running, and bad files are one line."""

import json

import pyarrow.parquet as pq
import pytest

from aiko.cli import main
from aiko.log import LogReader
from aiko.robots.aiko.experiment import load_experiment
from aiko.sweep.optimize_spec import load_optimize_spec

pytest.importorskip("cma")

SPEC = """backend = "kinematic"
metric = "tracking_rms_h_deg"
goal = "minimize"
seed = 1
metrics = ["tracking_rms_v_deg"]
[set]
"run.duration_s" = 1.5
[parameters]
"gait.amplitude_h_deg" = {{}}
"gait.frequency_h_deg_s" = {{ low = 20.0, high = {high} }}
[cmaes]
generations = 3
population = 4
"""


def _summary(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bounds_default_to_the_joint_limits_and_starts_to_the_preset(write_spec):
    spec = load_optimize_spec(write_spec(SPEC.format(high=400.0)))
    amplitude, frequency = spec.parameters
    assert (amplitude.low, amplitude.high, amplitude.start) == (0.0, 45.0, 30.0)  # aiko.toml: limit_h_deg = 45
    assert (frequency.low, frequency.high, frequency.start) == (20.0, 400.0, 80.0)  # the sidewinding preset
    assert spec.metrics == ("tracking_rms_h_deg", "tracking_rms_v_deg") and spec.population == 4


def test_cma_es_improves_on_the_start_and_writes_a_runnable_experiment(write_spec, tmp_path, capsys):
    path = write_spec(SPEC.format(high=400.0), "opt.toml")
    out = tmp_path / "out"
    args = ["optimize", str(path), "--workers", "1", "--out", str(out), "--json"]
    assert main(args) == 0
    summary = _summary(capsys)
    assert (summary["evaluations"], summary["ran"], summary["completed"]) == (13, 13, 13)
    assert summary["best"]["value"] < 0.6 * summary["start"]["value"]  # a smaller, slower wave tracks better
    assert summary["start"]["params"] == {"gait.amplitude_h_deg": 30.0, "gait.frequency_h_deg_s": 80.0}
    bests = [h["best_so_far"] for h in summary["history"]]
    assert bests == sorted(bests, reverse=True) and bests[-1] < bests[0]
    table = pq.read_table(summary["results_path"])
    assert table.num_rows == 13 and sorted(set(table.column("generation").to_pylist())) == [0, 1, 2, 3]
    assert set(table.column_names) >= {"candidate", "gait.amplitude_h_deg", "tracking_rms_v_deg", "status"}
    written = load_experiment(summary["experiment_path"])
    best = summary["best"]["params"]
    assert written.default_backend == "kinematic" and written.run.duration_s == 1.5
    assert written.gait.params.amplitude_h_rad == pytest.approx(best["gait.amplitude_h_deg"] * 3.141592653589793 / 180)
    log = tmp_path / "best.mcap"
    assert main(["run", summary["experiment_path"], "--out", str(log), "--json"]) == 0
    capsys.readouterr()
    assert LogReader(str(log)).has("/references")

    assert main([*args, "--resume"]) == 0  # replayed from the table: the same points, nothing run
    again = _summary(capsys)
    assert (again["ran"], again["reused"]) == (0, 13) and again["best"] == summary["best"]
    assert main(args) == 2 and "--resume" in capsys.readouterr().err


def test_a_failing_evaluation_is_a_row_not_a_crash(write_spec, tmp_path, capsys):
    # frequencies up to 4000 deg/s: most candidates ask the joints for more than their 180 deg/s and are refused
    path = write_spec(SPEC.format(high=4000.0).replace("generations = 3", "generations = 2"), "opt.toml")
    assert main(["optimize", str(path), "--workers", "1", "--out", str(tmp_path / "out"), "--json"]) == 0
    summary = _summary(capsys)
    assert summary["failed"] > 0 and summary["completed"] + summary["failed"] == summary["evaluations"] == 9
    rows = pq.read_table(summary["results_path"]).to_pylist()
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == summary["failed"] and all("deg/s" in r["error"] for r in failed)
    assert all(r["tracking_rms_h_deg"] is None for r in failed)
    assert summary["best"]["value"] <= summary["start"]["value"]


def test_bad_files_are_one_line(write_spec, capsys):
    no_bounds = (
        SPEC.format(high=400.0)
        .replace("gait.frequency_h_deg_s", "gait.phase_step_h_deg")
        .replace("{ low = 20.0, high = 400.0 }", "{ start = -40.0 }")
    )
    path = write_spec(no_bounds)
    assert main(["optimize", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give its bounds" in err
    assert main(["optimize", str(write_spec(SPEC.format(high=400.0).replace("tracking_rms_h_deg", "nope")))]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["optimize", str(write_spec(SPEC.format(high=10.0)))]) == 2
    assert "must be above low" in capsys.readouterr().err


def test_the_example_optimisation_files_are_valid():
    from tests.conftest import REPO

    planar = load_optimize_spec(REPO / "experiments/sweeps/obstacle_aided_optimize.toml")
    assert [p.start for p in planar.parameters] == [0.2, 15.0, 1.0]  # the experiment's own values
    assert planar.metric == "displacement_x_m" and planar.backend == "sim"
    snake = load_optimize_spec(REPO / "experiments/sweeps/sidewinding_speed_optimize.toml")
    assert [p.start for p in snake.parameters] == [30.0, 10.0, -50.0, -50.0]  # the paper's preset
    assert load_experiment(REPO / "experiments/sidewinding_speed_optimized.toml").default_backend == "sim"
