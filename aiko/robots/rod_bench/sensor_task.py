"""A sensor on the bench's clock, as the bench loop runs it (its own module: the sensors' adapters and the loop
both need it, and neither should import the other)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.clock import Clock
from aiko.core.interfaces import Recorder
from aiko.core.messages import Channel


@dataclass
class FinishedRun:
    """What a sensor's ``finish`` gets after the run, on the run's time: the HIL plant's true rod states (empty on
    a real bench) and the observed base poses (``/bench/observation`` ``base_alpha``)."""

    rod_states: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    base_poses: list[tuple[float, np.ndarray]] = field(default_factory=list)


@dataclass
class SensorTask:
    """A sensor on the bench's clock: ``sample(t_s)`` returns one payload for ``channel`` (or None: nothing new).

    The F/T sensor and the camera join a run as one of these each (``record_bench_run(sensors=[...])``); their
    drivers live in ``aiko/devices/<device>/``, the adapter to a ``SensorTask`` in the bench."""

    name: str
    rate_hz: float
    channel: Channel  # declared beside the sensor's message type (aiko.core.messages)
    sample: Callable[[float], dict[str, Any] | None] | None
    close: Callable[[], None] | None = None
    open: Callable[[], None] | None = None  # after the backend is configured (HIL: its emulators run), before t = 0
    summary: Callable[[], dict[str, Any]] | None = None  # into the run summary under "sensors"
    # before open, with the run's clock (a camera stamping frames on it from its own thread)
    open_with_clock: Callable[[Clock], None] | None = None
    # after the run, with what the run saw: the HIL camera films the plant's states, the real one its video
    finish: Callable[[FinishedRun, Recorder, Clock], None] | None = None
    # after the loop (the arm deactivated), before the backend closes, with what the run saw by then: `finish`'s
    # work may start in a background thread while the backend closes (HIL: ~1 s of ur_rtde's and the emulator's
    # waiting); `finish` still gets the final run and decides what it records
    start_finish: Callable[[FinishedRun, Clock], None] | None = None
    # before t = 0, with the run's clock and duration, where the backend writes records beside the loop as they are
    # made (HIL: the rod plant's side file): the live camera films the plant's states from it during the run
    follow: Callable[[Path, Clock, float], None] | None = None
