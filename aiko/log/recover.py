"""Recovery of a log whose writer died (SIGKILL, power cut): rewrite its readable prefix as a complete MCAP.

A killed writer leaves no summary, no footer and possibly half a chunk. Every record before that point is
intact (the recorder flushes whole chunks), so we stream records until the bytes stop making sense and write
them, in order, into a fresh file that any MCAP tool opens.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from mcap.records import Attachment, Channel, Message, Metadata, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

from aiko.errors import writing
from aiko.log.reader import _TRUNCATION_ERRORS, LogReadError, _describe, require_log_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryResult:
    source: Path
    output: Path
    was_truncated: bool
    messages: int
    channels: int
    bytes_dropped: int
    error: str


def recover(path: str | os.PathLike[str], output: str | os.PathLike[str] | None = None) -> RecoveryResult:
    """Write the intact prefix of ``path`` to ``output`` (default ``<stem>.recovered.mcap`` beside it)."""
    source = require_log_file(path)
    target = Path(output) if output is not None else source.with_name(source.stem + ".recovered.mcap")
    if target.resolve() == source.resolve():
        raise LogReadError("recover writes a new file; choose an --out different from the input")
    size = source.stat().st_size
    schemas: dict[int, int] = {}
    channels: dict[int, int] = {}
    n_messages = 0
    error = ""
    truncated = False
    good_offset = 0
    with open(source, "rb") as fin, writing(target), open(target, "wb") as fout:
        writer = Writer(fout, compression=CompressionType.ZSTD)
        writer.start(library="aiko-stack recover")
        pending_meta: list[Metadata] = []
        try:
            for record in StreamReader(fin, record_size_limit=1 << 31).records:
                if isinstance(record, Schema) and record.id not in schemas:
                    schemas[record.id] = writer.register_schema(record.name, record.encoding, record.data)
                elif isinstance(record, Channel) and record.id not in channels:
                    channels[record.id] = writer.register_channel(
                        record.topic,
                        record.message_encoding,
                        schemas.get(record.schema_id, 0),
                        dict(record.metadata),
                    )
                elif isinstance(record, Message):
                    writer.add_message(
                        channels[record.channel_id],
                        record.log_time,
                        record.data,
                        record.publish_time,
                        record.sequence,
                    )
                    n_messages += 1
                elif isinstance(record, Metadata):
                    pending_meta.append(record)
                    writer.add_metadata(record.name, dict(record.metadata))
                elif isinstance(record, Attachment):
                    writer.add_attachment(
                        record.create_time, record.log_time, record.name, record.media_type, record.data
                    )
                good_offset = fin.tell()
        except _TRUNCATION_ERRORS as exc:
            if not schemas and not pending_meta:
                target.unlink(missing_ok=True)
                raise LogReadError(f"{source} holds no readable MCAP records: {_describe(exc)}") from exc
            truncated = True
            error = f"{type(exc).__name__}: {exc}"
        writer.finish()
    # fin.tell() (BufferedReader) is the logical position just after the last complete record.
    dropped = max(0, size - good_offset) if truncated else 0
    log.info("recovered %d messages from %s into %s (truncated=%s)", n_messages, source, target, truncated)
    return RecoveryResult(source, target, truncated, n_messages, len(channels), dropped, error)
