"""The run clock of an arm backend: the controller's own time (RTDE ``timestamp``).

On a real UR the controller's time follows the wall clock. The HIL emulator ticks its Cosserat plant inside each
controller period, and the rod integrates slower than real time, so its time runs slower than the wall; a loop
on the wall clock would then stream the base trajectory several times too fast *in the rod's time*. Following
the controller's time keeps the trajectory, the arm and the rod on one clock whatever the real-time factor
(the summary reports it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiko.core.clock import Clock
from aiko.core.errors import HardwareError


class ControllerClock(Clock):
    """Run time = controller time since the first reading; ``sleep_until`` polls the controller's time."""

    def __init__(self, controller_time_s: Callable[[], float], stall_timeout_s: float = 10.0) -> None:
        super().__init__()
        self._source = controller_time_s
        self.stall_timeout_s = stall_timeout_s
        self.zero_s = float(controller_time_s())
        self.wall_start = time.perf_counter()

    def now_s(self) -> float:
        return float(self._source()) - self.zero_s

    def sleep_until(self, t_s: float) -> None:
        last, last_change = self.now_s(), time.monotonic()
        while True:
            now = self.now_s()
            if now >= t_s - 1e-9:
                return
            if now != last:
                last, last_change = now, time.monotonic()
            elif time.monotonic() - last_change > self.stall_timeout_s:
                raise HardwareError(f"the controller's time stopped at {now:.3f} s for {self.stall_timeout_s:g} s")
            time.sleep(0.0002)
