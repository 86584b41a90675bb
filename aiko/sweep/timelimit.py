"""A run's time limit (a sweep's ``[limits] run_timeout_s``), enforced twice.

Dask has no per-task time limit: a running task is a thread in a worker process, and ``Future.cancel`` only tells
the scheduler to forget the result (the thread runs on and the worker stays busy). So:

1. **In the worker** (the common case, cheap): :func:`time_limit` arms a timer that raises :class:`RunTimeout` in
   the run's own thread (CPython's ``PyThreadState_SetAsyncExc``) once the limit has passed. The simulators are
   Python loops, so the exception arrives within one step, the run becomes a row with status ``timeout`` and the
   worker takes its next task. ``RunTimeout`` is a ``BaseException``: a simulator's ``except Exception`` does not
   swallow it.
2. **From the client** (the backstop, for a run stuck where Python never gets control back: a blocking C call,
   a wait on a socket): every run notes its start in its worker process (:func:`running_runs` reads them, through
   ``Client.run``); a run still going ``grace_s`` after its limit is written as ``timeout`` by the client, its
   future cancelled and its worker restarted with Dask's own ``Client.restart_workers`` (the worker's nanny
   replaces the process; only workers under a nanny, the default of ``dask worker`` and ``LocalCluster``, can be).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# run id -> monotonic start, of the runs this worker process is running now (read by running_runs)
_RUNNING: dict[str, float] = {}
_RUNNING_LOCK = threading.Lock()


class RunTimeout(BaseException):  # noqa: N818 - the name says what happened; BaseException: see the module doc
    """A run went past its time limit."""


def backstop_grace_s(timeout_s: float) -> float:
    """How long past its limit the client waits for a run's own timeout before restarting its worker."""
    return max(5.0, 0.25 * timeout_s)


class _Watchdog:
    def __init__(self, timeout_s: float) -> None:
        self.thread_id = threading.get_ident()
        self.lock = threading.Lock()
        self.armed = True
        self.fired = False
        self.timer = threading.Timer(timeout_s, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if self.armed:
                self.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), ctypes.py_object(RunTimeout))

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
            self.timer.cancel()
            if self.fired:  # raised already, or still pending: clear a pending one (NULL clears it)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), None)


@contextmanager
def time_limit(run_id: str, timeout_s: float | None) -> Iterator[None]:
    """Run the body with a limit of ``timeout_s`` (None: none); raises :class:`RunTimeout` when it is exceeded.
    The run is listed in :func:`running_runs` meanwhile either way."""
    with _RUNNING_LOCK:
        _RUNNING[run_id] = time.monotonic()
    watchdog = _Watchdog(timeout_s) if timeout_s is not None else None
    try:
        yield
    finally:
        try:
            if watchdog is not None:
                watchdog.disarm()  # a RunTimeout delivered in here still goes on to the pop below
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(run_id, None)
    if watchdog is not None and watchdog.fired:  # fired as the body ended: the exception was cleared, not raised
        raise RunTimeout


def running_runs() -> dict[str, float]:
    """Runs in progress in this process: run id -> seconds since it started (``Client.run`` calls it on workers)."""
    now = time.monotonic()
    with _RUNNING_LOCK:
        return {run_id: now - start for run_id, start in _RUNNING.items()}
