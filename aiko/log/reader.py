"""Reading experiment logs back as numpy arrays, tolerant of files cut short by a crash.

The reader walks the file once, record by record, with the salvage scanner (``aiko.log.salvage``; it does not need
the summary at the end), so a log whose writer was killed is readable up to its last complete chunk and
``truncated`` says so. A message the file holds twice (a chunk written twice; same channel, sequence, log time and
bytes) is read once; ``duplicates`` counts them and says which chunks overlap which. A file damaged anywhere else
(a bad CRC, a bad length, a message on a channel the file never defines, an undecodable record) is refused with
one ``LogReadError`` naming the damage; ``aiko log recover`` salvages such a file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.core.events import EVENTS_TOPIC
from aiko.log.encoding import Decoder, payload_decoder, to_jsonable
from aiko.log.recorder import LOG_TIME_OFFSET_FIELD, RUN_METADATA_NAME, decode_metadata
from aiko.log.salvage import (
    AttachmentRecord,
    ChannelRecord,
    Duplicates,
    MessageRecord,
    MetadataRecord,
    SchemaRecord,
    find_duplicates,
    scan_bytes,
)

log = logging.getLogger(__name__)


class LogReadError(AikoError):
    """The file is not an MCAP experiment log or cannot be read."""


@dataclass(frozen=True)
class ChannelInfo:
    topic: str
    schema_name: str
    schema: dict[str, Any]
    message_encoding: str
    count: int
    first_t_ns: int | None
    last_t_ns: int | None

    @property
    def duration_s(self) -> float:
        if self.first_t_ns is None or self.last_t_ns is None:
            return 0.0
        return (self.last_t_ns - self.first_t_ns) * 1e-9

    @property
    def rate_hz(self) -> float:
        """Mean message rate (count − 1 intervals over the span); 0 for fewer than two messages."""
        return (self.count - 1) / self.duration_s if self.count > 1 and self.duration_s > 0 else 0.0


@dataclass(frozen=True)
class ChannelArrays:
    """One channel as arrays: ``t_ns`` (N,) int64 and one array per (flattened, dot-joined) payload field.

    Numeric scalars give (N,), fixed-length numeric lists (N, k) float64 (NaN where JSON had null), integers
    int64, booleans bool, strings a numpy str array; fields missing or ragged across messages give an object
    array of the raw values (None where missing).
    """

    topic: str
    t_ns: np.ndarray
    fields: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def t_s(self) -> np.ndarray:
        return self.t_ns.astype(np.float64) * 1e-9

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"channel {self.topic!r} has no field {name!r}; fields: {sorted(self.fields)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.fields

    def __len__(self) -> int:
        return len(self.t_ns)


@dataclass(frozen=True)
class Event:
    t_ns: int
    kind: str
    fields: dict[str, Any]


def require_log_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` if it names a non-empty regular file, else a ``LogReadError`` saying what it is."""
    path = Path(path)
    if path.is_dir():
        raise LogReadError(f"{path} is a directory, not a log file")
    if not path.is_file():
        raise LogReadError(f"log file {path} does not exist")
    if path.stat().st_size == 0:
        raise LogReadError(f"{path} is empty (0 bytes): not a readable MCAP log")
    return path


def _schema_dict(schema: SchemaRecord | None) -> dict[str, Any]:
    if schema is None or not schema.data:
        return {}
    try:
        out = json.loads(schema.data)
    except (ValueError, RecursionError):
        return {}
    return out if isinstance(out, dict) else {}


def printable(text: str) -> str:
    """``text`` on one line: names read from a damaged file may hold any character."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class LogReader:
    """All of one log in memory: channels, metadata, attachments and decoded messages in file order.

    Message stamps (``t_ns``) are on the run's clock, as the recorder was given them: the file's epoch log times
    minus the run's ``log_time_offset_ns`` (``epoch_ns`` converts back)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = require_log_file(path)
        self.truncated = False
        self.truncation_error = ""
        self.log_time_offset_ns = 0
        self.metadata: dict[str, dict[str, Any]] = {}
        self.attachments: dict[str, AttachmentRecord] = {}
        self._schemas: dict[int, SchemaRecord] = {}
        self._channels: dict[int, ChannelRecord] = {}
        self._messages: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._foreign: dict[str, list[int]] = {}  # log times of messages not in JSON (protobuf Foxglove views)
        self._decoders: dict[int, Decoder | None] = {}  # channel id -> file message to in-memory payload
        self._load()

    @classmethod
    def from_records(
        cls,
        channels: Mapping[str, Iterable[tuple[int, dict[str, Any]]]],
        events: Iterable[tuple[int, str, dict[str, Any]]] = (),
        name: str = "<memory>",
    ) -> LogReader:
        """A reader over a run kept in memory (``aiko.core.recording.MemoryRecorder``'s ``channels`` and ``events``),
        so the same analysis reads a run that wrote no log file (``aiko sweep``). Payloads are converted as the log
        stores them (numpy arrays to lists, NaN to null), so both readers give the same arrays."""
        reader = cls.__new__(cls)
        reader.path = Path(name)
        reader.truncated = False
        reader.truncation_error = ""
        reader.log_time_offset_ns = 0
        reader.duplicates = Duplicates()
        reader.metadata, reader.attachments, reader._schemas, reader._channels, reader._foreign = {}, {}, {}, {}, {}
        reader._decoders = {}
        reader._messages = {str(topic): [(t, to_jsonable(p)) for t, p in msgs] for topic, msgs in channels.items()}
        for t_ns, kind, fields in events:
            reader._messages.setdefault(EVENTS_TOPIC, []).append((t_ns, to_jsonable({"kind": kind, **fields})))
        return reader

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise LogReadError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        scan = scan_bytes(data)  # record by record; never raises, whatever the bytes (aiko.log.salvage)
        if not scan.magic or not (scan.records or scan.clean):
            raise LogReadError(f"{self.path} is not a readable MCAP log: {printable(scan.describe())}")
        self.duplicates = find_duplicates(scan)  # a chunk written twice: kept once, counted, reported
        damage: list[str] = []
        for index, record in enumerate(scan.records):
            if index in self.duplicates.indices:
                continue
            problem = self._take(record)
            if problem and len(damage) < 3:
                damage.append(problem)
        if scan.problems or damage:
            what = printable("; ".join([*(str(p) for p in scan.problems[:3]), *damage]))
            raise LogReadError(
                f"{self.path} is damaged ({what}); `aiko log recover {self.path}` writes its intact records "
                "to a new file"
            )
        offset = self.run_metadata.get(LOG_TIME_OFFSET_FIELD, 0)
        self.log_time_offset_ns = int(offset) if isinstance(offset, int) else 0
        if self.log_time_offset_ns:  # epoch log times back onto the run's clock (aiko.log.recorder)
            for topic, msgs in self._messages.items():
                self._messages[topic] = [(t - self.log_time_offset_ns, p) for t, p in msgs]
            for topic, times in self._foreign.items():
                self._foreign[topic] = [t - self.log_time_offset_ns for t in times]
        if self.duplicates.messages:
            log.warning(
                "%s holds %d duplicate messages, read once (%s)",
                self.path,
                self.duplicates.messages,
                printable("; ".join(self.duplicates.describe()[:3])),
            )
        if not scan.clean:
            self.truncated = True
            self.truncation_error = scan.describe()
            log.warning("%s is truncated (%s); read up to the last complete record", self.path, self.truncation_error)

    def _take(self, record: Any) -> str | None:
        """Keep one record; a description of what is wrong with it, or None."""
        if isinstance(record, SchemaRecord):
            known = self._schemas.setdefault(record.id, record)
            if known != record:
                return f"schema id {record.id} defined twice, differently"
        elif isinstance(record, ChannelRecord):
            known = self._channels.setdefault(record.id, record)
            if known != record:
                return f"channel id {record.id} defined twice, differently"
            if record.message_encoding == "json":
                self._messages.setdefault(record.topic, [])
            else:
                self._foreign.setdefault(record.topic, [])
        elif isinstance(record, MessageRecord):
            channel = self._channels.get(record.channel_id)
            if channel is None:
                return f"a message on channel id {record.channel_id}, which the file never defines"
            if channel.message_encoding != "json":  # Foxglove-schema views (protobuf) or a foreign channel:
                self._foreign[channel.topic].append(record.log_time)  # counted, not decoded
                return None
            try:
                payload = json.loads(record.data)
            except (ValueError, RecursionError):
                return f"an undecodable message on {channel.topic} at log time {record.log_time}"
            if record.channel_id not in self._decoders:
                self._decoders[record.channel_id] = payload_decoder(_schema_dict(self._schemas.get(channel.schema_id)))
            decode = self._decoders[record.channel_id]
            if decode is not None:  # declared vectors (objects per row) back to (k, n) lists, as written
                payload = decode(payload)
            self._messages[channel.topic].append((record.log_time, payload))
        elif isinstance(record, MetadataRecord):
            try:
                self.metadata[record.name] = decode_metadata(record.metadata)
            except (ValueError, TypeError, RecursionError):
                return f"undecodable metadata {record.name!r}"
        elif isinstance(record, AttachmentRecord):
            self.attachments[record.name] = record
        return None

    # -- queries
    @property
    def topics(self) -> list[str]:
        return sorted(self._messages)

    def channel_info(self) -> dict[str, ChannelInfo]:
        out = {}
        for channel in self._channels.values():
            schema = self._schemas.get(channel.schema_id)
            if channel.topic in self._messages:
                times = [t for t, _ in self._messages[channel.topic]]
            else:
                times = self._foreign.get(channel.topic, [])
            out[channel.topic] = ChannelInfo(
                topic=channel.topic,
                schema_name=schema.name if schema else "",
                schema=_schema_dict(schema),
                message_encoding=channel.message_encoding,
                count=len(times),
                first_t_ns=min(times) if times else None,
                last_t_ns=max(times) if times else None,
            )
        return out

    def time_range_ns(self) -> tuple[int, int] | None:
        times = [t for msgs in self._messages.values() for t, _ in msgs]
        return (min(times), max(times)) if times else None

    def messages(self, topic: str) -> list[tuple[int, dict[str, Any]]]:
        """(t_ns, payload) in log-time order (stable for equal stamps)."""
        if topic not in self._messages:
            raise LogReadError(f"log {self.path} has no channel {topic!r}; channels: {self.topics}")
        return sorted(self._messages[topic], key=lambda m: m[0])

    def iter_all(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """Every message of every channel, merged in log-time order."""
        merged = [(t, topic, p) for topic, msgs in self._messages.items() for t, p in msgs]
        merged.sort(key=lambda m: m[0])
        for t, topic, payload in merged:
            yield topic, t, payload

    def has(self, topic: str) -> bool:
        return bool(self._messages.get(topic))

    def channel(self, topic: str) -> ChannelArrays:
        msgs = self.messages(topic)
        t_ns = np.array([t for t, _ in msgs], dtype=np.int64)
        flat = [_flatten(p) for _, p in msgs]
        names: list[str] = []
        for row in flat:
            for name in row:
                if name not in names:
                    names.append(name)
        return ChannelArrays(topic, t_ns, {name: _column([row.get(name, _MISSING) for row in flat]) for name in names})

    def events(self, kind: str | None = None) -> list[Event]:
        if EVENTS_TOPIC not in self._messages:
            return []
        out = []
        for t, payload in self.messages(EVENTS_TOPIC):
            p = dict(payload)
            k = p.pop("kind", "")
            if kind is None or k == kind:
                out.append(Event(t, k, p))
        return out

    @property
    def run_metadata(self) -> dict[str, Any]:
        return self.metadata.get(RUN_METADATA_NAME, {})

    def epoch_ns(self, t_ns: int) -> int:
        """The Unix-epoch time (ns) of run-clock stamp ``t_ns``: its MCAP log time (0 offset in old logs)."""
        return int(t_ns) + self.log_time_offset_ns


_MISSING = object()


def _flatten(payload: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _column(values: list[Any]) -> np.ndarray:
    present = [v for v in values if v is not _MISSING]
    if len(present) == len(values) and values:
        kinds = {_kind(v) for v in values}
        if kinds == {"bool"}:
            return np.array(values, dtype=bool)
        if kinds == {"int"}:
            return np.array(values, dtype=np.int64)
        if kinds <= {"int", "float", "null"}:
            return np.array(values, dtype=np.float64)
        if kinds == {"str"}:
            return np.array(values, dtype=str)
        if kinds == {"list"}:
            lengths = {len(v) for v in values}
            inner = {_kind(x) for v in values for x in v}
            if len(lengths) == 1 and inner <= {"int", "float", "null"}:
                dtype = np.int64 if inner == {"int"} else np.float64
                return np.array(values, dtype=dtype).reshape(len(values), -1)
            if len(lengths) == 1 and inner == {"bool"}:
                return np.array(values, dtype=bool).reshape(len(values), -1)
            if len(lengths) == 1 and inner == {"str"}:
                return np.array(values, dtype=str).reshape(len(values), -1)
            if len(lengths) == 1 and inner and all(k == "list" for k in inner):
                try:
                    return np.array(values, dtype=np.float64)
                except (ValueError, TypeError):
                    pass
    column = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        column[i] = None if v is _MISSING else v
    return column


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if v is None:
        return "null"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    return "other"


def read_log(path: str | os.PathLike[str]) -> LogReader:
    return LogReader(path)
