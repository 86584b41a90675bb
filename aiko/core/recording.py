"""Recorders that are not files: an in-memory one for tests and tools, and a fan-out to several recorders."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from aiko.core.interfaces import Recorder


class MemoryRecorder:
    """Keeps every record in lists per channel: ``channels[name] -> [(t_ns, payload), ...]``."""

    def __init__(self) -> None:
        self.channels: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.metadata: dict[str, Any] = {}

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        self.channels[channel].append((t_ns, payload))

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
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
