"""A sensor on the bench's clock, as the bench loop runs it (its own module: the sensors' adapters and the loop
both need it, and neither should import the other)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiko.core.clock import Clock
from aiko.core.interfaces import Recorder


@dataclass
class SensorTask:
    """A sensor on the bench's clock: ``sample(t_s)`` returns one payload for ``channel`` (or None: nothing new).

    The F/T sensor and the camera join a run as one of these each (``record_bench_run(sensors=[...])``); their
    drivers live in ``aiko/devices/<device>/``, the adapter to a ``SensorTask`` in the bench."""

    name: str
    rate_hz: float
    channel: str
    sample: Callable[[float], dict[str, Any] | None] | None
    close: Callable[[], None] | None = None
    open: Callable[[], None] | None = None  # after the backend is configured (HIL: its emulators run), before t = 0
    summary: Callable[[], dict[str, Any]] | None = None  # into the run summary under "sensors"
    # after the run, with the plant's true rod states (run time, payload): the HIL camera films them offline
    finish: Callable[[list[tuple[float, dict[str, Any]]], Recorder, Clock], None] | None = None
