"""``aiko sweep --scheduler`` on a real multi-process cluster: a ``dask scheduler`` and two ``dask worker`` processes
on 127.0.0.1 (free ports), always stopped. The 200-run measurement and the worker-kill check are
``benchmarks/sweep_cluster.py``."""

import json
import subprocess
import sys

import pyarrow.parquet as pq

from aiko.sweep.cluster import LoopbackCluster
from tests.conftest import REPO


def test_eight_snake3d_runs_on_a_scheduler_and_two_worker_processes(write_spec, tmp_path):
    path = write_spec(
        'backend = "sim"\nmetrics = ["distance_m", "speed_m_s", "heading_deg"]\n[set]\n"run.duration_s" = 1.0\n'
        '[parameters]\n"gait.amplitude_h_deg" = [20.0, 30.0]\n'
        '"gait.phase_step_h_deg" = { low = -70.0, high = -40.0, count = 4 }\n'
    )
    out = tmp_path / "out"
    with LoopbackCluster(workers=2, log_dir=tmp_path / "cluster-logs") as cluster:
        cmd = [sys.executable, "-m", "aiko.cli", "sweep", str(path), "--scheduler", cluster.address]
        done = subprocess.run(
            [*cmd, "--workers", "2", "--out", str(out), "--json"], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        pids = [w.pid for w in cluster.workers]
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["runs"], summary["completed"], summary["workers"]) == (8, 8, 2)
    assert summary["scheduler"] == cluster.address
    table = pq.read_table(summary["results_path"])
    assert sorted(table.column("index").to_pylist()) == list(range(8))
    assert all(d is not None and d > 0 for d in table.column("distance_m").to_pylist())
    assert len(set(table.column("worker").to_pylist())) == 2  # both worker processes ran runs
    assert all(proc.poll() is not None for proc in [cluster.scheduler, *cluster.workers])  # stopped
    assert len(pids) == 2


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(write_spec, tmp_path):
    path = write_spec(
        'backend = "sim"\nmetrics = ["distance_m"]\n[set]\n"run.duration_s" = 2.0\n'
        '[parameters]\n"gait.amplitude_h_deg" = [20.0, 25.0, 30.0, 35.0, 40.0, 45.0]\n'
    )
    out = tmp_path / "out"
    with LoopbackCluster(workers=2, log_dir=tmp_path / "cluster-logs") as cluster:
        cmd = [sys.executable, "-m", "aiko.cli", "sweep", str(path), "--scheduler", cluster.address, "--workers", "2"]
        sweep = subprocess.Popen([*cmd, "--out", str(out), "--json"], cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            killed = cluster.kill_busy_worker()
            stdout, _ = sweep.communicate(timeout=300)
        finally:
            if sweep.poll() is None:
                sweep.kill()
    assert killed["running"] and sweep.returncode == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert (summary["runs"], summary["completed"], summary["lost"], summary["missing"]) == (6, 6, 0, 0)
    table = pq.read_table(summary["results_path"])
    assert sorted(table.column("index").to_pylist()) == list(range(6))  # every run once
    assert all(s == "ok" for s in table.column("status").to_pylist())


def test_optimize_and_identify_run_on_a_scheduler_started_outside(tmp_path):
    """The same cluster code as a sweep: CMA-ES generations and least-squares replays as by-name tasks on a
    ``dask scheduler`` that has no aiko, and its ``dask worker`` processes."""
    from tests.conftest import EXPERIMENTS

    spec = tmp_path / "opt.toml"
    spec.write_text(
        f'experiment = "{EXPERIMENTS / "sidewinding.toml"}"\nbackend = "kinematic"\nmetric = "tracking_rms_h_deg"\n'
        'goal = "minimize"\n[set]\n"run.duration_s" = 1.0\n[parameters]\n"gait.amplitude_h_deg" = {}\n'
        "[cmaes]\ngenerations = 2\npopulation = 4\n"
    )
    log = tmp_path / "truth.mcap"
    run = [sys.executable, "-m", "aiko.cli", "run", str(EXPERIMENTS / "lateral_undulation_orthotropic.toml")]
    subprocess.run([*run, "--duration", "0.5", "--out", str(log), "--no-report"], cwd=REPO, check=True, timeout=120)
    with LoopbackCluster(workers=2, log_dir=tmp_path / "cluster-logs") as cluster:
        at = ["--scheduler", cluster.address, "--workers", "2", "--json"]
        optimized = subprocess.run(
            [sys.executable, "-m", "aiko.cli", "optimize", str(spec), "--out", str(tmp_path / "opt"), *at],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        identified = subprocess.run(
            [sys.executable, "-m", "aiko.cli", "identify", str(log), "--params", "sim.mu_rolling",
             "--bounds", "sim.mu_rolling=0.0:0.2", "--max-evaluations", "3", "--out", str(tmp_path / "id"), *at],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert optimized.returncode == 0, optimized.stderr
    summary = json.loads(optimized.stdout.strip().splitlines()[-1])
    assert summary["evaluations"] == 9 and summary["completed"] == 9
    table = pq.read_table(summary["results_path"])
    assert len(set(table.column("worker").to_pylist())) == 2  # both workers ran evaluations
    assert identified.returncode == 0, identified.stderr
    fit = json.loads(identified.stdout.strip().splitlines()[-1])
    assert fit["replays"] >= 2 and fit["residual_after"]["cost"] <= fit["residual_before"]["cost"]
