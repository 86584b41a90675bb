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
