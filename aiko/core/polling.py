"""Waiting for a condition on a device, in one place: the driver's handshakes and the e-stop confirmation."""

from __future__ import annotations

from collections.abc import Callable

POLL_PERIOD_S = 0.005
"""5 ms: a tenth of the shortest module feedback period worth waiting for, and short next to every timeout."""


def poll_until(
    condition: Callable[[], bool],
    timeout_s: float,
    wait: Callable[[float], None],
    *,
    period_s: float = POLL_PERIOD_S,
    first_wait: bool = False,
) -> bool:
    """True as soon as ``condition()`` holds, False after ``timeout_s``. ``wait(period_s)`` passes the time between
    looks: a sleep on hardware, one emulator step in a lockstep run (so it polls simulated, not wall, time)."""
    for _ in range(max(1, int(timeout_s / period_s))):
        if first_wait:
            wait(period_s)
        if condition():
            return True
        if not first_wait:
            wait(period_s)
    return False
