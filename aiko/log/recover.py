"""Recovery of a damaged log: every intact record rewritten, in order, as a complete MCAP.

A killed writer (SIGKILL, power cut) leaves no summary, no footer and possibly half a chunk; a bad disk or a copy
gone wrong flips bits anywhere: in a chunk, in a record length, in a schema name. ``recover`` reads the file with
the salvage scanner (``aiko.log.salvage``: record by record, CRC-checked, resynchronising after damage), keeps every
record that is whole and consistent (a message needs a channel defined somewhere in the file and, on a JSON channel,
a payload that parses; a message the file holds twice, as after a chunk written twice, is written once), and writes
them with mcap's ``Writer`` to a temporary file beside the output, renamed into place only when complete: a failed
recover never leaves a half-written output. What was dropped is reported.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mcap.writer import CompressionType, Writer

from aiko.core.errors import writing
from aiko.log.reader import LogReadError, printable, require_log_file
from aiko.log.recorder import decode_metadata
from aiko.log.salvage import (
    AttachmentRecord,
    ChannelRecord,
    MessageRecord,
    MetadataRecord,
    SchemaRecord,
    decodable_json,
    find_duplicates,
    scan_bytes,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryResult:
    source: Path
    output: Path
    was_truncated: bool  # anything missing or damaged (no footer, a cut-off end, damaged records)
    messages: int
    channels: int
    bytes_dropped: int
    error: str  # what was wrong, one line ("" for an intact file)
    dropped: dict[str, int] = field(default_factory=dict)  # records dropped, by reason


def recover(path: str | os.PathLike[str], output: str | os.PathLike[str] | None = None) -> RecoveryResult:
    """Write every intact record of ``path`` to ``output`` (default ``<stem>.recovered.mcap`` beside it)."""
    source = require_log_file(path)
    target = Path(output) if output is not None else source.with_name(source.stem + ".recovered.mcap")
    if target.resolve() == source.resolve():
        raise LogReadError("recover writes a new file; choose an --out different from the input")
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise LogReadError(f"cannot read {source}: {exc.strerror or exc}") from None
    scan = scan_bytes(data)
    if not scan.records:
        raise LogReadError(f"{source} holds no readable MCAP records: {printable(scan.describe())}")
    duplicates = find_duplicates(scan)  # a chunk written twice: its messages are written once

    dropped: dict[str, int] = {}

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    # the first definition of an id wins (the summary repeats them; a damaged repeat must not override)
    channels: dict[int, ChannelRecord] = {}
    schemas: dict[int, SchemaRecord] = {}
    for r in scan.records:
        table = channels if isinstance(r, ChannelRecord) else schemas if isinstance(r, SchemaRecord) else None
        if table is None:
            continue
        if r.id not in table:
            table[r.id] = r
        elif table[r.id] != r:
            drop(f"conflicting redefinition of {'channel' if table is channels else 'schema'} id {r.id}")
    if not channels and not any(isinstance(r, (MetadataRecord, AttachmentRecord)) for r in scan.records):
        raise LogReadError(f"{source} holds no intact channel or metadata record: {printable(scan.describe())}")

    n_messages = 0
    with writing(target):
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fout:
                writer = Writer(fout, compression=CompressionType.ZSTD)
                writer.start(library="aiko-stack recover")
                schema_ids: dict[int, int] = {}
                channel_ids: dict[int, int] = {}

                def schema_id(old: int) -> int:
                    if old == 0 or old not in schemas:
                        return 0
                    if schemas[old].encoding == "jsonschema" and not decodable_json(schemas[old].data):
                        drop(f"undecodable schema {printable(schemas[old].name)!r}")
                        del schemas[old]
                        return 0
                    if old not in schema_ids:
                        s = schemas[old]
                        schema_ids[old] = writer.register_schema(s.name, s.encoding, s.data)
                    return schema_ids[old]

                for index, record in enumerate(scan.records):
                    if isinstance(record, MessageRecord):
                        if index in duplicates.indices:
                            drop("duplicate message")
                            continue
                        channel = channels.get(record.channel_id)
                        if channel is None:
                            drop(f"message on unknown channel id {record.channel_id}")
                            continue
                        if channel.message_encoding == "json" and not decodable_json(record.data):
                            drop(f"undecodable message on {printable(channel.topic)}")
                            continue
                        if record.channel_id not in channel_ids:
                            channel_ids[record.channel_id] = writer.register_channel(
                                channel.topic, channel.message_encoding, schema_id(channel.schema_id), channel.metadata
                            )
                        writer.add_message(
                            channel_ids[record.channel_id],
                            record.log_time,
                            record.data,
                            record.publish_time,
                            record.sequence,
                        )
                        n_messages += 1
                    elif isinstance(record, ChannelRecord) and record.id not in channel_ids:
                        first = channels[record.id]
                        channel_ids[record.id] = writer.register_channel(
                            first.topic, first.message_encoding, schema_id(first.schema_id), first.metadata
                        )
                    elif isinstance(record, MetadataRecord):
                        try:
                            decode_metadata(record.metadata)  # the values this project stores are JSON
                        except (ValueError, TypeError, RecursionError):
                            drop(f"undecodable metadata {printable(record.name)!r}")
                            continue
                        writer.add_metadata(record.name, record.metadata)
                    elif isinstance(record, AttachmentRecord):
                        writer.add_attachment(
                            record.create_time, record.log_time, record.name, record.media_type, record.data
                        )
                writer.finish()
                fout.flush()
                os.fsync(fout.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    problems = scan.describe() if not scan.clean else ""
    if duplicates.messages:
        overlaps = "; ".join(duplicates.describe())
        problems = f"{problems}; {overlaps}" if problems else overlaps
    if dropped:
        what = ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items()))
        problems = f"{problems}; dropped {what}" if problems else f"dropped {what}"
    damaged = not scan.clean or bool(dropped)
    log.info("recovered %d messages from %s into %s (%s)", n_messages, source, target, problems or "intact")
    return RecoveryResult(
        source,
        target,
        damaged,
        n_messages,
        len(channel_ids),
        scan.bytes_skipped,
        printable(problems),
        dropped,
    )
