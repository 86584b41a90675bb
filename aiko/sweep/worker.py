"""The unit of work of a sweep: one run, from its settings to its result row, in whatever process Dask chooses.

:func:`run_one` is a pure function of its :class:`RunTask` (no state shared between runs or workers; every run
seeds its own generators), and never raises for a failed run: an error (a simulator that diverged, a step that did
not converge, a setting the experiment rejects) is a row with ``status = "failed"`` and the error's one line. The
run goes through the same path as ``aiko run`` (``aiko.robots.aiko.run``) on the simulated clock, kept in memory, or
written as an MCAP log too when the sweep keeps logs.
"""

from __future__ import annotations

import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Any

from aiko.core.recording import MemoryRecorder
from aiko.sweep.timelimit import RunTimeout, time_limit

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_TIMEOUT = "timeout"  # past the sweep's run_timeout_s; --resume runs it again only with --retry-timeouts
STATUS_INVALID = "invalid"  # settings the experiment refuses (checked before the sweep starts); never submitted
FINAL_STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_TIMEOUT, STATUS_INVALID)
STATUS_LOST = "lost"  # the cluster gave up on the task (its workers kept dying); --resume runs it again


@dataclass(frozen=True)
class RunTask:
    run_id: str
    index: int
    experiment_path: str
    backend: str
    overrides: dict[str, Any]
    seed: int
    metrics: tuple[str, ...]
    log_path: str | None = None
    timeout_s: float | None = None


def run_dict(task: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_one` of a task given as a plain dict (how a sweep submits it: see ``aiko.sweep.execute``)."""
    return run_one(RunTask(**{**task, "metrics": tuple(task["metrics"])}))


def run_one(task: RunTask) -> dict[str, Any]:
    """Run ``task`` and return its row: ``run_id``, ``status``, ``error``, ``wall_time_s``, ``worker``,
    ``log_path`` and one value per metric (None where the run cannot tell or failed)."""
    import numpy as np

    start, cpu_start = time.perf_counter(), time.process_time()
    row: dict[str, Any] = {
        "run_id": task.run_id,
        "status": STATUS_OK,
        "error": None,
        "log_path": task.log_path,
        "metrics": dict.fromkeys(task.metrics),
    }
    try:
        random.seed(task.seed)
        np.random.seed(task.seed)
        _load_run_code()
        with time_limit(task.run_id, task.timeout_s):
            experiment, summary, reader = _run(task)
            if summary.get("interrupted"):
                raise RuntimeError("the run was interrupted")
            from aiko.sweep.metrics import RunData, compute_metrics

            problems: list[str] = []
            row["metrics"] = compute_metrics(task.metrics, RunData(experiment, summary, reader), problems)
        row["error"] = "; ".join(problems)[:2000] or None  # the run is ok; a metric that could not read it says why
    except RunTimeout:
        row["status"] = STATUS_TIMEOUT
        row["metrics"] = dict.fromkeys(task.metrics)
        row["error"] = f"RunTimeout: no result within run_timeout_s = {task.timeout_s:g} s"
    except Exception as exc:  # noqa: BLE001 - a failed run is a row, never a crashed sweep
        row["status"] = STATUS_FAILED
        row["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
    row["wall_time_s"] = time.perf_counter() - start
    row["cpu_time_s"] = time.process_time() - cpu_start
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    return row


def _load_run_code() -> None:
    """Import what a run needs before its time limit starts: a fresh worker's first run would otherwise spend its
    limit on Python's imports (seconds; more than 10 s on a PC at load 10), which are not the run's time."""
    import aiko.log  # noqa: F401
    import aiko.robots.aiko.experiment  # noqa: F401
    import aiko.robots.aiko.run  # noqa: F401
    import aiko.sweep.metrics  # noqa: F401


class MetricRecorder(MemoryRecorder):
    """Keeps what metrics read; drops the per-sphere contact forces (the bulk of a snake3d run's records)."""

    SKIPPED = frozenset({"/sim/contacts"})

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        if channel not in self.SKIPPED:
            super().record(channel, t_ns, payload)


def _run(task: RunTask) -> tuple[Any, dict[str, Any], Any]:
    from aiko.log import LogReader
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.run import RunOptions, record_run, run_experiment

    overrides = dict(task.overrides)
    experiment = load_experiment(task.experiment_path, overrides)
    mocap = experiment.tables.get("mocap", {})
    if mocap.get("source") == "simulated" and "mocap.seed" not in overrides:
        overrides["mocap.seed"] = task.seed  # the simulated Vicon's noise and dropouts: the run's own draw
        experiment = load_experiment(task.experiment_path, overrides)
    options = RunOptions(backend=task.backend)
    memory = MetricRecorder()
    tasks = _time_limit_task(task.timeout_s)
    if task.log_path:
        os.makedirs(os.path.dirname(task.log_path) or ".", exist_ok=True)
        summary = record_run(experiment, task.log_path, options, live=memory, extra_tasks=tasks)
    else:
        _, summary = run_experiment(experiment, memory, options, extra_tasks=tasks)
    return experiment, summary, LogReader.from_records(memory.channels, memory.events, name=f"run {task.run_id}")


def _time_limit_task(timeout_s: float | None) -> list[Any]:
    """The time limit once more, cooperatively: a task on the run's clock (10 Hz of run time) that raises
    ``RunTimeout`` past the wall-clock limit. In one full test session the watchdog's asynchronous exception did not
    end the run, which went on for minutes and gigabytes (cause not found; an exception swallowed by a bare
    ``except`` in library code is the likely one). This check cannot be swallowed that way and costs one clock
    read per 0.1 s of run time."""
    if timeout_s is None:
        return []
    from aiko.core.loop import PeriodicTask

    deadline = time.monotonic() + timeout_s

    def check(_t_s: float) -> None:
        if time.monotonic() > deadline:
            raise RunTimeout

    return [PeriodicTask("run_time_limit", 10.0, check, priority=0)]
