"""``aiko sweep`` on a real multi-process Dask cluster over loopback, printed as JSON.

    python benchmarks/sweep_cluster.py --runs 200 --duration 15 --json

A ``dask scheduler`` and ``dask worker`` processes (one thread each) are started on 127.0.0.1 and the sweep runs
through the CLI (``aiko sweep SPEC --scheduler tcp://127.0.0.1:PORT``), as a user would run it:

1. throughput: the same sweep (sidewinding on the 3D simulator, amplitude × phase step, ``--duration`` s each) with
   1 worker, then with 2; ``speedup`` is the ratio of runs per second. The runs' CPU time and the load average are
   reported too: on a shared machine, another process on the second core takes it from the second worker.
2. a worker killed mid-sweep: with 2 workers, one is SIGKILLed (its nanny and process group) once a quarter of the
   runs is in the table; the sweep must still end with every run in the table exactly once with a final status.

numba compiles (or loads its on-disk cache) in each worker on its first run; that is part of the timing, as it is
for a user.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from aiko.sweep.cluster import LoopbackCluster  # noqa: E402


def write_spec(directory: Path, runs: int, duration_s: float) -> Path:
    n_amp = max(1, min(10, runs))
    n_phase = math.ceil(runs / n_amp)
    spec = directory / "sweep.toml"
    spec.write_text(
        f'experiment = "{REPO / "experiments" / "sidewinding.toml"}"\n'
        'backend = "sim"\n'
        'metrics = ["distance_m", "speed_m_s", "heading_deg", "cost_of_transport", "newton_iterations_mean"]\n'
        "[set]\n"
        f'"run.duration_s" = {duration_s}\n'
        "[parameters]\n"
        f'"gait.amplitude_h_deg" = {{ low = 15.0, high = 45.0, count = {n_amp} }}\n'
        f'"gait.phase_step_h_deg" = {{ low = -90.0, high = -20.0, count = {n_phase} }}\n'
    )
    return spec


def sweep(spec: Path, out: Path, address: str, workers: int, *, kill: LoopbackCluster | None = None) -> dict:
    cmd = [sys.executable, "-m", "aiko.cli", "sweep", str(spec), "--scheduler", address, "--workers", str(workers)]
    cmd += ["--out", str(out), "--json", "--no-plots"]
    dry = subprocess.run([*cmd[:5], "--dry-run", "--json"], cwd=REPO, capture_output=True, text=True, check=True)
    expected_ids = {point["run_id"] for point in json.loads(dry.stdout)["points"]}
    total = len(expected_ids)
    load_before = os.getloadavg()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    killed_at = None
    try:
        if kill is not None:
            from aiko.sweep.results import read_table

            while proc.poll() is None:
                time.sleep(1.0)
                table = read_table(out)
                done = 0 if table is None else table.num_rows
                if done >= total // 4:
                    kill.kill_worker(0)
                    killed_at = {"rows_in_table": done, "of": total, "after_s": time.monotonic() - start}
                    break
        stdout, _ = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = time.monotonic() - start
    summary = json.loads(stdout.strip().splitlines()[-1])
    import pyarrow.parquet as pq

    table = pq.read_table(summary["results_path"])
    ids = table.column("run_id").to_pylist()
    cpu = [c for c in table.column("cpu_time_s").to_pylist() if c is not None]
    result = {
        "workers": workers,
        "runs": summary["runs"],
        "completed": summary["completed"],
        "failed": summary["failed"],
        "lost": summary["lost"],
        "missing": summary["missing"],
        "rows": table.num_rows,
        "unique_run_ids": len(set(ids)),
        "sweep_wall_time_s": summary["wall_time_s"],
        "cli_wall_time_s": wall,
        "throughput_runs_per_s": summary["throughput_runs_per_s"],
        "run_cpu_time_s_total": sum(cpu),
        "run_cpu_time_s_mean": sum(cpu) / len(cpu) if cpu else None,
        "distinct_worker_processes": len(set(table.column("worker").to_pylist())),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "exit_code": proc.returncode,
    }
    if kill is not None:
        result["killed"] = killed_at
        result["run_ids_equal_the_spec"] = set(ids) == expected_ids
        result["every_run_once"] = (
            table.num_rows == len(expected_ids) == len(set(ids))
            and set(ids) == expected_ids
            and summary["missing"] == 0
            and summary["lost"] == 0
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-kill", action="store_true")
    parser.add_argument("--json", action="store_true", help="(JSON is the only output)")
    args = parser.parse_args()
    report: dict = {"runs_requested": args.runs, "duration_s": args.duration, "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="aiko-sweep-bench-") as tmp:
        tmp_path = Path(tmp)
        spec = write_spec(tmp_path, args.runs, args.duration)
        if not args.skip_throughput:
            for workers in (1, 2):
                with LoopbackCluster(workers, log_dir=tmp_path / f"logs-{workers}") as cluster:
                    report[f"workers_{workers}"] = sweep(spec, tmp_path / f"out-{workers}", cluster.address, workers)
            one, two = report["workers_1"]["throughput_runs_per_s"], report["workers_2"]["throughput_runs_per_s"]
            report["speedup_2_vs_1"] = two / one if one and two else None
        if not args.skip_kill:
            with LoopbackCluster(2, log_dir=tmp_path / "logs-kill") as cluster:
                report["worker_killed"] = sweep(spec, tmp_path / "out-kill", cluster.address, 2, kill=cluster)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
