"""Real-time scheduling of the thread that streams references to the joint modules (Linux SCHED_FIFO), and the
policy: on the wall clock the stream asks for it by default, on a simulated clock never.
"""

from __future__ import annotations

import logging
import os

from aiko.core.clock import WallClock
from aiko.robots.aiko.backends.can_settings import CanSection
from aiko.robots.aiko.joints import RunContext

log = logging.getLogger(__name__)


def set_realtime_priority(priority: int) -> bool:
    """SCHED_FIFO for the calling thread (the one that streams references); False (and a warning) if refused."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (PermissionError, OSError) as exc:
        log.warning("cannot use real-time priority %d (%s); streaming with normal scheduling", priority, exc)
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
    if hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass
