"""The experiment log writer: one MCAP file per run, JSON-schema channels, all stamps on the run's clock.

Crash safety: MCAP buffers messages in a chunk until the chunk is full. A recorder that only relied on the
chunk size would lose minutes of data to a SIGKILL. ``McapRecorder`` therefore closes the current chunk and
flushes it to the OS every ``flush_interval_s / 2`` (checked on every ``record`` call and by a small
background thread while the run is idle), so data reach the OS within ``flush_interval_s`` even when the
background check runs late. The OS keeps written pages across a killed process, so a SIGKILL loses less than
``flush_interval_s``; ``recover`` rewrites the readable prefix of a truncated file into a complete one.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import platform
import socket
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcap.writer import CompressionType, Writer

from aiko.log.encoding import encode, infer_schema, to_jsonable

log = logging.getLogger(__name__)

EVENTS_TOPIC = "/events"
RUN_METADATA_NAME = "aiko.run"
JSON_KEYS_FIELD = "_json_keys"
"""Metadata values are strings in MCAP; non-string values are JSON-encoded and their keys listed here."""

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"kind": {"type": "string"}},
    "required": ["kind"],
    "additionalProperties": True,
}


class LogWriteError(RuntimeError):
    """The log cannot be written (closed recorder, unwritable path, ...)."""


def software_version() -> str:
    try:
        from importlib.metadata import version

        return version("aiko-stack")
    except Exception:  # not installed as a distribution: running from a checkout
        return "0+checkout"


def encode_metadata(data: Mapping[str, Any]) -> dict[str, str]:
    """Dict of any JSON-able values → MCAP's str→str map (non-strings JSON-encoded and listed)."""
    out: dict[str, str] = {}
    json_keys = []
    for key, value in data.items():
        if isinstance(value, str):
            out[key] = value
        else:
            out[key] = json.dumps(to_jsonable(value, key), allow_nan=False)
            json_keys.append(key)
    if json_keys:
        out[JSON_KEYS_FIELD] = json.dumps(json_keys)
    return out


def decode_metadata(data: Mapping[str, str]) -> dict[str, Any]:
    json_keys = set(json.loads(data.get(JSON_KEYS_FIELD, "[]")))
    return {k: (json.loads(v) if k in json_keys else v) for k, v in data.items() if k != JSON_KEYS_FIELD}


class McapRecorder:
    """Recorder (``aiko.interfaces.Recorder``) writing an MCAP file; use as a context manager.

    ``record(channel, t_ns, payload)`` registers a JSON-schema channel on first use (schema inferred from the
    first payload unless declared with ``declare_channel``); ``event(kind, t_ns, **fields)`` writes to
    ``/events``. ``t_ns`` is the run's monotonic clock in int64 nanoseconds and becomes the MCAP log time.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        flush_interval_s: float = 0.5,
        *,
        compression: str = "zstd",
        chunk_size_bytes: int = 1024 * 1024,
        background_flush: bool = True,
    ) -> None:
        if not flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s}")
        compressions = {
            "zstd": CompressionType.ZSTD,
            "lz4": CompressionType.LZ4,
            "none": CompressionType.NONE,
        }
        if compression not in compressions:
            raise ValueError(f"compression {compression!r} not allowed; use one of {sorted(compressions)}")
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise LogWriteError(f"cannot open log {self.path} for writing: {exc}") from exc
        self._writer = Writer(self._file, chunk_size=chunk_size_bytes, compression=compressions[compression])
        self._writer.start(profile="", library=f"aiko-stack {software_version()}")
        self._lock = threading.Lock()
        self._channels: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self.flush_interval_s = float(flush_interval_s)
        self._flush_period_s = 0.5 * self.flush_interval_s
        self._last_flush_s = time.monotonic()
        self._pending = False
        self._closed = False
        self._stop = threading.Event()
        run_meta = {
            "software_version": software_version(),
            "python": sys.version.split()[0],
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "user": _user(),
            "wall_clock_start_utc": datetime.now(UTC).isoformat(),
            "wall_clock_start_ns": time.time_ns(),
            "monotonic_start_ns": time.monotonic_ns(),
            "clock": "time.monotonic_ns (int64 ns) unless the run says otherwise",
        }
        run_meta.update(metadata or {})
        self.add_metadata(RUN_METADATA_NAME, run_meta)
        self._declare(EVENTS_TOPIC, EVENT_SCHEMA, "aiko.Event")
        self._flusher: threading.Thread | None = None
        if background_flush:
            self._flusher = threading.Thread(target=self._flush_loop, name="mcap-flusher", daemon=True)
            self._flusher.start()

    # -- Recorder protocol
    def record(self, channel: str, t_ns: int, payload: Mapping[str, Any]) -> None:
        data = encode(payload)
        with self._lock:
            self._check_open()
            channel_id = self._channels.get(channel)
            if channel_id is None:
                channel_id = self._declare(channel, infer_schema(payload), _schema_name(channel))
            self._add(channel, channel_id, int(t_ns), data)

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        if "kind" in fields:
            raise ValueError("event field name 'kind' is reserved for the event kind")
        self.record(EVENTS_TOPIC, t_ns, {"kind": str(kind), **fields})
        log.debug("event %s at %d ns: %s", kind, t_ns, fields)

    # -- extras
    def declare_channel(self, channel: str, schema: Mapping[str, Any], schema_name: str | None = None) -> None:
        """Register a channel with an explicit JSON schema before its first message."""
        with self._lock:
            self._check_open()
            if channel in self._channels:
                raise ValueError(f"channel {channel!r} is already registered")
            self._declare(channel, dict(schema), schema_name or _schema_name(channel))

    def add_metadata(self, name: str, data: Mapping[str, Any]) -> None:
        """Write a metadata record (robot description, experiment file, calibration...). Flushed at once."""
        with self._lock:
            self._check_open()
            self._writer.add_metadata(name, encode_metadata(data))
            self._flush_locked()

    def add_attachment(self, name: str, data: bytes, media_type: str, t_ns: int = 0) -> None:
        """Attach a file (e.g. the experiment TOML, a calibration image)."""
        with self._lock:
            self._check_open()
            self._writer.add_attachment(
                create_time=t_ns, log_time=t_ns, name=name, media_type=media_type, data=bytes(data)
            )
            self._flush_locked()

    @property
    def message_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Finish the file (summary, indexes). Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            try:
                self._writer.finish()
            finally:
                self._file.close()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=2.0)
        log.info("log closed: %s (%s)", self.path, self._counts)

    def __enter__(self) -> McapRecorder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and not self._closed:
            try:
                self.event("log_closed_on_error", time.monotonic_ns(), error=f"{exc_type.__name__}: {exc}")
            except Exception:  # never mask the original error
                log.exception("could not record the error event")
        self.close()

    # -- internals
    def _check_open(self) -> None:
        if self._closed:
            raise LogWriteError(f"log {self.path} is closed")

    def _declare(self, channel: str, schema: dict[str, Any], schema_name: str) -> int:
        schema_id = self._writer.register_schema(
            name=schema_name, encoding="jsonschema", data=json.dumps(schema).encode()
        )
        channel_id = self._writer.register_channel(topic=channel, message_encoding="json", schema_id=schema_id)
        self._channels[channel] = channel_id
        self._counts[channel] = 0
        return channel_id

    def _add(self, channel: str, channel_id: int, t_ns: int, data: bytes) -> None:
        sequence = self._counts[channel]
        self._writer.add_message(channel_id=channel_id, log_time=t_ns, publish_time=t_ns, data=data, sequence=sequence)
        self._counts[channel] = sequence + 1
        self._pending = True
        if time.monotonic() - self._last_flush_s >= self._flush_period_s:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._writer.flush()
        self._last_flush_s = time.monotonic()
        self._pending = False

    def _flush_loop(self) -> None:
        period = self._flush_period_s / 4.0
        while not self._stop.wait(period):
            with self._lock:
                if self._closed:
                    return
                if self._pending and time.monotonic() - self._last_flush_s >= self._flush_period_s:
                    try:
                        self._flush_locked()
                    except Exception:  # disk full etc.: report, keep the run going
                        log.exception("periodic flush of %s failed", self.path)


def _schema_name(channel: str) -> str:
    return "aiko" + channel.replace("/", ".")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return ""
