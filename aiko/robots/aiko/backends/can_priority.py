"""Real-time scheduling of the thread that streams references to the joint modules (Linux SCHED_FIFO), and the
policy: on the wall clock the stream asks for it by default, on a simulated clock never.
"""

from __future__ import annotations

import logging

from aiko.core import realtime
from aiko.core.clock import WallClock
from aiko.robots.aiko.backends.can_settings import CanSection
from aiko.robots.aiko.joints import RunContext

log = logging.getLogger(__name__)


def set_realtime_priority(priority: int) -> bool:
    """SCHED_FIFO for the calling thread (the one that streams references); False (and a warning) if refused."""
    if priority <= 0 or not realtime.fifo_available():
        return False
    if not realtime.set_fifo(priority):
        log.warning("cannot use real-time priority %d; streaming with normal scheduling", priority)
        return False
    return True


# On the wall clock the reference stream asks for SCHED_FIFO by default: on a loaded 2-core PC, plain scheduling
# gave a 10 Hz period jitter p99 of 5 ms, SCHED_FIFO 20 gave 0.1 ms (benchmarks/can_stream.py). Lockstep runs on the
# simulated clock compute flat out, and a FIFO thread doing that would starve the machine: they never ask for it.
WALL_CLOCK_REALTIME_PRIORITY = 20


def realtime_priority_for(ctx: RunContext, section: CanSection) -> int:
    """The streaming thread's priority for this run: the file's, else the default of the run's clock."""
    if section.realtime_priority is not None:
        return section.realtime_priority
    return WALL_CLOCK_REALTIME_PRIORITY if isinstance(ctx.clock, WallClock) else 0


def restore_normal_priority() -> None:
    realtime.set_normal()
