"""A run's time limit: the worker-side timer interrupts a Python loop; a row says ``timeout``; ``--resume`` leaves
timed-out runs alone unless ``--retry-timeouts``; a run stuck in C is written off by the client, whose worker is
restarted and runs the rest of the sweep.

Load-proof: a run that cannot end (80 000 s of simulated time, an hour asleep in C) always times out; a short run
gets a limit far above what it takes on a busy machine, a fresh worker's imports included (10 s for a 0.2 s run that
took 1.0 s cold here; at 0.5-1 s limits such runs timed out under load 5-9 and on CI), so it must say ok. Only lower
bounds on wall time are asserted (a limit is never hit early)."""

import json
import time

import pyarrow.parquet as pq
import pytest

from aiko.cli import main
from aiko.sweep.execute import SweepOptions, run_sweep
from aiko.sweep.spec import expand, load_spec, validate_runs
from aiko.sweep.timelimit import RunTimeout, running_runs, time_limit
from aiko.sweep.worker import RunTask, run_one
from tests.conftest import EXPERIMENTS


def test_time_limit_interrupts_a_python_loop_and_lists_the_run_meanwhile():
    seen = {}
    start = time.monotonic()
    with pytest.raises(RunTimeout), time_limit("busy", 0.2):
        while True:
            seen.update(running_runs())
    assert time.monotonic() - start >= 0.2  # never before the limit (how long after depends on the machine's load)
    assert "busy" in seen and running_runs() == {}


def test_a_run_within_its_limit_is_untouched_and_the_timer_is_gone_after_it():
    for _ in range(20):  # a machine that descheduled the body past the limit fired the timer, as it must: again
        try:
            with time_limit("quick", 0.3):
                total = sum(range(1000))
        except RunTimeout:
            continue
        break
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:  # a late timer would raise in here
        total += 1
    assert total > 499500 and running_runs() == {}
    with time_limit("unlimited", None):
        assert "unlimited" in running_runs()


def test_run_one_past_its_limit_is_a_timeout_row():
    metrics = ("distance_m", "tracking_rms_h_deg")
    task = RunTask("r", 0, str(EXPERIMENTS / "sidewinding.toml"), "kinematic", {"run.duration_s": 600.0}, 1, metrics)
    row = run_one(RunTask(**{**task.__dict__, "timeout_s": 0.5}))
    assert row["status"] == "timeout" and "run_timeout_s = 0.5 s" in row["error"]
    assert row["metrics"] == {"distance_m": None, "tracking_rms_h_deg": None} and row["wall_time_s"] >= 0.5
    # a limit no machine reaches in a 0.2 s kinematic run (an hour): the run is untouched
    quick = run_one(RunTask(**{**task.__dict__, "overrides": {"run.duration_s": 0.2}, "timeout_s": 3600.0}))
    assert quick["status"] == "ok" and quick["metrics"]["tracking_rms_h_deg"] > 0


def test_bad_limits_are_one_line(write_spec, capsys):
    path = write_spec('[limits]\nrun_timeout_s = 0.0\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n')
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert "run_timeout_s" in capsys.readouterr().err
    path = write_spec('[limits]\nrun_timeout = 3.0\n[parameters]\n"gait.amplitude_h_deg" = [20.0]\n')
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert "run_timeout" in capsys.readouterr().err
    path = write_spec('[parameters]\n"gait.amplitude_h_deg" = [20.0]\n')
    assert main(["sweep", str(path), "--retry-timeouts"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_a_timed_out_run_is_a_row_resume_skips_it_retry_runs_it(write_spec, tmp_path, capsys):
    path = write_spec(
        'backend = "kinematic"\nmetrics = ["tracking_rms_h_deg"]\n[limits]\nrun_timeout_s = 10.0\n'
        '[parameters]\n"run.duration_s" = [0.2, 80000.0]\n'
    )  # a fresh worker's imports come before the limit starts (they took > 10 s beside a loaded suite)
    out = tmp_path / "out"
    args = ["sweep", str(path), "--workers", "1", "--out", str(out), "--json", "--no-plots"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["completed"], summary["timeout"], summary["missing"]) == (1, 1, 0)
    rows = {r["run.duration_s"]: r for r in pq.read_table(summary["results_path"]).to_pylist()}
    assert rows[80000.0]["status"] == "timeout" and rows[0.2]["status"] == "ok"
    assert main([*args, "--resume"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (again["skipped"], again["ran"], again["timeout"]) == (2, 0, 1)
    assert main([*args, "--resume", "--retry-timeouts", "--run-timeout", "0.5"]) == 0
    retried = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (retried["skipped"], retried["ran"], retried["timeout"], retried["completed"]) == (1, 1, 1, 1)
    table = pq.read_table(retried["results_path"]).to_pylist()
    assert len(table) == 2 and "0.5 s" in [r for r in table if r["status"] == "timeout"][0]["error"]


def test_a_run_stuck_in_c_is_written_off_and_its_worker_restarted(write_spec, tmp_path):
    path = write_spec(
        'backend = "kinematic"\nmetrics = ["tracking_rms_h_deg"]\n[limits]\nrun_timeout_s = 10.0\n'
        '[parameters]\n"run.duration_s" = [5000.0, 0.2, 0.3]\n'
    )  # the restarted worker's first run imports everything again, before its limit starts (see above)
    spec = load_spec(path)
    runs = expand(spec)
    backend = validate_runs(spec, runs)
    options = SweepOptions(
        out=tmp_path / "out", workers=1, plots=False, task_function="tests.aiko.sweep.hanging:run_dict"
    )
    summary = run_sweep(spec, runs, backend, options, progress_stream=None)
    assert (summary["runs"], summary["completed"], summary["timeout"], summary["missing"]) == (3, 2, 1, 0)
    rows = pq.read_table(summary["results_path"]).to_pylist()
    stuck = [r for r in rows if r["status"] == "timeout"]
    assert len(rows) == 3 and stuck[0]["run.duration_s"] == 5000.0 and "worker was restarted" in stuck[0]["error"]
    # one worker, asleep for an hour in the first run: the others ran because its nanny replaced it
    assert all(r["wall_time_s"] > 0 for r in rows if r["status"] == "ok")
