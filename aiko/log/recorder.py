"""The experiment log writer: one MCAP file per run, JSON-schema channels, all stamps on the run's clock.

Schemas: every channel is declared beside its message type (:mod:`aiko.core.messages`), every event kind in
:mod:`aiko.core.events`; the recorder writes those declarations as the channels' schemas and encodes each record by
its declaration. It refuses (:class:`aiko.core.messages.SchemaError`) a channel that was not declared, a field that
was not declared, a missing field, a value of the wrong type, and an undeclared event kind: a log says what it holds.

Time: callers stamp records on the run's clock (``time.monotonic_ns`` based, which never jumps). The file's MCAP
log and publish times are Unix-epoch nanoseconds, so Foxglove and PlotJuggler place a run on its real date and two
runs line up by time: ``log_time = t_ns + log_time_offset_ns``, the offset (wall clock minus monotonic clock) taken
once when the recorder opens and stored in the ``aiko.run`` metadata. ``LogReader`` subtracts it again, so analysis
sees the run's clock; logs written before the offset existed have none and read as they always did.

Crash safety: MCAP buffers messages in a chunk until the chunk is full. A recorder that only relied on the
chunk size would lose minutes of data to a SIGKILL. ``McapRecorder``'s writer thread therefore closes the
current chunk and flushes it to the OS every ``flush_interval_s / 2`` (it wakes four times per period), so
data reach the OS within ``flush_interval_s`` even when the thread is scheduled late. The OS keeps written
pages across a killed process, so a SIGKILL loses less than ``flush_interval_s``; ``recover`` rewrites the
readable prefix of a truncated file into a complete one.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcap.writer import CompressionType, Writer

from aiko.core.errors import AikoError
from aiko.core.events import EVENT_SCHEMA_NAME, EVENTS_TOPIC, events_json_schema
from aiko.core.messages import Message, SchemaError, message_of
from aiko.core.provenance import provenance
from aiko.log.encoding import event_bytes, message_bytes, payload_decoder, schema_bytes, to_jsonable

log = logging.getLogger(__name__)

RUN_METADATA_NAME = "aiko.run"
LOG_TIME_OFFSET_FIELD = "log_time_offset_ns"
"""Run metadata key: MCAP log time (Unix epoch ns) minus the run-clock stamp the recorder was given."""
JSON_KEYS_FIELD = "_json_keys"
"""Metadata values are strings in MCAP; non-string values are JSON-encoded and their keys listed here."""


class LogWriteError(RuntimeError):
    """The log cannot be written (closed recorder, unwritable path, ...)."""


class LogOpenError(LogWriteError, AikoError):
    """The log file cannot be created (a directory, no permission, ...): a path the user can fix, so the CLI
    reports it as bad input (one line, exit 2) rather than as a failed run."""


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
    """Recorder (``aiko.core.interfaces.Recorder``) writing an MCAP file; use as a context manager.

    ``record(channel, t_ns, payload)`` writes a record on a declared channel (an :class:`aiko.core.messages.Channel`;
    its schema is registered on first use, or before with ``declare``); ``event(kind, t_ns, **fields)`` writes to
    ``/events``, whose schema (every declared kind) is in the file from the start. ``t_ns`` is the run's monotonic
    clock in int64 nanoseconds; the MCAP log time is that plus ``log_time_offset_ns`` (Unix epoch ns).

    The caller's thread only encodes the payload by its declaration (so a payload that does not match fails where
    it was recorded, and later changes to its arrays cannot alter the log) and appends it to a queue; a writer
    thread owns the MCAP writer, compresses chunks and flushes them. The control loop therefore never waits for
    compression or the disk (a chunk flush costs ~20 ms).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        flush_interval_s: float = 0.5,
        *,
        compression: str = "zstd",
        chunk_size_bytes: int = 1024 * 1024,
        foxglove_views: Any | None = None,
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
            self._file = open(self.path, "wb")  # noqa: SIM115 - closed by the writer thread
        except OSError as exc:
            raise LogOpenError(f"cannot open log {self.path} for writing: {exc}") from exc
        self._writer = Writer(self._file, chunk_size=chunk_size_bytes, compression=compressions[compression])
        facts = provenance()
        self._writer.start(profile="", library=f"aiko-stack {facts['software_version']}")
        self.flush_interval_s = float(flush_interval_s)
        self._flush_period_s = 0.5 * self.flush_interval_s
        self._lock = threading.Lock()  # caller side: channel table and counts
        self._channels: dict[str, Message | None] = {}  # topic -> its message type (None: /events)
        self._counts: dict[str, int] = {}
        self._ops: collections.deque[tuple[Any, ...]] = collections.deque()
        self._wake = threading.Event()
        self._closed = False
        self._error: BaseException | None = None
        self._channel_ids: dict[str, int] = {}  # writer-thread side
        self._view_counts: dict[str, int] = {}
        self._decoders: dict[str, Any] = {}
        self._views = foxglove_views  # aiko.log.foxglove_views.FoxgloveViews: Foxglove-schema channels beside ours
        self._view_topics: set[str] = {"/sim/link_poses", "/joint_feedback", "/mocap", "/sim/rod/centreline",
                                       "/sim/rod/base_wrench"}  # fmt: skip
        monotonic_start_ns = time.monotonic_ns()
        wall_start_ns = time.time_ns()
        self.log_time_offset_ns = wall_start_ns - monotonic_start_ns
        """Added to every record's ``t_ns`` to give its MCAP log time (Unix epoch ns); constant for the run."""
        run_meta = {
            **facts,
            "wall_clock_start_utc": datetime.now(UTC).isoformat(),
            "wall_clock_start_ns": wall_start_ns,
            "monotonic_start_ns": monotonic_start_ns,
            "clock": "time.monotonic_ns (int64 ns) unless the run says otherwise",
            LOG_TIME_OFFSET_FIELD: self.log_time_offset_ns,
        }
        run_meta.update(metadata or {})
        self._thread = threading.Thread(target=self._write_loop, name="mcap-writer", daemon=True)
        self._thread.start()
        atexit.register(self._close_at_exit)  # a recorder left open still gets its summary at interpreter exit
        self.add_metadata(RUN_METADATA_NAME, run_meta)
        with self._lock:
            self._channels[EVENTS_TOPIC] = None
            self._counts[EVENTS_TOPIC] = 0
            self._ops.append(("declare", EVENTS_TOPIC, events_json_schema(), EVENT_SCHEMA_NAME))

    # -- Recorder protocol
    def record(self, channel: str, t_ns: int, payload: Mapping[str, Any]) -> None:
        """Write ``payload`` on ``channel``, a declared :class:`aiko.core.messages.Channel` (a plain topic string, an
        undeclared field, a missing field or a wrong type: :class:`SchemaError`, nothing written)."""
        if channel == EVENTS_TOPIC:
            raise SchemaError(f"{EVENTS_TOPIC} takes events: recorder.event(kind, t_ns, **fields)")
        data = message_bytes(channel, payload)
        self._append(str(channel), message_of(channel), int(t_ns), data)

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        """Write an event of a kind declared in :mod:`aiko.core.events`, with that kind's fields."""
        data = event_bytes(str(kind), fields)
        self._append(EVENTS_TOPIC, None, int(t_ns), data)
        log.debug("event %s at %d ns: %s", kind, t_ns, fields)

    def _append(self, topic: str, message: Message | None, t_ns: int, data: bytes) -> None:
        with self._lock:
            self._check_open()
            self._declare_locked(topic, message)
            sequence = self._counts.get(topic, 0)
            self._counts[topic] = sequence + 1
            self._ops.append(("message", topic, t_ns, data, sequence))

    def _declare_locked(self, topic: str, message: Message | None) -> None:
        if topic in self._channels:
            known = self._channels[topic]
            if known is not message and (known is None or message is None or known.name != message.name):
                raise SchemaError(
                    f"channel {topic!r} is already in this log as {known.name if known else 'events'}; "
                    f"{message.name if message else 'events'} needs a topic of its own"
                )
            return
        assert message is not None  # /events is declared when the recorder opens
        self._channels[topic] = message
        self._counts.setdefault(topic, 0)
        self._ops.append(("declare", topic, message.json_schema(), message.name))

    # -- extras
    def declare(self, channel: str) -> None:
        """Register a declared channel before its first message (it is in the file even if nothing is recorded)."""
        message = message_of(channel)
        with self._lock:
            self._check_open()
            self._declare_locked(str(channel), message)

    def add_metadata(self, name: str, data: Mapping[str, Any]) -> None:
        """Write a metadata record (robot description, experiment file, calibration...); on disk on return."""
        encoded = encode_metadata(data)
        with self._lock:
            self._check_open()
            self._ops.append(("metadata", name, encoded))
        self.flush()

    def add_attachment(self, name: str, data: bytes, media_type: str, t_ns: int = 0) -> None:
        """Attach a file (e.g. the experiment TOML, a calibration image); on disk on return."""
        with self._lock:
            self._check_open()
            self._ops.append(("attachment", name, bytes(data), media_type, int(t_ns)))
        self.flush()

    @property
    def message_counts(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self._counts.items() if v}

    def flush(self, timeout_s: float = 30.0) -> None:
        """Block until everything recorded so far is written and handed to the OS."""
        done = threading.Event()
        with self._lock:
            if self._closed:
                return
            self._ops.append(("flush", done))
        self._wake.set()
        if not done.wait(timeout_s):
            raise LogWriteError(f"log {self.path}: the writer did not flush within {timeout_s} s")
        self._raise_writer_error()

    def close(self) -> None:
        """Write what is queued, then the summary and indexes. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._ops.append(("close",))
        self._wake.set()
        self._thread.join()
        atexit.unregister(self._close_at_exit)
        log.info("log closed: %s (%s)", self.path, self._counts)
        self._raise_writer_error()

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except Exception:  # at exit there is no one left to tell but the log
            log.exception("closing %s at exit failed", self.path)

    def __enter__(self) -> McapRecorder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and not self._closed:
            try:
                self.event("log_closed_on_error", time.monotonic_ns(), error=f"{exc_type.__name__}: {exc}")
            except Exception:  # never mask the original error
                log.exception("could not record the error event")
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # the run's own error is the one to report
            log.exception("closing the log after an error failed")

    # -- caller side internals
    def _check_open(self) -> None:
        if self._closed:
            raise LogWriteError(f"log {self.path} is closed")
        self._raise_writer_error()

    def _raise_writer_error(self) -> None:
        if self._error is not None:
            raise LogWriteError(f"writing log {self.path} failed: {self._error}") from self._error

    # -- writer thread
    def _write_loop(self) -> None:
        last_flush = time.monotonic()
        pending = False
        while True:
            self._wake.wait(self._flush_period_s / 4.0)
            self._wake.clear()
            try:
                while self._ops:
                    op = self._ops.popleft()
                    kind = op[0]
                    if kind == "message":
                        _, channel, t_ns, data, sequence = op
                        epoch_ns = t_ns + self.log_time_offset_ns
                        self._writer.add_message(
                            channel_id=self._channel_ids[channel],
                            log_time=epoch_ns,
                            publish_time=epoch_ns,
                            data=data,
                            sequence=sequence,
                        )
                        if self._views is not None and channel in self._view_topics:
                            try:
                                self._write_views(channel, epoch_ns, data)
                            except Exception:  # a view is a convenience: the log itself goes on without it
                                log.exception("Foxglove view of %s failed; no more views in %s", channel, self.path)
                                self._views = None
                        pending = True
                    elif kind == "declare":
                        _, channel, schema, schema_name = op
                        self._decoders[channel] = payload_decoder(schema)
                        schema_id = self._writer.register_schema(
                            name=schema_name, encoding="jsonschema", data=schema_bytes(schema)
                        )
                        self._channel_ids[channel] = self._writer.register_channel(
                            topic=channel, message_encoding="json", schema_id=schema_id
                        )
                    elif kind == "metadata":
                        self._writer.add_metadata(op[1], op[2])
                        pending = True
                    elif kind == "attachment":
                        _, name, data, media_type, t_ns = op
                        self._writer.add_attachment(
                            create_time=t_ns, log_time=t_ns, name=name, media_type=media_type, data=data
                        )
                        pending = True
                    elif kind == "flush":
                        self._writer.flush()
                        last_flush, pending = time.monotonic(), False
                        op[1].set()
                    elif kind == "close":
                        self._writer.finish()
                        self._file.close()
                        return
                if pending and time.monotonic() - last_flush >= self._flush_period_s:
                    self._writer.flush()
                    last_flush, pending = time.monotonic(), False
            except BaseException as exc:  # disk full, ...: keep the error for the caller, release waiters
                log.exception("writing %s failed", self.path)
                self._error = exc
                while self._ops:
                    op = self._ops.popleft()
                    if op[0] == "flush":
                        op[1].set()
                try:
                    self._file.close()
                except OSError:
                    pass
                return

    def _write_views(self, channel: str, epoch_ns: int, data: bytes) -> None:
        """The Foxglove-schema messages derived from one of our records, on their own protobuf channels."""
        payload = json.loads(data)
        decode = self._decoders.get(channel)
        if decode is not None:
            payload = decode(payload)  # the record as its writer had it in memory (vectors as (k, n) lists)
        for topic, message in self._views.messages(channel, epoch_ns, payload):
            if topic not in self._channel_ids:
                schema = type(message).get_schema()
                schema_id = self._writer.register_schema(
                    name=schema.name, encoding=schema.encoding, data=bytes(schema.data)
                )
                self._channel_ids[topic] = self._writer.register_channel(
                    topic=topic, message_encoding=schema.encoding, schema_id=schema_id
                )
            sequence = self._view_counts.get(topic, 0)
            self._view_counts[topic] = sequence + 1
            self._writer.add_message(
                channel_id=self._channel_ids[topic],
                log_time=epoch_ns,
                publish_time=epoch_ns,
                data=message.encode(),
                sequence=sequence,
            )
