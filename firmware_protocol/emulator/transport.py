"""The bus half of the emulated joint modules: a set of modules on a python-can bus, in lockstep or in real time.

The modules behind the bus are either the Python model of the firmware (`modules.EmulatedModules`) or the firmware
itself running in the AVR simulator (`firmware.FirmwareModules`); both satisfy `ModuleSet`, and this class drives
them the same way:
- lockstep: `step_to(t_s)` hands the frames already on the bus to the modules, then runs them up to t_s.
  Driven by a simulated clock this is deterministic and faster than real time (HIL on the `virtual` bus).
- real time: `start()` runs the same code in a thread paced by `time.monotonic_ns()`.
Every frame the modules send is stamped here (an epoch offset plus the modules' own time) and sent on the bus.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import can
import numpy as np

from firmware_protocol.emulator.config import EmulatorConfig
from firmware_protocol.emulator.plant import JointPlant

log = logging.getLogger(__name__)

# Ticks the real-time thread runs between two looks at the bus and at stop(): it catches up in batches this long
# (20 ms of module time), so a frame waits at most that long behind a backlog and stop() returns soon.
MAX_BATCH_TICKS = 20
# Sleep between two batches while catching up (at most 20 ms of module time each): ~5 % of a core left to others.
CATCH_UP_PAUSE_S = 0.0002


class ModuleSet(Protocol):
    """Joint modules as the transport sees them: frames in, time forward, frames out through ``emit``.

    ``tick`` counts controller periods (``dt_s``) since the modules started; ``run_ticks(target)`` runs them until
    ``tick == target``, sending what they send on the way through ``emit(frame_id, data, time_s)``."""

    config: EmulatorConfig
    plant: JointPlant
    tick: int
    dt_s: float
    emit: Callable[[int, bytes, float], None]

    @property
    def time_s(self) -> float: ...

    def handle_frame(self, msg: can.Message) -> None: ...

    def run_ticks(self, target: int) -> None: ...

    def counters(self) -> dict[str, Any]: ...

    def settle(self) -> None:
        """Let the frames handed over so far act (a real module hears them only when the bus delivers them)."""
        ...

    def close(self) -> None: ...


class BusTransport:
    """A set of joint modules (`ModuleSet`) on one python-can bus."""

    def __init__(self, bus: can.BusABC, modules: ModuleSet, *, timestamp_offset_s: float = 0.0) -> None:
        self.bus = bus
        self.modules = modules
        self.timestamp_offset_s = timestamp_offset_s
        self.frames_sent = 0
        self.frames_received = 0
        self.serial_garbage_lines = 0
        self.frame_hooks: list[Callable[[can.Message], None]] = []  # observers of every frame handled
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.failure: Exception | None = None  # why the real-time thread ended on its own, if it did
        # Real time only: how far the modules' clock fell behind the wall clock (a frame handled while they lag is
        # handled early in their time: gaps between references shrink), how often it was resynchronised, and where
        # module time 0 is on the monotonic clock (to put a watchdog trip beside the pty's read times).
        self.largest_lag_s = 0.0
        self.resyncs = 0
        self.origin_monotonic_s: float | None = None
        modules.emit = self._emit

    # ------------------------------------------------------------------ time
    @property
    def time_s(self) -> float:
        return self.modules.time_s

    @property
    def tick(self) -> int:
        return self.modules.tick

    @property
    def dt_s(self) -> float:
        return self.modules.dt_s

    @property
    def config(self) -> EmulatorConfig:
        return self.modules.config

    @property
    def plant(self) -> JointPlant:
        return self.modules.plant

    def plant_link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The plant's link poses between two batches of ticks. Why the lock: a compiled plant step may release the
        interpreter lock (``Snake3DHilPlant``'s does, so the run's other threads work while it integrates); in real
        time the ticks run in this transport's thread, and a pose read from the run's thread mid-step would mix
        two sub-steps' links."""
        with self._lock:
            return self.modules.plant.link_poses()

    def step_to(self, t_s: float) -> None:
        """Lockstep: handle the frames already on the bus at the current time, then run ticks up to t_s."""
        with self._lock:
            self.poll_bus()
            self.modules.run_ticks(math.floor(t_s * self.config.controller_rate_hz + 1e-6))

    def settle(self) -> None:
        """Lockstep: hand the frames waiting on the bus to the modules and let them act (see `ModuleSet.settle`):
        how a run makes sure its last DISABLE or an e-stop reached the modules before it goes on."""
        with self._lock:
            self.poll_bus()
            self.modules.settle()

    def poll_bus(self) -> int:
        """Handle every frame waiting on the bus (non-blocking); returns how many."""
        handled = 0
        while (msg := self.bus.recv(timeout=0)) is not None:
            self.handle_frame(msg)
            handled += 1
        return handled

    # ----------------------------------------------------------- frames
    def handle_frame(self, msg: can.Message) -> None:
        """A frame from the bus, handed to the modules at their current time."""
        with self._lock:
            self.frames_received += 1
            for hook in self.frame_hooks:
                hook(msg)
            self.modules.handle_frame(msg)

    def _emit(self, frame_id: int, data: bytes, time_s: float) -> None:
        msg = can.Message(
            arbitration_id=frame_id, data=data, is_extended_id=False, timestamp=self.timestamp_offset_s + time_s
        )
        self.bus.send(msg)
        self.frames_sent += 1

    # ------------------------------------------------------------- real time
    def start(self) -> None:
        """Run in a thread paced by the monotonic clock (real-time mode)."""
        if self._thread is not None:
            raise RuntimeError("emulator already running")
        # frames from other threads (slcan server, bridge) must not wait 5 ms for the GIL while ticks run
        self._previous_switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._previous_switch_interval, 0.0005))
        self._stop.clear()
        self._thread = threading.Thread(target=self._realtime_loop, name="aiko-joint-emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the real-time thread; it finishes the batch of ticks it is in (at most `MAX_BATCH_TICKS`)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            sys.setswitchinterval(self._previous_switch_interval)

    def close(self) -> None:
        """Stop the real-time thread and release the modules (a simulator process behind them ends)."""
        self.stop()
        self.modules.close()

    def __enter__(self) -> BusTransport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _realtime_loop(self) -> None:
        try:
            self._pace()
        except Exception as exc:  # e.g. the AVR simulator's process died: say so, and let the owner end the run
            log.error("the emulated modules stopped: %s", exc)
            self.failure = exc

    def _pace(self) -> None:
        modules = self.modules
        dt_s = modules.dt_s
        origin_ns = time.monotonic_ns() - int(modules.time_s * 1e9)
        self.timestamp_offset_s = time.time() - modules.time_s
        self.origin_monotonic_s = origin_ns / 1e9
        while not self._stop.is_set():
            next_tick_ns = origin_ns + int((modules.tick + 1) * dt_s * 1e9)
            remaining_s = (next_tick_ns - time.monotonic_ns()) / 1e9
            msg = self.bus.recv(timeout=max(remaining_s, 0.0))
            with self._lock:
                if msg is not None:
                    self.handle_frame(msg)
                    self.poll_bus()  # everything already queued arrived before the ticks we are about to run
                now_s = (time.monotonic_ns() - origin_ns) / 1e9
                target = math.floor(now_s * self.config.controller_rate_hz + 1e-6)
                self.largest_lag_s = max(self.largest_lag_s, now_s - modules.time_s)
                if target - modules.tick > 200:  # starved of CPU for > 0.2 s: resynchronise, don't replay history
                    log.warning("emulator fell %d ticks behind real time; skipping ahead", target - modules.tick)
                    origin_ns += int((target - modules.tick - 1) * dt_s * 1e9)
                    target = modules.tick + 1
                    self.resyncs += 1
                    self.origin_monotonic_s = origin_ns / 1e9
                behind = target - modules.tick
                modules.run_ticks(min(target, modules.tick + MAX_BATCH_TICKS))
            if behind > 1:
                # Catching up: let other threads have the GIL, and at --rt-priority (SCHED_FIFO) let the rest of the
                # machine run between batches too (sleep(0) yields to nothing of lower priority; a pty's bytes move
                # in a normal-priority kernel worker, which the PC's frames then wait for).
                time.sleep(CATCH_UP_PAUSE_S)

    # --------------------------------------------------------------- status
    def count_serial_garbage(self, lines: int = 1) -> None:
        """Malformed lines on the slcan line in front of this bus (counted beside the modules' own counters)."""
        with self._lock:
            self.serial_garbage_lines += lines

    def counters(self) -> dict[str, Any]:
        """JSON-able traffic counters: the modules', and the frames and serial garbage seen here."""
        with self._lock:
            out = self.modules.counters()
            out["serial_garbage_lines"] = self.serial_garbage_lines
            out["frames_sent"] = self.frames_sent
            if self.origin_monotonic_s is not None:
                out["largest_lag_s"] = round(self.largest_lag_s, 4)
                out["resyncs"] = self.resyncs
                out["origin_monotonic_s"] = round(self.origin_monotonic_s, 4)
            return out
