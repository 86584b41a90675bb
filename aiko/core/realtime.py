"""Real-time scheduling (Linux SCHED_FIFO) for a run's threads.

Why every Python thread, not only the one that streams: the threads of one process share the GIL, so the sender
waits for whichever thread holds it. A helper thread at normal priority (the MCAP writer encoding a chunk, the live
Foxglove server) that other processes preempt while it holds the GIL stalls a SCHED_FIFO sender for as long as it
stays preempted — priority inversion, and on a loaded 2-core PC that was tens of milliseconds (issue 26). So a run
raises every Python thread of the process to its priority (threads started later inherit the policy of the thread
that starts them) and the sender one level above, so it preempts its helpers at once. Threads that never hold the
GIL (BLAS or numba worker pools, not in ``threading.enumerate()``) are left alone: raising a spinning pool to
SCHED_FIFO would starve the machine.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


def fifo_available() -> bool:
    return hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_FIFO")


def set_fifo(priority: int, native_id: int = 0) -> bool:
    """SCHED_FIFO ``priority`` for one thread (0: the calling thread); False if refused or not Linux."""
    if priority <= 0 or not fifo_available():
        return False
    try:
        os.sched_setscheduler(native_id, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as exc:  # PermissionError without CAP_SYS_NICE / rtprio limit; ESRCH for a thread that ended
        log.debug("SCHED_FIFO %d refused for thread %s: %s", priority, native_id or "self", exc)
        return False
    return True


def set_normal(native_id: int = 0) -> None:
    """Back to SCHED_OTHER (a thread that ended meanwhile is ignored)."""
    if fifo_available():
        try:
            os.sched_setscheduler(native_id, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


def thread_policy(native_id: int = 0) -> tuple[int, int]:
    """(policy, priority) of a thread, e.g. (os.SCHED_FIFO, 20)."""
    return os.sched_getscheduler(native_id), os.sched_getparam(native_id).sched_priority


@dataclass
class RaisedThreads:
    """Which threads a run raised, so that it can put them back when it ends."""

    priority: int
    native_ids: list[int] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # thread names the kernel refused

    def restore(self) -> None:
        for native_id in self.native_ids:
            set_normal(native_id)
        self.native_ids.clear()


def raise_python_threads(priority: int) -> RaisedThreads:
    """SCHED_FIFO ``priority`` for every other live Python thread of this process (see the module docstring)."""
    raised = RaisedThreads(priority)
    if priority <= 0 or not fifo_available():
        return raised
    me = threading.get_native_id()
    for thread in threading.enumerate():
        native_id = thread.native_id
        if native_id is None or native_id == me or not thread.is_alive():
            continue
        if set_fifo(priority, native_id):
            raised.native_ids.append(native_id)
        else:
            raised.refused.append(thread.name)
    if raised.refused:
        log.warning("SCHED_FIFO %d refused for threads %s", priority, raised.refused)
    return raised
