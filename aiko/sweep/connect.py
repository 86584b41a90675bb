"""The Dask side of a sweep: a client on a running cluster (by its scheduler's address) or on a ``LocalCluster`` of
worker processes on this machine, with every worker checked before any run is sent to it (it can import this aiko
stack and read the experiment file). Used by ``aiko sweep``, ``aiko optimize`` and ``aiko identify``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from aiko.core.errors import AikoError

log = logging.getLogger(__name__)


class ClusterOptions(Protocol):
    """Where the cluster is (``aiko.sweep.execute.SweepOptions`` has these)."""

    scheduler: str | None  # a running scheduler's address; None: a LocalCluster on this machine
    workers: int | None  # how many workers to wait for (LocalCluster: to start); None: one per core
    connect_timeout_s: float


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def probe_worker(experiment: str | None = None) -> dict[str, Any]:
    """Runs on every worker before the sweep: can it import the run path and read the experiment file?"""
    import aiko
    import aiko.sweep.worker  # noqa: F401

    return {
        "aiko_version": aiko.__version__,
        "aiko_path": os.path.dirname(aiko.__file__),
        "pid": os.getpid(),
        "experiment_readable": experiment is None or os.access(experiment, os.R_OK),
    }


def connect(options: ClusterOptions, experiment: str | None = None) -> tuple[Any, Any]:
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
        probes = client.run(probe_worker, experiment)
    except TimeoutError:
        close_cluster(client, cluster)
        raise AikoError(f"the Dask cluster has no workers (waited {options.connect_timeout_s:.0f} s)") from None
    except Exception as exc:  # noqa: BLE001 - any import failure on a worker
        close_cluster(client, cluster)
        raise AikoError(
            f"the Dask workers cannot run aiko sweeps ({type(exc).__name__}: {exc}); "
            "install this aiko stack (with the sweep extra) into the workers' environment"
        ) from None
    blind = sorted(address for address, p in probes.items() if not p["experiment_readable"])
    if blind:
        close_cluster(client, cluster)
        raise AikoError(
            f"{len(blind)} Dask worker(s) cannot read {experiment} (e.g. {blind[0]}): workers need the experiment "
            "and its robot file at the same path (a shared file system or the same checkout)"
        )
    import aiko

    versions = {p["aiko_version"] for p in probes.values()}
    if versions != {aiko.__version__}:
        log.warning("workers run aiko %s, this client %s", ", ".join(sorted(versions)), aiko.__version__)
    return client, cluster


def close_cluster(client: Any, cluster: Any) -> None:
    """Close the client, then the LocalCluster it owns (if any), whatever the first does."""
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()
