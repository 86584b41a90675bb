"""The dashboard's data, without Qt: a non-blocking recorder feeding bounded histories.

The control loop must never wait for a screen. ``LiveRecorder.record`` only appends to a bounded deque (an atomic
operation under the GIL, no lock, no Qt call); the GUI thread drains it at its own pace. If the GUI falls behind,
the oldest records are dropped and counted, never the loop's time.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiko.robots.aiko.joints import JointStatus


class LiveRecorder:
    """A Recorder for ``FanOutRecorder(log, live)``: never blocks, bounded memory."""

    def __init__(self, max_pending: int = 50_000) -> None:
        self._queue: collections.deque[tuple[str, int, dict[str, Any]]] = collections.deque(maxlen=max_pending)
        self._appended = 0
        self._taken = 0

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        self._queue.append((channel, t_ns, payload))
        self._appended += 1

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        self.record("/events", t_ns, {"kind": kind, **fields})

    def drain(self, limit: int = 100_000) -> list[tuple[str, int, dict[str, Any]]]:
        out = []
        for _ in range(limit):
            try:
                out.append(self._queue.popleft())
            except IndexError:
                break
        self._taken += len(out)
        return out

    @property
    def dropped(self) -> int:
        """Records the GUI never saw because it fell more than ``max_pending`` behind."""
        return max(0, self._appended - self._taken - len(self._queue))


class Ring:
    """Fixed-capacity time series: times (s) and rows of values.

    Every sample is stored twice (slots i and i + capacity), so the latest samples are always one contiguous
    slice: views cost no copy, however long the history (the display asks for them 25 times a second).
    """

    def __init__(self, capacity: int, width: int) -> None:
        self.capacity = capacity
        self.t = np.full(2 * capacity, np.nan)
        self.v = np.full((2 * capacity, width), np.nan)
        self.n = 0

    def append(self, t_s: float, values: Any) -> None:
        i = self.n % self.capacity
        row = np.asarray(values, dtype=np.float64).ravel()[: self.v.shape[1]]
        for slot in (i, i + self.capacity):
            self.t[slot] = t_s
            self.v[slot, :] = np.nan
            self.v[slot, : len(row)] = row
        self.n += 1

    def view(self, since_t_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The stored samples in time order (only those at or after ``since_t_s`` if given); no copy."""
        count = min(self.n, self.capacity)
        start = (self.n - count) % self.capacity
        t, v = self.t[start : start + count], self.v[start : start + count]
        if since_t_s is not None and count:
            first = int(np.searchsorted(t, since_t_s, side="left"))
            t, v = t[first:], v[first:]
        return t, v


ALARM_WORDS = ("fault", "watchdog", "stale", "estop", "emergency", "error", "lost", "diverged")
"""Event kinds containing one of these count as alarms (module_fault, can_error, mocap_connection_lost, ...)."""


@dataclass
class DashboardModel:
    """Histories for the panels: references vs measured per joint, tracked x–y path, module and bus health."""

    n_joints: int
    history_s: float = 30.0
    start_ns: int | None = None
    references: Ring = field(init=False)
    measured: Ring = field(init=False)
    path: Ring = field(init=False)
    status: np.ndarray = field(init=False)
    counts: collections.Counter = field(default_factory=collections.Counter)
    events: collections.deque = field(default_factory=lambda: collections.deque(maxlen=12))
    last_t_s: float = 0.0
    last_feedback_t_s: float | None = None
    alarms: int = 0
    occluded_samples: int = 0
    drive: dict[str, Any] | None = None  # the latest /drive/status of a driven run (aiko drive)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        n = self.n_joints
        self.references = Ring(int(self.history_s * 20) + 16, 2 * n)
        self.measured = Ring(int(self.history_s * 1000) + 16, 2 * n)
        self.path = Ring(int(self.history_s * 100) + 16, 2)
        self.status = np.zeros(n, dtype=np.int64)

    def t_s(self, t_ns: int) -> float:
        if self.start_ns is None:
            self.start_ns = t_ns
        return (t_ns - self.start_ns) * 1e-9

    def ingest(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        with self.lock:
            self.counts[channel] += 1
            if channel == "/events":
                if payload.get("kind") == "start" and self.start_ns is None:
                    self.start_ns = t_ns
                t = self.t_s(t_ns)
                kind = str(payload.get("kind", ""))
                if any(word in kind for word in ALARM_WORDS):
                    self.alarms += 1
                detail = {k: v for k, v in payload.items() if k != "kind"}
                self.events.append(f"{t:8.3f} s  {payload.get('kind', '?')}  {detail if detail else ''}")
                return
            t = self.t_s(t_ns)
            self.last_t_s = max(self.last_t_s, t)
            if channel == "/references":
                self.references.append(payload.get("t_s", t), [*payload["angle_h_rad"], *payload["angle_v_rad"]])
            elif channel == "/joint_feedback":
                self.last_feedback_t_s = t
                self.measured.append(payload.get("t_s", t), [*payload["angle_h_rad"], *payload["angle_v_rad"]])
                status = payload.get("status")
                if status is not None and len(status) == self.n_joints:
                    self.status = np.asarray(status, dtype=np.int64)
            elif channel == "/drive/status":
                self.drive = dict(payload)
            elif channel == "/mocap":
                position = payload.get("position_m")
                occluded = payload.get("occluded")
                if position is None:
                    return
                p = np.asarray(position, dtype=np.float64).reshape(-1, 3)[0]
                if (occluded is not None and bool(np.asarray(occluded).ravel()[0])) or not np.isfinite(p).all():
                    self.occluded_samples += 1
                    return  # a gap in the path, never a jump to the origin
                capture = payload.get("capture_t_ns")
                self.path.append(self.t_s(capture) if capture is not None else t, p[:2])

    def drive_line(self) -> str | None:
        """A driven run's steering state, as the terminal's status line says it."""
        d = self.drive
        if d is None:
            return None
        state = "INPUT LOST" if not d.get("input_ok", True) else "PAUSED" if d.get("paused") else "RUN"
        gait = str(d.get("gait", "?")) + ("…" if d.get("blending") else "")
        return (
            f"drive: {state}, {gait}, speed {d.get('speed', 0):+.2f} ({d.get('frequency_deg_s', 0):+.0f} deg/s), "
            f"turn {d.get('turn', 0):+.2f} ({d.get('turn_deg', 0):+.1f} deg)"
        )

    def feedback_age_s(self) -> float | None:
        """How long the joint modules have been silent, on the run's clock (bus health at a glance)."""
        return None if self.last_feedback_t_s is None else max(0.0, self.last_t_s - self.last_feedback_t_s)

    def health(self) -> list[str]:
        """One word per joint module from its status flags (what the operator must see at a glance)."""
        words = []
        for s in self.status:
            flags = JointStatus(int(s))
            if flags & JointStatus.FAULT:
                words.append("FAULT")
            elif flags & JointStatus.WATCHDOG:
                words.append("WATCHDOG")
            elif flags & JointStatus.SATURATED:
                words.append("SATURATED")
            elif flags & JointStatus.AT_LIMIT:
                words.append("LIMIT")
            elif flags & JointStatus.ENABLED:
                words.append("ok")
            else:
                words.append("off")
        return words
