"""One recorded run of the Cosserat rod simulator on a rod experiment: the rod's centreline, strains, contact
forces and base wrench at the file's log rate into the standard experiment log (with its Foxglove views)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.core.interfaces import Recorder
from aiko.log import McapRecorder
from aiko.log.foxglove_views import views_or_none
from aiko.robots.rod_bench.rod_samples import BASE_WRENCH, CENTRELINE, CONTACTS
from sim.cosserat import ConvergenceError
from sim.cosserat.scenario import Sample, Scenario, simulate


def record_rod_run(
    scenario: Scenario,
    out: Path,
    log_rate_hz: float,
    metadata: dict[str, Any],
    progress: Callable[[float, float], None] | None = None,
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Simulate ``scenario`` into the log ``out``; returns the run summary and the centreline snapshots (for plots)."""
    every = max(1, int(round(1.0 / (log_rate_hz * scenario.dt_s))))
    metadata = {
        "experiment": scenario.name,
        "simulator": "sim.cosserat",
        "dt_s": scenario.dt_s,
        "n_sections": scenario.model.n_sections,
        **metadata,
    }
    snapshots: list[np.ndarray] = []
    wall0 = time.perf_counter()
    with McapRecorder(out, metadata=metadata, foxglove_views=views_or_none(None)) as recorder:
        t0_ns = time.monotonic_ns()

        def on_sample(sample: Sample) -> None:
            if progress is not None:
                progress(sample.t_s, scenario.duration_s)
            record_sample(recorder, t0_ns + int(round(sample.t_s * 1e9)), sample)
            snapshots.append(sample.centreline_m.copy())

        recorder.event("run_started", t0_ns, experiment=scenario.name)
        try:
            result = simulate(scenario, on_sample, every)
        except ConvergenceError as exc:
            recorder.event("run_failed", time.monotonic_ns(), error=str(exc))
            raise AikoError(f"{scenario.name}: simulation stopped: {exc}") from None
        recorder.event("run_finished", t0_ns + int(scenario.duration_s * 1e9))
    wall = time.perf_counter() - wall0
    summary = {
        "experiment": scenario.name,
        "duration_s": float(result.times_s[-1]),
        "steps": int(len(result.times_s)),
        "wall_time_s": wall,
        "realtime_factor": float(result.times_s[-1] / wall),
        "newton_iterations_mean": float(np.mean(result.iterations)),
        "halved_steps": int(np.sum(result.substeps > 1)),
        "tip_start_m": snapshots[0][-1].tolist(),
        "tip_end_m": result.tip_m[-1].tolist(),
        "log_path": str(out),
    }
    return summary, snapshots


def record_sample(recorder: Recorder, t_ns: int, sample: Sample) -> None:
    """One logged instant: centreline and strains; contact forces and base wrench when the step reports them."""
    recorder.record(
        CENTRELINE,
        t_ns,
        {
            "t_s": sample.t_s,
            "centreline_m": sample.centreline_m.tolist(),
            "strain": (sample.state.q[6:].reshape(-1, 6) + sample.model.xi_ref_nodes).tolist(),
        },
    )
    if sample.info is None:
        return
    recorder.record(
        CONTACTS,
        t_ns,
        {"force_n": sample.info.contact_force_n.tolist(), "gap_m": sample.info.contact_gap_m.tolist()},
    )
    recorder.record(
        BASE_WRENCH,
        t_ns,
        {
            "moment_n_m": sample.info.base_wrench[0:3].tolist(),
            "force_n": sample.info.base_wrench[3:6].tolist(),
            "newton_iterations": sample.info.iterations,
        },
    )
