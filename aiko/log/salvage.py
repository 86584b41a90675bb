"""A record-by-record MCAP scanner that survives any damage: what ``aiko log recover`` and ``aiko log info`` use
when a file is not a clean (or cleanly truncated) MCAP.

Why hand-written: mcap's ``StreamReader`` (and ``make_reader``) stop, or raise whatever the bytes provoke
(``KeyError`` for a message on an unknown channel, ``OverflowError`` for a flipped chunk length,
``UnicodeDecodeError`` for a flipped schema name), at the first damaged byte; nothing in the library skips a bad
record and carries on. This scanner parses every record with bounds checks, verifies chunk and attachment CRCs,
and after a damaged record *resynchronises*: it looks for the next offset where a complete, well-formed record
starts. It only reads; the repaired file is written with mcap's own ``Writer`` (``aiko.log.recover``).

Records (MCAP spec, all little-endian; str = u32 length + UTF-8, map = u32 byte length + str pairs):
  0x01 Header, 0x02 Footer, 0x03 Schema, 0x04 Channel, 0x05 Message, 0x06 Chunk, 0x09 Attachment,
  0x0C Metadata, 0x0F DataEnd; the index and statistics records of the summary are skipped.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_ATTACHMENT, OP_METADATA, OP_DATA_END = 0x09, 0x0C, 0x0F
KNOWN_OPS = frozenset(range(0x01, 0x10))
# a record worth resynchronising on: the data-carrying ones (and the two that end the data section)
_RESYNC = re.compile(rb"[\x02\x03\x04\x05\x06\x09\x0c\x0f][\x00-\xff]{5}\x00\x00\x00", re.S)
_MAX_CHUNK_BYTES = 1 << 30  # a flipped uncompressed_size must not make us allocate terabytes
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


class _Bad(Exception):
    """A record that is not well formed."""


class _Cursor:
    def __init__(self, data: bytes | memoryview, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise _Bad(f"field of {n} bytes runs past its record")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def u16(self) -> int:
        return _U16.unpack(self.take(2))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def string(self) -> str:
        raw = self.take(self.u32())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad("string is not UTF-8") from None

    def blob32(self) -> bytes:
        return self.take(self.u32())

    def blob64(self) -> bytes:
        return self.take(self.u64())

    def string_map(self) -> dict[str, str]:
        length = self.u32()
        inner = _Cursor(self.data, self.pos, self.pos + length)
        if inner.end > self.end:
            raise _Bad("map runs past its record")
        out = {}
        while inner.pos < inner.end:
            key = inner.string()
            out[key] = inner.string()
        self.pos = inner.end
        return out

    def done(self) -> None:
        if self.pos != self.end:
            raise _Bad(f"{self.end - self.pos} unexplained bytes at the end of the record")


@dataclass
class SchemaRecord:
    id: int
    name: str
    encoding: str
    data: bytes


@dataclass
class ChannelRecord:
    id: int
    schema_id: int
    topic: str
    message_encoding: str
    metadata: dict[str, str]


@dataclass
class MessageRecord:
    channel_id: int
    sequence: int
    log_time: int
    publish_time: int
    data: bytes


@dataclass
class MetadataRecord:
    name: str
    metadata: dict[str, str]


@dataclass
class AttachmentRecord:
    log_time: int
    create_time: int
    name: str
    media_type: str
    data: bytes


@dataclass
class Problem:
    offset: int
    what: str

    def __str__(self) -> str:
        return f"byte {self.offset}: {self.what}"


@dataclass(frozen=True)
class ChunkSpan:
    """Which of a scan's records came out of one chunk: ``records[first:end]``, the chunk at byte ``offset``."""

    offset: int
    first: int
    end: int


@dataclass
class Scan:
    """Everything intact in a file, in file order, and what was wrong with the rest."""

    size: int
    records: list[Any] = field(default_factory=list)  # Schema/Channel/Message/Metadata/Attachment records
    chunks: list[ChunkSpan] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    bytes_skipped: int = 0  # bytes of damaged records and garbage passed over
    truncated_at: int | None = None  # the file ends inside a record (a writer cut off) at this offset
    footer: bool = False
    magic: bool = True

    @property
    def clean(self) -> bool:
        """A complete, undamaged MCAP."""
        return self.magic and self.footer and not self.problems and self.truncated_at is None

    @property
    def only_truncated(self) -> bool:
        """Intact up to where it stops (a killed writer), nothing damaged before that."""
        return self.magic and not self.problems

    def describe(self) -> str:
        parts = [str(p) for p in self.problems[:3]]
        if len(self.problems) > 3:
            parts.append(f"and {len(self.problems) - 3} more")
        if self.truncated_at is not None:
            parts.append(f"ends inside a record at byte {self.truncated_at} ({self.size - self.truncated_at} bytes)")
        elif not self.footer:
            parts.append("no footer")
        return "; ".join(parts) or "intact"


def _parse(op: int, body: _Cursor, offset: int, scan: Scan, *, in_chunk: bool) -> None:
    """Parse one record's body and append what it carries; _Bad if it is not well formed."""
    if op == OP_SCHEMA:
        record = SchemaRecord(body.u16(), body.string(), body.string(), body.blob32())
        body.done()
        if record.id == 0:
            raise _Bad("schema id 0 is reserved")
        scan.records.append(record)
    elif op == OP_CHANNEL:
        record = ChannelRecord(body.u16(), body.u16(), body.string(), body.string(), body.string_map())
        body.done()
        scan.records.append(record)
    elif op == OP_MESSAGE:
        channel_id, sequence, log_time, publish_time = body.u16(), body.u32(), body.u64(), body.u64()
        scan.records.append(MessageRecord(channel_id, sequence, log_time, publish_time, body.take(body.end - body.pos)))
    elif in_chunk:
        raise _Bad(f"opcode 0x{op:02X} cannot appear inside a chunk")
    elif op == OP_CHUNK:
        _parse_chunk(body, offset, scan)
    elif op == OP_METADATA:
        record = MetadataRecord(body.string(), body.string_map())
        body.done()
        scan.records.append(record)
    elif op == OP_ATTACHMENT:
        start = body.pos
        log_time, create_time = body.u64(), body.u64()
        name, media_type = body.string(), body.string()
        data = body.blob64()
        covered = bytes(body.data[start : body.pos])
        crc = body.u32()
        body.done()
        if crc != 0 and zlib.crc32(covered) != crc:
            raise _Bad(f"attachment {name!r}: CRC mismatch")
        scan.records.append(AttachmentRecord(log_time, create_time, name, media_type, data))
    elif op == OP_HEADER:
        body.string(), body.string()
        body.done()
    elif op == OP_FOOTER:
        body.u64(), body.u64(), body.u32()
        body.done()
        scan.footer = True
    # DataEnd, indexes, statistics, summary offsets: nothing to keep


def _parse_chunk(body: _Cursor, offset: int, scan: Scan) -> None:
    body.u64(), body.u64()
    size, crc = body.u64(), body.u32()
    compression = body.string()
    compressed = body.blob64()
    body.done()
    if size > _MAX_CHUNK_BYTES:
        raise _Bad(f"chunk claims {size} uncompressed bytes")
    try:
        if compression == "":
            records = compressed
        elif compression == "zstd":
            import zstandard

            records = zstandard.ZstdDecompressor().decompress(compressed, max_output_size=size)
        elif compression == "lz4":
            import lz4.frame

            records = lz4.frame.decompress(compressed)
        else:
            raise _Bad(f"unknown chunk compression {compression[:20]!r}")
    except _Bad:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a damaged stream makes the decompressor raise
        raise _Bad(f"chunk does not decompress ({type(exc).__name__})") from None
    if len(records) != size:
        raise _Bad(f"chunk decompresses to {len(records)} bytes, its header says {size}")
    if crc != 0 and zlib.crc32(records) != crc:
        raise _Bad("chunk CRC mismatch")
    inner = Scan(size=len(records))
    _walk(records, 0, inner, in_chunk=True)
    scan.chunks.append(ChunkSpan(offset, len(scan.records), len(scan.records) + len(inner.records)))
    scan.records.extend(inner.records)
    for problem in inner.problems:
        scan.problems.append(Problem(offset, f"inside the chunk: {problem}"))
    if inner.truncated_at is not None:
        scan.problems.append(Problem(offset, "a chunk's last record is cut short"))


def _record_at(data: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """(opcode, end) of a record header at pos that fits in the data, else None."""
    if pos + 9 > len(data):
        return None
    op = data[pos]
    length = _U64.unpack_from(data, pos + 1)[0]
    end = pos + 9 + length
    if op not in KNOWN_OPS or end > len(data):
        return None
    return op, end


def _try(data, pos: int, scan: Scan, *, in_chunk: bool) -> int | None:
    """Parse the record at pos into scan; its end, or None (scan unchanged) if it is not a whole good record."""
    found = _record_at(data, pos)
    if found is None:
        return None
    op, end = found
    trial = Scan(size=scan.size)
    try:
        _parse(op, _Cursor(data, pos + 9, end), pos, trial, in_chunk=in_chunk)
    except _Bad:
        return None
    base = len(scan.records)
    scan.chunks.extend(ChunkSpan(c.offset, c.first + base, c.end + base) for c in trial.chunks)
    scan.records.extend(trial.records)
    scan.problems.extend(trial.problems)
    scan.footer = scan.footer or trial.footer
    return end


def _walk(data, pos: int, scan: Scan, *, in_chunk: bool) -> None:
    size = len(data)
    while pos < size:
        end = _try(data, pos, scan, in_chunk=in_chunk)
        if end is not None:
            pos = end
            if scan.footer and not in_chunk and data[pos:] == MAGIC:
                return  # the closing magic after the footer
            continue
        # damaged here: what follows is either more damage, good records, or the cut-off end of the file
        bad_at = pos
        found = _RESYNC.search(data, pos + 1)
        resumed = None
        while found is not None:
            resumed = _try(data, found.start(), scan, in_chunk=in_chunk)
            if resumed is not None:
                break
            found = _RESYNC.search(data, found.start() + 1)
        if resumed is None:
            if _plausible_cut(data, bad_at):
                scan.truncated_at = bad_at
            else:
                scan.problems.append(Problem(bad_at, "undecodable bytes up to the end of the file"))
            scan.bytes_skipped += size - bad_at
            return
        skipped = found.start() - bad_at
        scan.bytes_skipped += skipped
        scan.problems.append(Problem(bad_at, f"{skipped} damaged bytes skipped ({_why(data, bad_at, in_chunk)})"))
        pos = resumed


def _plausible_cut(data, pos: int) -> bool:
    """A record header at pos whose length runs past the end: what a killed writer leaves."""
    if pos + 9 > len(data):
        return True
    return data[pos] in KNOWN_OPS and pos + 9 + _U64.unpack_from(data, pos + 1)[0] > len(data)


def _why(data, pos: int, in_chunk: bool) -> str:
    if pos + 9 > len(data):
        return "record header cut short"
    op = data[pos]
    length = _U64.unpack_from(data, pos + 1)[0]
    if op not in KNOWN_OPS:
        return f"unknown opcode 0x{op:02X}"
    if pos + 9 + length > len(data):
        return f"record length {length} runs past the end"
    trial = Scan(size=len(data))
    try:
        _parse(op, _Cursor(data, pos + 9, pos + 9 + length), pos, trial, in_chunk=in_chunk)
    except _Bad as exc:
        return f"opcode 0x{op:02X}: {exc}"
    return f"opcode 0x{op:02X}"


@dataclass
class Duplicates:
    """Messages a file holds more than once (a chunk written twice, a copy gone wrong): same channel, sequence and
    log time, and the same bytes. Duplicates are not data: readers keep the first and count the rest.

    The bytes are part of the key because a writer that leaves every sequence at 0 may log two different messages
    on one channel at one time; a repeated chunk repeats them byte for byte."""

    indices: set[int] = field(default_factory=set)  # of the scan's records that repeat an earlier one
    repeats: dict[int, dict[int, int]] = field(default_factory=dict)  # chunk offset -> {earlier chunk offset: n}

    @property
    def messages(self) -> int:
        return len(self.indices)

    def describe(self) -> list[str]:
        """One phrase per chunk that overlaps an earlier one (or per group of loose records)."""
        out = []
        for offset, sources in self.repeats.items():
            where = f"the chunk at byte {offset}" if offset >= 0 else "records outside chunks"
            for source, n in sources.items():
                earlier = f"the chunk at byte {source}" if source >= 0 else "records outside chunks"
                out.append(f"{where} repeats {n} messages of {earlier}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "overlapping_chunks": self.describe()}


def find_duplicates(scan: Scan) -> Duplicates:
    """The messages of ``scan`` that repeat an earlier one, and which chunks overlap which (see ``Duplicates``)."""
    chunk_of = {}
    for span in scan.chunks:
        for index in range(span.first, span.end):
            chunk_of[index] = span.offset
    first_seen: dict[tuple[int, int, int], dict[bytes, int]] = {}  # key -> {bytes: chunk offset of the first}
    found = Duplicates()
    for index, record in enumerate(scan.records):
        if not isinstance(record, MessageRecord):
            continue
        where = chunk_of.get(index, -1)
        seen = first_seen.setdefault((record.channel_id, record.sequence, record.log_time), {})
        earlier = seen.get(record.data)
        if earlier is None:
            seen[record.data] = where
        else:
            found.indices.add(index)
            counts = found.repeats.setdefault(where, {})
            counts[earlier] = counts.get(earlier, 0) + 1
    return found


def scan_bytes(data: bytes) -> Scan:
    """Every intact record of an MCAP file's bytes, in order; never raises on any input."""
    scan = Scan(size=len(data))
    if data[: len(MAGIC)] == MAGIC:
        start = len(MAGIC)
    else:
        scan.magic = False
        scan.problems.append(Problem(0, "no MCAP magic at the start"))
        start = 0
    _walk(bytes(data), start, scan, in_chunk=False)
    return scan


def decodable_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True
