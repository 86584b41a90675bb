"""What the process did while a periodic task waited: the evidence a ``deadline_missed`` event carries.

A late wake-up has three kinds of cause, and they need different fixes: the process was not scheduled at all (a
SIGSTOP, a higher real-time priority, a machine stall: little CPU, few context switches), it was busy with something
else (a collector pause, another thread holding the interpreter: CPU time near the gap), or it waited on memory
(major page faults). ``getrusage`` tells them apart for a couple of microseconds per wake-up.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

_THREAD = getattr(resource, "RUSAGE_THREAD", None)  # Linux: the calling thread's own counters


@dataclass(frozen=True)
class Usage:
    """Counters at one instant (see `take`)."""

    process_cpu_s: float  # user + system time of every thread of the process
    voluntary_switches: int  # of the calling thread (it blocked); -1 where the platform has no per-thread counters
    involuntary_switches: int  # of the calling thread (it was preempted); -1 likewise
    major_faults: int  # of the process: page faults that waited for the disk

    @staticmethod
    def take() -> Usage:
        own = resource.getrusage(resource.RUSAGE_SELF)
        thread = resource.getrusage(_THREAD) if _THREAD is not None else None
        return Usage(
            own.ru_utime + own.ru_stime,
            thread.ru_nvcsw if thread is not None else -1,
            thread.ru_nivcsw if thread is not None else -1,
            own.ru_majflt,
        )

    def since(self, earlier: Usage) -> dict[str, float | int]:
        """The counters' growth from ``earlier`` (per-thread counts None-free: -1 where unknown)."""
        known = self.voluntary_switches >= 0 and earlier.voluntary_switches >= 0
        return {
            "process_cpu_s": round(self.process_cpu_s - earlier.process_cpu_s, 6),
            "voluntary_switches": self.voluntary_switches - earlier.voluntary_switches if known else -1,
            "involuntary_switches": self.involuntary_switches - earlier.involuntary_switches if known else -1,
            "major_faults": self.major_faults - earlier.major_faults,
        }
