"""Scenario ``obstacle_aided`` of ``benchmarks/sim_speed.py``: the planar snake of paper 001 in the structured
obstacle field, driven by the obstacle-aided gait through the ordinary run loop (10 Hz references, 100 Hz
feedback, 20 Hz pose log into memory). A 0.2 s warm-up run first loads or compiles the numba kernels, so the
timed run measures steady-state speed; ``warmup_wall_time_s`` reports the warm-up.

``newton_iterations_mean`` is reported for key compatibility with the 3D simulator's benchmark; this model has
no Newton loop, so the field holds the mean number of Lemke pivots per contact LCP (32) solve.
"""

from __future__ import annotations

import time
from pathlib import Path

from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.plugins import backend_names
from aiko.robots.aiko.run import RunOptions, run_experiment

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


def run(duration_s: float, environment: str = "structured", overrides: dict | None = None) -> dict:
    backend_names()  # imports the backend modules, which register the [sim] section (main does not yet)
    warmup_start = time.perf_counter()  # the first steps compile (or load from cache) the numba kernels
    run_experiment(load_experiment(EXPERIMENTS / f"obstacle_aided_{environment}.toml", overrides), MemoryRecorder(),
                   RunOptions(backend="sim", duration_s=0.2))  # fmt: skip
    warmup = time.perf_counter() - warmup_start
    experiment = load_experiment(EXPERIMENTS / f"obstacle_aided_{environment}.toml", overrides)
    start, cpu_start = time.perf_counter(), time.process_time()
    _, summary = run_experiment(experiment, MemoryRecorder(), RunOptions(backend="sim", duration_s=duration_s))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "scenario": "obstacle_aided",
        "environment": environment,
        "sim_time_s": summary["sim_time_s"],
        "wall_time_s": wall,
        "realtime_factor": summary["sim_time_s"] / wall,
        "cpu_time_s": cpu,  # on a shared machine wall time includes waiting for a core
        "warmup_wall_time_s": warmup,  # 0.2 s of simulation before timing, includes any JIT compilation
        "realtime_factor_cpu": summary["sim_time_s"] / cpu,
        "steps": summary["sim_steps"],
        "newton_iterations_mean": summary["flow_lcp_pivots_mean"],
        "iterations_meaning": "mean Lemke pivots per contact LCP (32) solve (no Newton loop in this model)",
        "time_step_s": experiment.tables["sim"].get("dt_s", 1e-3),
        "sim_only_wall_time_s": summary["wall_time_s"],
        "flow_lcp_solves": summary["flow_lcp_solves"],
        "impacts": summary["impacts"],
        "ground_friction_sweeps_mean": summary["ground_friction_sweeps_mean"],
        "distance_x_m": summary["distance_x_m"],
        "mean_forward_speed_m_s": summary["mean_forward_speed_m_s"],
        "com_end_m": summary["com_end_m"],
        "jams_detected": summary.get("jams_detected"),
        "jams_resolved": summary.get("jams_resolved"),
        "smallest_principal_minor": summary["smallest_principal_minor"],
        "p_matrix_checks": summary["p_matrix_checks"],
        "p_matrix_failures": summary["p_matrix_failures"],
        "near_singular_lcp_solves": summary["near_singular_lcp_solves"],
        "max_complementarity_residual": summary["max_complementarity_residual"],
        "max_penetration_m": summary["max_penetration_m"],
        "max_drift_before_projection_m": summary["max_drift_before_projection_m"],
        "min_post_impact_normal_velocity_m_s": summary["min_post_impact_normal_velocity_m_s"],
        "obstacles": summary["obstacles"],
    }
