"""Recorders that are not files: an in-memory one for tests and tools, and a fan-out to several recorders."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from aiko.core.events import encode_event
from aiko.core.interfaces import Recorder
from aiko.core.messages import message_of


class MemoryRecorder:
    """Keeps every record in lists per channel: ``channels[name] -> [(t_ns, payload), ...]``.

    Like the log file it takes only declared channels and event kinds and checks every payload against its
    declaration (:mod:`aiko.core.messages`, :mod:`aiko.core.events`), so a run kept in memory (tests, sweeps) fails
    where its log would."""

    def __init__(self) -> None:
        self.channels: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.metadata: dict[str, Any] = {}

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        message_of(channel).encode(payload, str(channel))
        self.channels[channel].append((t_ns, payload))

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        encode_event(kind, fields)
        self.events.append((t_ns, kind, fields))

    def event_kinds(self) -> list[str]:
        return [kind for _, kind, _ in self.events]


class FanOutRecorder:
    """Sends every record to several recorders (e.g. the log file and the live dashboard)."""

    def __init__(self, *recorders: Recorder) -> None:
        self.recorders = list(recorders)

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        for recorder in self.recorders:
            recorder.record(channel, t_ns, payload)

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        for recorder in self.recorders:
            recorder.event(kind, t_ns, **fields)
