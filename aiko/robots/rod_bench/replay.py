"""``aiko bench replay``: the Cosserat simulator re-driven with a bench log's measured flange poses.

The logged experiment text (not the file, which may have changed) gives the rod; the base moves through the logged
``/bench/observation`` base poses, linearly between samples; the run goes through :func:`record_bench_run` with the
``sim`` backend, so the replay log has the layout of any bench log and ``aiko bench compare`` reads both alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.log.reader import read_log
from aiko.robots.rod_bench.bench_experiment import bench_experiment_from_text
from aiko.robots.rod_bench.bench_run import OBSERVATION, SUMMARY_METADATA_NAME, record_bench_run
from aiko.robots.rod_bench.trajectory import motion_from_samples


def replay_bench_log(
    log_path: str | Path, out: str | Path, progress: Callable[[float, float], None] | None = None
) -> dict[str, Any]:
    reader = read_log(log_path)
    meta = reader.run_metadata
    if "experiment_toml" not in meta or meta.get("robot") != "rod_bench":
        raise AikoError(f"{log_path}: not a bench log (no rod_bench experiment in its metadata)")
    experiment = bench_experiment_from_text(meta["experiment_toml"], meta.get("experiment_path", str(log_path)))
    if not reader.has(OBSERVATION):
        raise AikoError(f"{log_path}: no {OBSERVATION} channel to replay")
    obs = reader.channel(OBSERVATION)
    t_s = np.asarray(obs["t_s"], dtype=float)
    alphas = np.asarray(obs["base_alpha"], dtype=float)
    motion = motion_from_samples(t_s, alphas)
    # a HIL plant mounted the rod before t = 0 (the arm held at the start pose): start the simulator there too, the
    # base held at the first logged pose, so both rods have settled for the same time
    start_s = min(0.0, float(reader.metadata.get(SUMMARY_METADATA_NAME, {}).get("rod_started_at_s") or 0.0))
    duration = float(t_s[-1])  # the last observation is at the run's end (the loop samples t = duration)
    if not duration > 0:
        raise AikoError(f"{log_path}: {OBSERVATION} spans no time; nothing to replay")
    summary = record_bench_run(
        experiment,
        out,
        "sim",
        duration_s=duration,
        motion=motion,
        start_s=start_s,
        extra_metadata={"replay_of": str(log_path), "replayed_backend": meta.get("backend")},
    )
    summary["replay_of"] = str(log_path)
    return summary
