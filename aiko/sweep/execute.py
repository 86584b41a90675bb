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
import math
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from aiko.core.errors import AikoError
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


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Progress:
    """A bar with rate and ETA on a terminal; a plain line every ``interval_s`` (and at the end) otherwise."""

    def __init__(self, total: int, stream: IO[str] | None, interval_s: float = 10.0) -> None:
        self.total = total
        self.stream = stream
        self.tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self.interval_s = interval_s
        self.start = time.monotonic()
        self._last = -math.inf
        self._last_done = -1

    def text(self, done: int, failed: int, lost: int, timeout: int = 0) -> str:
        elapsed = time.monotonic() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else math.nan
        extra = "".join(
            f", {n} {what}" for n, what in ((failed, "failed"), (timeout, "timed out"), (lost, "lost")) if n
        )
        eta_text = _duration(eta) if math.isfinite(eta) else "?"
        return f"{done}/{self.total} runs{extra}, {rate:.2f} runs/s, elapsed {_duration(elapsed)}, ETA {eta_text}"

    def update(self, done: int, failed: int = 0, lost: int = 0, timeout: int = 0, *, final: bool = False) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if self.tty:
            if final or now - self._last >= 0.2:
                width = 30
                filled = int(width * done / self.total) if self.total else width
                bar = "#" * filled + "." * (width - filled)
                self.stream.write(f"\r  [{bar}] {self.text(done, failed, lost, timeout)}  " + ("\n" if final else ""))
                self.stream.flush()
                self._last = now
        elif (final and done != self._last_done) or now - self._last >= self.interval_s:
            self.stream.write(f"sweep: {self.text(done, failed, lost, timeout)}\n")
            self.stream.flush()
            self._last, self._last_done = now, done


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _probe(experiment: str | None = None) -> dict[str, Any]:
    """Runs on every worker before the sweep: can it import the run path and read the experiment file?"""
    import aiko
    import aiko.sweep.worker  # noqa: F401

    return {
        "aiko_version": aiko.__version__,
        "aiko_path": os.path.dirname(aiko.__file__),
        "pid": os.getpid(),
        "experiment_readable": experiment is None or os.access(experiment, os.R_OK),
    }


def connect(options: SweepOptions, experiment: str | None = None) -> tuple[Any, Any]:
    """A Dask client (and the ``LocalCluster`` it owns, or None), with every worker able to run aiko runs (and
    to read ``experiment``)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise AikoError("aiko sweep needs Dask: pip install 'aiko-stack[sweep]' (dask[distributed], pyarrow)") from None
    if logging.getLogger().getEffectiveLevel() > logging.INFO:  # Dask's INFO chatter only with -v
        logging.getLogger("distributed").setLevel(logging.WARNING)
    cluster = None
    try:
        if options.scheduler:
            try:
                client = Client(options.scheduler, timeout=f"{options.connect_timeout_s}s")
            except (OSError, TimeoutError) as exc:
                raise AikoError(f"cannot reach the Dask scheduler at {options.scheduler}: {exc}") from None
            if options.workers:
                try:
                    client.wait_for_workers(options.workers, timeout=options.connect_timeout_s)
                except TimeoutError:
                    n = len(client.scheduler_info()["workers"])
                    client.close()
                    raise AikoError(
                        f"the scheduler at {options.scheduler} has {n} workers; --workers asked for "
                        f"{options.workers} (waited {options.connect_timeout_s:.0f} s)"
                    ) from None
        else:
            cluster = LocalCluster(
                n_workers=options.workers or default_workers(),
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",  # its HTTP server always starts; not on 8787, which may be taken
                scheduler_kwargs={"dashboard": False},
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    try:
        if not client.scheduler_info()["workers"]:
            client.wait_for_workers(1, timeout=options.connect_timeout_s)
        probes = client.run(_probe, experiment)
    except TimeoutError:
        _close(client, cluster)
        raise AikoError(f"the Dask cluster has no workers (waited {options.connect_timeout_s:.0f} s)") from None
    except Exception as exc:  # noqa: BLE001 - any import failure on a worker
        _close(client, cluster)
        raise AikoError(
            f"the Dask workers cannot run aiko sweeps ({type(exc).__name__}: {exc}); "
            "install this aiko stack (with the sweep extra) into the workers' environment"
        ) from None
    blind = sorted(address for address, p in probes.items() if not p["experiment_readable"])
    if blind:
        _close(client, cluster)
        raise AikoError(
            f"{len(blind)} Dask worker(s) cannot read {experiment} (e.g. {blind[0]}): workers need the experiment "
            "and its robot file at the same path (a shared file system or the same checkout)"
        )
    import aiko

    versions = {p["aiko_version"] for p in probes.values()}
    if versions != {aiko.__version__}:
        log.warning("workers run aiko %s, this client %s", ", ".join(sorted(versions)), aiko.__version__)
    return client, cluster


def _close(client: Any, cluster: Any) -> None:
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()


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
            _close(client, cluster)
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
    progress = Progress(len(todo), progress_stream, options.progress_interval_s)
    progress.update(0, final=False)
    written: set[str] = set()  # keys with a row (a cancelled future still comes out of as_completed)

    def record(run: RunPoint, row: dict[str, Any]) -> None:
        params = {**run.columns, **run.params}
        row.update(index=run.index, seed=run.seed, params=params, finished_unix_s=time.time())
        if store.add(row):  # False: a duplicate of a run already written
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        progress.update(sum(counts.values()), counts[STATUS_FAILED], counts[STATUS_LOST], counts[STATUS_TIMEOUT])

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
    progress.update(
        sum(counts.values()), counts[STATUS_FAILED], counts[STATUS_LOST], counts[STATUS_TIMEOUT], final=True
    )


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
