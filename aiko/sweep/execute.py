"""Running a sweep on Dask distributed: a ``LocalCluster`` of worker processes on this machine by default, or any
running cluster by its scheduler's address.

Every run is one task (``aiko.sweep.worker.run_one``, a pure function); results come back with ``as_completed``
in whatever order they finish and go to the result store in batches. A worker that dies mid-run loses nothing:
the scheduler hands its tasks to another worker, and the store keeps one row per run id. A task the cluster gives up
on (its workers died ``distributed.scheduler.allowed-failures`` times) is a row with status ``lost``, which
``--resume`` runs again, so every run of the sweep is accounted for exactly once.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from aiko.core.errors import AikoError
from aiko.core.progress import Progress
from aiko.sweep.connect import close_cluster, connect
from aiko.sweep.results import ResultStore, final_run_ids, write_manifest
from aiko.sweep.spec import RunPoint, SweepSpec, run_overrides
from aiko.sweep.timelimit import backstop_grace_s
from aiko.sweep.worker import STATUS_FAILED, STATUS_INVALID, STATUS_LOST, STATUS_OK, STATUS_TIMEOUT, RunTask

log = logging.getLogger(__name__)


@dataclass
class SweepOptions:
    out: Path
    scheduler: str | None = None
    workers: int | None = None
    resume: bool = False
    keep_logs: bool = False
    progress_interval_s: float = 10.0
    connect_timeout_s: float = 30.0
    plots: bool = True
    run_timeout_s: float | None = None  # wins over the spec's [limits] run_timeout_s
    retry_timeouts: bool = False  # with resume: run again the runs whose row says timeout
    task_function: str = "aiko.sweep.worker:run_dict"  # what a task calls on a worker (tests put a hanging one here)


def run_sweep(
    spec: SweepSpec,
    runs: list[RunPoint],
    backend: str,
    options: SweepOptions,
    *,
    progress_stream: IO[str] | None = sys.stderr,
    invalid: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run every run of ``runs`` not already done in ``options.out``; returns the sweep's JSON summary.

    ``invalid`` (run id -> error, from :func:`aiko.sweep.spec.screen_runs`): runs whose settings the experiment
    refuses; each is a row with status ``invalid`` and its error, and is never sent to the cluster."""
    invalid = invalid or {}
    parameter_columns = {p.key: [run.params[p.key] for run in runs] for p in spec.parameters}
    rerun = (STATUS_TIMEOUT,) if options.retry_timeouts else ()
    store = ResultStore(options.out, parameter_columns, spec.metrics, rerun=rerun)
    ids = {run.run_id for run in runs}
    done_before = store.done & ids
    if final_run_ids(options.out) and not options.resume:
        raise AikoError(
            f"{options.out} already holds the results of a sweep ({len(store.done)} runs); "
            "--resume continues it, or choose another --out"
        )
    if options.resume:
        _check_same_sweep(options.out, str(spec.experiment_path.resolve()), backend)
    for run in runs:
        if run.run_id in invalid and run.run_id not in store.done:
            row = _unrun_row(run.run_id, STATUS_INVALID, invalid[run.run_id])
            row.update(
                index=run.index, seed=run.seed, params={**run.columns, **run.params}, finished_unix_s=time.time()
            )
            store.add(row)
    todo = [run for run in runs if run.run_id not in store.done]
    write_manifest(
        options.out,
        {
            "spec": str(spec.path),
            "experiment": str(spec.experiment_path.resolve()),
            "backend": backend,
            "metrics": list(spec.metrics),
            "set": spec.fixed,
            "parameters": spec.parameter_keys,
            "sampling": spec.sampling,
            "runs": len(runs),
            "run_timeout_s": _timeout(spec, options),
        },
    )
    started = time.monotonic()
    counts = {STATUS_OK: 0, STATUS_FAILED: 0, STATUS_TIMEOUT: 0, STATUS_LOST: 0}
    workers = 0
    scheduler = options.scheduler
    if todo:
        client, cluster = connect(options, str(spec.experiment_path.resolve()))
        try:
            workers = len(client.scheduler_info()["workers"])
            scheduler = client.scheduler.address
            submit_and_collect(client, spec, todo, backend, options, store, counts, progress_stream)
        finally:
            store.flush()
            close_cluster(client, cluster)
    results_path = store.compact()
    wall = time.monotonic() - started
    summary = summarize(options.out, ids)
    summary.update(
        {
            "skipped": len(done_before),
            "ran": sum(counts.values()),
            "workers": workers,
            "scheduler": scheduler or "LocalCluster",
            "wall_time_s": wall,
            "throughput_runs_per_s": (sum(counts.values()) / wall) if todo and wall > 0 else None,
            "results_path": str(results_path),
            "out": str(options.out),
        }
    )
    if options.plots:
        from aiko.sweep.plots import plot_sweep

        summary["plots"] = [str(p) for p in plot_sweep(results_path, spec.parameter_keys, spec.metrics, options.out)]
    return summary


class SweepProgress:
    """A sweep's progress on the spine's :class:`aiko.core.progress.Progress` (a bar with rate and ETA on a
    terminal, a line every ``interval_s`` otherwise), counted in runs, with the failed, timed-out and lost ones."""

    def __init__(self, total: int, stream: IO[str] | None, interval_s: float = 10.0) -> None:
        self.total = total
        self.progress = (
            Progress("sweep", "runs", stream=stream, interval_s=interval_s, integer=True, eta=True)
            if stream is not None
            else None
        )

    def update(self, counts: dict[str, int]) -> None:
        if self.progress is None:
            return
        trouble = ((STATUS_FAILED, "failed"), (STATUS_TIMEOUT, "timed out"), (STATUS_LOST, "lost"))
        note = ", ".join(f"{counts[status]} {what}" for status, what in trouble if counts.get(status))
        self.progress(sum(counts.values()), self.total, note)

    def finish(self, counts: dict[str, int]) -> None:
        """The last state, always said (off a terminal too), and the bar closed."""
        if self.progress is None:
            return
        self.update(counts)
        self.progress.line()
        self.progress.close()


def _check_same_sweep(out: Path, experiment: str, backend: str) -> None:
    """``--resume`` continues a sweep of the same experiment on the same backend (the grid may have grown)."""
    import json

    try:
        before = json.loads((out / "sweep.json").read_text())
    except (OSError, ValueError):
        return
    for key, now in (("experiment", experiment), ("backend", backend)):
        if before.get(key) not in (None, now):
            raise AikoError(
                f"{out} holds a sweep of {key} {before[key]}; this one is {now}: "
                "--resume continues the same sweep (choose another --out)"
            )


def summarize(directory: Path, ids: set[str]) -> dict[str, Any]:
    """Counts over the sweep's runs in the result table: ``runs``, ``completed`` (ok), ``failed``, ``timeout``,
    ``lost``, ``invalid`` (settings refused, never run), ``missing`` (no row at all: 0 after a finished sweep)."""
    from aiko.sweep.results import read_table

    table = read_table(directory)
    status: dict[str, str] = {}
    if table is not None:
        status = {
            r: s
            for r, s in zip(table.column("run_id").to_pylist(), table.column("status").to_pylist(), strict=True)
            if r in ids
        }
    values = list(status.values())
    return {
        "runs": len(ids),
        "completed": values.count(STATUS_OK),
        "failed": values.count(STATUS_FAILED),
        "timeout": values.count(STATUS_TIMEOUT),
        "lost": values.count(STATUS_LOST),
        "invalid": values.count(STATUS_INVALID),
        "missing": len(ids) - len(status),
    }


def _by_name(target: str, *args: Any) -> tuple[Any, ...]:
    """``client.submit(*_by_name("module:function", *args))`` calls ``module.function(*args)`` on a worker, imported
    there. Dask's scheduler unpickles every task it is given; a task holding aiko's function or classes could not be
    read by a scheduler that has no aiko installed (a cluster started outside the project), so the task is the
    builtin ``eval`` of a fixed call with plain arguments (dicts, strings, numbers)."""
    module, function = target.split(":")
    return eval, f"__import__({module!r}, fromlist=[{function!r}]).{function}(*args)", {"args": args}


def _timeout(spec: SweepSpec, options: SweepOptions) -> float | None:
    return options.run_timeout_s if options.run_timeout_s is not None else spec.run_timeout_s


def _unrun_row(run_id: str, status: str, error: str) -> dict[str, Any]:
    """The row of a run that produced none itself: lost by the cluster, past its time limit, or refused settings."""
    return {
        "run_id": run_id,
        "status": status,
        "error": error[:2000],
        "log_path": None,
        "metrics": {},
        "wall_time_s": None,
        "cpu_time_s": None,
        "worker": None,
    }


def submit_and_collect(
    client: Any,
    spec: SweepSpec,
    todo: list[RunPoint],
    backend: str,
    options: SweepOptions,
    store: ResultStore,
    counts: dict[str, int],
    progress_stream: IO[str] | None,
) -> None:
    """Run ``todo`` on ``client``'s cluster, a row per run into ``store`` (and ``counts``) as runs finish: the one
    run path of ``aiko sweep`` and of every generation of ``aiko optimize``."""
    from distributed import as_completed

    keep_logs = options.keep_logs or spec.keep_logs
    logs = (options.out / "logs").resolve()
    timeout_s = _timeout(spec, options)
    nonce = uuid.uuid4().hex[:8]
    by_key: dict[str, RunPoint] = {}
    futures = []
    for run in todo:
        task = RunTask(
            run_id=run.run_id,
            index=run.index,
            experiment_path=str(spec.experiment_path.resolve()),
            backend=backend,
            overrides=run_overrides(spec, run),
            seed=run.seed,
            metrics=spec.metrics,
            log_path=str(logs / f"run-{run.index:05d}-{run.run_id}.mcap") if keep_logs else None,
            timeout_s=timeout_s,
        )
        key = f"aiko-run-{run.run_id}-{nonce}"
        by_key[key] = run
        futures.append(client.submit(*_by_name(options.task_function, asdict(task)), key=key, pure=False))
    progress = SweepProgress(len(todo), progress_stream, options.progress_interval_s)
    written: set[str] = set()  # keys with a row (a cancelled future still comes out of as_completed)

    def record(run: RunPoint, row: dict[str, Any]) -> None:
        params = {**run.columns, **run.params}
        row.update(index=run.index, seed=run.seed, params=params, finished_unix_s=time.time())
        if store.add(row):  # False: a duplicate of a run already written
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        progress.update(counts)

    pending = as_completed(futures)
    next_check = time.monotonic()
    try:
        while not pending.is_empty():
            batch = pending.next_batch(block=timeout_s is None)
            for future in batch:
                run = by_key[future.key]
                if future.key in written:
                    continue
                written.add(future.key)
                try:
                    row = future.result()
                except Exception as exc:  # noqa: BLE001 - KilledWorker and the like: the cluster gave up on the task
                    row = _unrun_row(run.run_id, STATUS_LOST, f"{type(exc).__name__}: {exc}")
                record(run, row)
                future.release()
            if timeout_s is not None and not batch:
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 1.0
                    for key in _overdue(client, futures, by_key, written, timeout_s):
                        written.add(key)
                        error = (
                            f"RunTimeout: no result within run_timeout_s = {timeout_s:g} s "
                            f"(+ {backstop_grace_s(timeout_s):g} s); its worker was restarted"
                        )
                        record(by_key[key], _unrun_row(by_key[key].run_id, STATUS_TIMEOUT, error))
                time.sleep(0.1)
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    progress.finish(counts)


def _overdue(
    client: Any, futures: list[Any], by_key: dict[str, RunPoint], written: set[str], timeout_s: float
) -> list[str]:
    """The backstop of ``aiko.sweep.timelimit``: keys of runs still going ``backstop_grace_s`` past their limit
    (their thread never gave Python control back). Their futures are cancelled and their workers restarted by
    their nannies (``Client.restart_workers``), which frees them for the rest of the sweep."""
    from aiko.sweep.timelimit import running_runs

    limit = timeout_s + backstop_grace_s(timeout_s)
    try:
        running = client.run(running_runs, on_error="ignore")
    except Exception as exc:  # noqa: BLE001 - a worker gone meanwhile: try again at the next check
        log.debug("cannot ask the workers for their runs: %s", exc)
        return []
    key_of = {run.run_id: key for key, run in by_key.items() if key not in written}
    overdue: list[str] = []
    stuck_workers: list[str] = []
    for address, runs in running.items():
        late = [key_of[run_id] for run_id, elapsed in runs.items() if elapsed > limit and run_id in key_of]
        if late:
            overdue += late
            stuck_workers.append(address)
    if not overdue:
        return []
    for future in futures:
        if future.key in overdue:
            future.cancel()
    log.warning("restarting %d worker(s) stuck in a run past its time limit: %s", len(stuck_workers), stuck_workers)
    try:
        client.restart_workers(stuck_workers, raise_for_error=False)
    except Exception as exc:  # noqa: BLE001 - e.g. a worker without a nanny: it stays busy, the sweep goes on
        log.warning("could not restart %s: %s", stuck_workers, exc)
    return overdue
