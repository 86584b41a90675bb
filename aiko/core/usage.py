"""What the process did while a periodic task waited: the evidence a ``deadline_missed`` event carries.

A late wake-up has three kinds of cause, and they need different fixes: the process was not scheduled at all (a
SIGSTOP, a higher real-time priority, a machine stall: little CPU, few context switches), it was busy with something
else (a collector pause, another thread holding the interpreter: CPU time near the gap), or it waited on memory
(major page faults). ``getrusage`` tells them apart for a couple of microseconds per wake-up.

One case it cannot tell: a thread that is runnable but gets no CPU (outranked by real-time work of higher
priority, or the machine's CPUs all taken) uses little CPU and is counted as *preempted*, like a process stopped
in passing. The kernel's scheduler statistics say it directly: ``/proc/thread-self/schedstat`` gives the thread's
time on a CPU and its time *waiting on a run queue* (runnable, not running), in nanoseconds. Each thread keeps that
file open (one ``pread`` per wake-up, ~2 µs); where the kernel has no scheduler statistics the fields are -1.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass

_THREAD = getattr(resource, "RUSAGE_THREAD", None)  # Linux: the calling thread's own counters
_SCHEDSTAT = "/proc/thread-self/schedstat"  # "<ns on a CPU> <ns waiting on a run queue> <timeslices>"


class _SchedstatFile:
    """The calling thread's schedstat, opened once; closed when the thread ends (its thread-local storage goes)."""

    def __init__(self) -> None:
        self.thread_id = threading.get_native_id()  # a forked child's thread has another: it opens its own
        try:
            self.fd = os.open(_SCHEDSTAT, os.O_RDONLY)  # the path resolves to the opening thread
        except OSError:
            self.fd = -1  # no scheduler statistics on this kernel

    def read_ns(self) -> tuple[int, int]:
        if self.fd < 0:
            return -1, -1
        try:
            on_cpu, waiting = os.pread(self.fd, 64, 0).split()[:2]
            return int(on_cpu), int(waiting)
        except (OSError, ValueError):
            return -1, -1

    def __del__(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


_own_schedstat = threading.local()


def _schedstat_ns() -> tuple[int, int]:
    """(ns on a CPU, ns runnable and waiting) of the calling thread, or (-1, -1) where the kernel has none."""
    file = getattr(_own_schedstat, "file", None)
    if file is None or file.thread_id != threading.get_native_id():
        file = _own_schedstat.file = _SchedstatFile()
    return file.read_ns()


@dataclass(frozen=True)
class Usage:
    """Counters at one instant (see `take`)."""

    process_cpu_s: float  # user + system time of every thread of the process
    voluntary_switches: int  # of the calling thread (it blocked); -1 where the platform has no per-thread counters
    involuntary_switches: int  # of the calling thread (it was preempted); -1 likewise
    major_faults: int  # of the process: page faults that waited for the disk
    thread_cpu_ns: int = -1  # of the calling thread, from the scheduler (-1: no scheduler statistics here)
    runqueue_wait_ns: int = -1  # of the calling thread: runnable, waiting for a CPU (-1 likewise)

    @staticmethod
    def take() -> Usage:
        own = resource.getrusage(resource.RUSAGE_SELF)
        thread = resource.getrusage(_THREAD) if _THREAD is not None else None
        on_cpu_ns, waiting_ns = _schedstat_ns()
        return Usage(
            own.ru_utime + own.ru_stime,
            thread.ru_nvcsw if thread is not None else -1,
            thread.ru_nivcsw if thread is not None else -1,
            own.ru_majflt,
            on_cpu_ns,
            waiting_ns,
        )

    def since(self, earlier: Usage) -> dict[str, float | int]:
        """The counters' growth from ``earlier`` (per-thread counts None-free: -1 where unknown)."""
        known = self.voluntary_switches >= 0 and earlier.voluntary_switches >= 0
        scheduled = self.thread_cpu_ns >= 0 and earlier.thread_cpu_ns >= 0
        return {
            "process_cpu_s": round(self.process_cpu_s - earlier.process_cpu_s, 6),
            "voluntary_switches": self.voluntary_switches - earlier.voluntary_switches if known else -1,
            "involuntary_switches": self.involuntary_switches - earlier.involuntary_switches if known else -1,
            "major_faults": self.major_faults - earlier.major_faults,
            "thread_cpu_s": round((self.thread_cpu_ns - earlier.thread_cpu_ns) * 1e-9, 6) if scheduled else -1,
            "runqueue_wait_s": round((self.runqueue_wait_ns - earlier.runqueue_wait_ns) * 1e-9, 6) if scheduled else -1,
        }
