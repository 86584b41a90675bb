"""``aiko sweep`` end to end on a local Dask cluster (one worker process): failed runs are rows, ``--resume`` runs
only what is missing, bad input is one line and exit 2, and the other commands never import Dask."""

import io
import json
import subprocess
import sys

import pyarrow.parquet as pq

from aiko.cli import main
from aiko.log import LogReader
from aiko.sweep.execute import SweepProgress
from aiko.sweep.results import ResultStore
from aiko.sweep.spec import expand, load_spec
from aiko.sweep.worker import RunTask, run_one
from tests.conftest import REPO


def test_other_commands_do_not_import_dask_or_pyarrow():
    code = (
        "import sys; from aiko.cli import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'pyarrow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_bad_spec_is_one_line_and_exit_2(write_spec, capsys):
    path = write_spec('[parameters]\n"gait.amplitude_h_deg" = { low = 1.0, high = 2.0 }\n')
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a count" in err and "Traceback" not in err
    assert main(["sweep", str(path.parent / "missing.toml")]) == 2
    assert "sweep file not found" in capsys.readouterr().err
    assert main(["sweep", str(write_spec('[parameters]\n"gait.amplitude_h_deg" = [20.0]\n')), "--workers", "0"]) == 2


def test_list_metrics_and_dry_run(write_spec, capsys):
    assert main(["sweep", "--list-metrics"]) == 0
    listed = capsys.readouterr().out
    assert "distance_m" in listed and "cost_of_transport" in listed and "newton_iterations_mean" in listed
    path = write_spec('[parameters]\n"gait.amplitude_h_deg" = [20.0, 30.0]\n"gait.offset_h_deg" = [0.0, 5.0]\n')
    assert main(["sweep", str(path), "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 4 and out["backend"] == "kinematic"
    assert [p["gait.offset_h_deg"] for p in out["points"]] == [0.0, 5.0, 0.0, 5.0]


def test_a_sweep_with_a_failing_run_writes_both_rows_logs_and_plots(write_spec, tmp_path, capsys):
    path = write_spec(
        'backend = "sim"\nmetrics = ["distance_m", "newton_iterations_mean"]\n'
        '[set]\n"run.duration_s" = 0.1\n"sim.max_step_halvings" = 0\n'
        '[parameters]\n"sim.max_iterations" = [1, 400]\n'
    )
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--json", "--keep-logs"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {k: summary[k] for k in ("runs", "completed", "failed", "lost", "missing")} == {
        "runs": 2, "completed": 1, "failed": 1, "lost": 0, "missing": 0
    }  # fmt: skip
    table = pq.read_table(summary["results_path"]).to_pylist()
    failed = [r for r in table if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["sim.max_iterations"] == 1 and "did not converge" in failed[0]["error"]
    ok = [r for r in table if r["status"] == "ok"][0]
    assert ok["newton_iterations_mean"] > 0 and ok["error"] is None and ok["wall_time_s"] > 0
    assert ok["log_path"].startswith(str((out / "logs").resolve())) and LogReader(ok["log_path"]).has("/references")
    assert {p.split("/")[-1] for p in summary["plots"]} == {"distance_m.png", "newton_iterations_mean.png"}


def test_runs_with_refused_settings_are_invalid_rows_and_the_rest_run(write_spec, tmp_path, capsys):
    """A range that crosses the joint limit: the refused point is a row (status invalid, its one-line error) that is
    never submitted, the others run; --strict stops at it instead (exit 2), as does a sweep with no valid run."""
    body = (
        'backend = "kinematic"\nmetrics = ["tracking_rms_h_deg"]\n[set]\n"run.duration_s" = 0.2\n'
        '[parameters]\n"gait.amplitude_h_deg" = [20.0, 80.0, 30.0]\n'
    )
    path = write_spec(body)
    assert main(["sweep", str(path), "--strict", "--out", str(tmp_path / "strict")]) == 2
    assert "run 1 (gait.amplitude_h_deg=80.0)" in capsys.readouterr().err
    assert main(["sweep", str(path), "--dry-run", "--json"]) == 0
    captured = capsys.readouterr()
    listing = json.loads(captured.out)
    assert listing["invalid"] == 1 and "exceeds the horizontal joint limit" in listing["points"][1]["invalid"]
    assert "1 of 3 runs have settings the experiment refuses" in captured.err
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--json", "--no-plots"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {k: summary[k] for k in ("runs", "completed", "failed", "invalid", "missing", "ran")} == {
        "runs": 3, "completed": 2, "failed": 0, "invalid": 1, "missing": 0, "ran": 2
    }  # fmt: skip
    rows = {r["gait.amplitude_h_deg"]: r for r in pq.read_table(summary["results_path"]).to_pylist()}
    assert rows[80.0]["status"] == "invalid" and "exceeds the horizontal joint limit" in rows[80.0]["error"]
    assert rows[80.0]["wall_time_s"] is None and rows[20.0]["status"] == rows[30.0]["status"] == "ok"
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--resume", "--json", "--no-plots"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["ran"] == 0 and again["skipped"] == 3 and again["invalid"] == 1  # an invalid row is final
    none_valid = write_spec(body.replace("[20.0, 80.0, 30.0]", "[70.0, 80.0]"), "none.toml")
    assert main(["sweep", str(none_valid), "--out", str(tmp_path / "none")]) == 2
    assert "run 0 (gait.amplitude_h_deg=70.0)" in capsys.readouterr().err


def test_resume_runs_only_what_is_missing_and_refuses_to_mix_without_it(write_spec, tmp_path, capsys):
    body = (
        'backend = "kinematic"\nmetrics = ["tracking_rms_h_deg"]\n[set]\n"run.duration_s" = 0.3\n'
        '[parameters]\n"gait.amplitude_h_deg" = [20.0, 25.0, 30.0, 35.0]\n'
    )
    path = write_spec(body)
    spec = load_spec(path)
    runs = expand(spec)
    out = tmp_path / "out"
    store = ResultStore(out, {"gait.amplitude_h_deg": [r.params["gait.amplitude_h_deg"] for r in runs]}, spec.metrics)
    for run in runs[:2]:  # a sweep interrupted after two runs
        row = run_one(RunTask(run.run_id, run.index, str(spec.experiment_path), "kinematic",
                              {**spec.fixed, **run.params}, run.seed, spec.metrics))  # fmt: skip
        store.add({**row, "index": run.index, "seed": run.seed, "params": run.params})
    store.flush()
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--json"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--json", "--resume", "--no-plots"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["skipped"], summary["ran"], summary["completed"], summary["missing"]) == (2, 2, 4, 0)
    ids = pq.read_table(summary["results_path"]).column("run_id").to_pylist()
    assert ids == [r.run_id for r in runs]
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--json", "--resume", "--no-plots"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (again["skipped"], again["ran"], again["workers"]) == (4, 0, 0)  # nothing to do: no cluster started
    other = write_spec(body.replace('"kinematic"', '"sim"'), "other.toml")
    assert main(["sweep", str(other), "--out", str(out), "--resume", "--dry-run"]) == 0  # a dry run writes nothing
    capsys.readouterr()
    assert main(["sweep", str(other), "--out", str(out), "--resume"]) == 2
    assert "holds a sweep of backend kinematic; this one is sim" in capsys.readouterr().err


def test_progress_is_a_periodic_line_off_a_terminal():
    stream = io.StringIO()
    progress = SweepProgress(10, stream, interval_s=1e9)
    progress.update({"ok": 4, "failed": 1})  # within the interval: no line
    progress.finish({"ok": 7, "failed": 1, "lost": 2})  # the last state is always said
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("sweep: 10 / 10 runs (100 %), 1 failed, 2 lost")
    assert "runs/s" in lines[0] and "ETA" in lines[0] and lines[1].startswith("sweep: done in")


def test_the_example_sweep_file_is_valid(capsys):
    example = REPO / "experiments/sweeps/sidewinding_amplitude_phase.toml"
    assert main(["sweep", str(example), "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 15 and out["backend"] == "sim"


def test_the_worker_probe_reports_an_experiment_it_cannot_read(tmp_path):
    from aiko.sweep.connect import probe_worker as _probe

    assert _probe(str(tmp_path / "elsewhere.toml"))["experiment_readable"] is False
    assert _probe(str(REPO / "experiments/sidewinding.toml"))["experiment_readable"] is True
