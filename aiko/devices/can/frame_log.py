"""Every CAN frame of a run in python-can's own log formats, chosen by the file extension."""

from __future__ import annotations

import threading
from pathlib import Path

import can

from aiko.core.errors import ConfigError

SUPPORTED_LOG_SUFFIXES = (".asc", ".blf", ".log", ".csv", ".trc")


class LockedFrameLog(can.Listener):
    """A python-can writer shared by the Notifier thread (received frames) and the sender (sent frames)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = can.Logger(str(path))
        self._lock = threading.Lock()
        self.frames = 0
        self._closed = False

    def on_message_received(self, msg: can.Message) -> None:
        with self._lock:
            if not self._closed:
                self._writer.on_message_received(msg)
                self.frames += 1

    def stop(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._writer.stop()


def open_can_log(path: str | Path) -> LockedFrameLog:
    """Open a frame log; the suffix picks the format (.asc, .blf, .log, .csv, .trc)."""
    path = Path(path)
    if path.suffix.lower() not in SUPPORTED_LOG_SUFFIXES:
        raise ConfigError(
            f"--can-log {path}: unsupported extension {path.suffix or '(none)'}; "
            f"use one of {', '.join(SUPPORTED_LOG_SUFFIXES)}"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return LockedFrameLog(path)
    except OSError as exc:
        raise ConfigError(f"--can-log {path}: cannot open for writing: {exc.strerror or exc}") from None
