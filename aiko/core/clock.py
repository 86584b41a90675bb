"""One clock per run: simulated time for simulations (as fast as they go), wall-clock time for hardware.

Logs stamp with int64 nanoseconds; APIs use float seconds since the run started.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod


class Clock(ABC):
    """Run time in seconds since ``start`` plus the nanosecond stamp every log record carries."""

    # Whether `sleep_until` can return after its deadline (a clock that follows a wall or a device). A loop on a
    # clock that cannot (simulated time jumps to each deadline) never misses one, so it need not take the
    # evidence a missed deadline carries at every wake-up (`aiko.core.loop.TaskLoop`).
    wakes_late = True

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()

    @abstractmethod
    def now_s(self) -> float: ...

    def now_ns(self) -> int:
        return self.start_ns + round(self.now_s() * 1e9)

    def stamp_ns(self, t_s: float) -> int:
        """The log stamp of run time ``t_s``."""
        return self.start_ns + round(t_s * 1e9)

    @abstractmethod
    def sleep_until(self, t_s: float) -> None: ...


class SimulatedClock(Clock):
    """Time jumps to each deadline: simulations run as fast as the machine allows, deterministically."""

    wakes_late = False

    def __init__(self) -> None:
        super().__init__()
        self._t_s = 0.0

    def now_s(self) -> float:
        return self._t_s

    def sleep_until(self, t_s: float) -> None:
        self._t_s = max(self._t_s, t_s)


class WallClock(Clock):
    """Monotonic wall-clock time. Deadlines are absolute, so periodic work does not drift.

    The sleep is coarse (``time.sleep``) until ``spin_s`` before the deadline, then a short busy-wait: on a loaded
    2-core machine plain ``time.sleep`` overshoots by up to a millisecond, more than the 10 Hz jitter budget allows.
    """

    def __init__(self, spin_s: float = 0.0005) -> None:
        super().__init__()
        self.spin_s = spin_s

    def now_s(self) -> float:
        return (time.monotonic_ns() - self.start_ns) * 1e-9

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_until(self, t_s: float) -> None:
        while True:
            remaining = t_s - self.now_s()
            if remaining <= 0:
                return
            if remaining > self.spin_s:
                time.sleep(remaining - self.spin_s)
