"""The unit of work (a failed run is a row, never an exception), the metrics, and the Parquet store: batches on disk
as they finish, one row per run id whatever arrives twice."""

import pyarrow.parquet as pq
import pytest

from aiko.sweep.metrics import RunData, compute_metrics, metric_names
from aiko.sweep.results import ResultStore, compact, final_run_ids, read_table
from aiko.sweep.worker import RunTask, run_one
from tests.conftest import EXPERIMENTS

SIDEWINDING = str(EXPERIMENTS / "sidewinding.toml")


def test_a_run_that_does_not_converge_is_a_failed_row_with_the_reason():
    task = RunTask(
        "r1",
        0,
        SIDEWINDING,
        "sim",
        {"run.duration_s": 0.1, "sim.max_iterations": 1, "sim.max_step_halvings": 0},
        seed=1,
        metrics=("distance_m", "speed_m_s"),
    )
    row = run_one(task)
    assert row["status"] == "failed"
    assert "did not converge" in row["error"] and row["error"].startswith("AikoError:")
    assert row["metrics"] == {"distance_m": None, "speed_m_s": None}
    assert row["wall_time_s"] >= 0 and row["worker"]


def test_a_bad_setting_reaching_a_worker_is_a_failed_row_too():
    row = run_one(RunTask("r2", 0, SIDEWINDING, "kinematic", {"gait.amplitude_hh_deg": 1.0}, 1, ("distance_m",)))
    assert row["status"] == "failed" and "unknown key" in row["error"]


def test_a_short_sim_run_reports_motion_cost_tracking_and_solver_metrics():
    row = run_one(RunTask("r3", 0, SIDEWINDING, "sim", {"run.duration_s": 0.3}, 5, tuple(metric_names())))
    assert row["status"] == "ok", row["error"]
    m = row["metrics"]
    assert m["distance_m"] is not None and m["distance_m"] >= 0
    assert m["speed_m_s"] == pytest.approx(m["distance_m"] / 0.3)
    assert m["sim_steps"] == pytest.approx(0.3 / 2.5e-4)
    assert m["joint_work_j"] > 0 and m["tracking_rms_h_deg"] >= 0
    assert m["yaw_change_deg"] is not None and m["newton_iterations_mean"] > 0


def test_the_kinematic_backend_has_no_tracked_point_so_motion_metrics_are_empty():
    names = ("distance_m", "tracking_rms_v_deg")
    row = run_one(RunTask("r4", 0, SIDEWINDING, "kinematic", {"run.duration_s": 0.5}, 1, names))
    assert row["status"] == "ok"
    assert row["metrics"]["distance_m"] is None and row["metrics"]["tracking_rms_v_deg"] >= 0


def test_metrics_read_a_kept_log_exactly_as_the_run_in_memory(tmp_path):
    from aiko.log import LogReader

    log = tmp_path / "run.mcap"
    names = ("distance_m", "heading_deg", "joint_work_j", "tracking_rms_h_deg", "yaw_change_deg")
    row = run_one(RunTask("r5", 0, SIDEWINDING, "sim", {"run.duration_s": 0.2}, 1, names, str(log)))
    assert row["status"] == "ok" and row["log_path"] == str(log)
    from aiko.robots.aiko.experiment import load_experiment

    reader = LogReader(log)
    summary = reader.metadata["aiko.summary"]
    again = compute_metrics(names, RunData(load_experiment(SIDEWINDING, {"run.duration_s": 0.2}), summary, reader))
    assert again == pytest.approx(row["metrics"])


def _row(run_id, index, status="ok", value=1.0):
    return {
        "run_id": run_id,
        "index": index,
        "params": {"a": float(index)},
        "seed": index,
        "status": status,
        "error": None if status == "ok" else "X: y",
        "wall_time_s": 0.1,
        "cpu_time_s": 0.1,
        "worker": "w",
        "log_path": None,
        "metrics": {"distance_m": value},
    }


def test_rows_reach_disk_in_batches_and_a_duplicate_run_is_dropped(tmp_path):
    store = ResultStore(tmp_path, {"a": [0.0, 1.0, 2.0]}, ["distance_m"], batch_rows=2, batch_interval_s=1e9)
    assert store.add(_row("x0", 0))
    assert read_table(tmp_path) is None  # one row: still in the batch
    assert store.add(_row("x1", 1, "failed", None))
    assert read_table(tmp_path).num_rows == 2  # the batch is a part file now
    assert not store.add(_row("x0", 0, value=9.0))  # Dask reran it after a worker died: already written
    store.add(_row("x2", 2, "lost"))
    path = store.compact()
    table = pq.read_table(path)
    assert table.column("run_id").to_pylist() == ["x0", "x1", "x2"]
    assert table.column("distance_m").to_pylist() == [1.0, None, 1.0]
    assert table.column("status").to_pylist() == ["ok", "failed", "lost"]
    assert not list((tmp_path / "parts").iterdir())
    assert final_run_ids(tmp_path) == {"x0", "x1"}  # lost is not final: --resume runs it again


def test_reading_keeps_one_row_per_run_a_final_row_over_a_lost_one(tmp_path):
    first = ResultStore(tmp_path, {"a": [0.0, 1.0]}, ["distance_m"], batch_rows=1)
    first.add(_row("x0", 0, "lost"))
    first.add(_row("x1", 1))
    compact(tmp_path)
    second = ResultStore(tmp_path, {"a": [0.0, 1.0]}, ["distance_m"], batch_rows=1)  # a resumed sweep
    assert second.done == {"x1"}
    second.add(_row("x0", 0, value=2.0))
    table = read_table(tmp_path)  # results.parquet and a part: one table
    assert table.column("run_id").to_pylist() == ["x0", "x1"]
    assert table.column("status").to_pylist() == ["ok", "ok"]
    assert table.column("distance_m").to_pylist() == [2.0, 1.0]


def test_hil_with_simulated_motion_capture_and_the_planar_snake_report_motion():
    names = ("distance_m", "yaw_change_deg", "tracking_rms_h_deg")
    hil = run_one(RunTask("h", 0, str(EXPERIMENTS / "sidewinding_hil.toml"), "hil", {"run.duration_s": 0.5}, 1, names))
    assert hil["status"] == "ok" and hil["error"] is None, hil["error"]  # /mocap payloads hold numpy arrays
    assert all(hil["metrics"][n] is not None for n in names)
    planar = str(EXPERIMENTS / "obstacle_aided_structured.toml")
    row = run_one(RunTask("p", 0, planar, "sim", {"run.duration_s": 0.3}, 1, names))
    assert row["status"] == "ok" and row["error"] is None, row["error"]
    assert row["metrics"]["distance_m"] > 0 and row["metrics"]["yaw_change_deg"] is not None  # from the summary


def test_a_metric_that_raises_leaves_the_run_ok_with_the_reason():
    from aiko.sweep.metrics import _METRICS, register_metric

    def broken(run):
        raise KeyError("no such field")

    register_metric("broken_for_test", broken, "raises")
    try:
        row = run_one(RunTask("b", 0, SIDEWINDING, "kinematic", {"run.duration_s": 0.2}, 1, ("broken_for_test",)))
    finally:
        del _METRICS["broken_for_test"]
    assert row["status"] == "ok" and row["metrics"] == {"broken_for_test": None}
    assert row["error"] == "metric broken_for_test: KeyError: 'no such field'"
