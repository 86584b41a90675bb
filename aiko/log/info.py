"""Summary of a log: channels, counts, rates, duration, events (``aiko log info``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiko.log.reader import LogReader


def log_info(reader: LogReader) -> dict[str, Any]:
    span = reader.time_range_ns()
    channels = {}
    for topic, info in sorted(reader.channel_info().items()):
        channels[topic] = {
            "messages": info.count,
            "rate_hz": round(info.rate_hz, 6),
            "first_t_ns": info.first_t_ns,
            "last_t_ns": info.last_t_ns,
            "schema": info.schema_name,
        }
    return {
        "path": str(reader.path),
        "truncated": reader.truncated,
        "start_t_ns": span[0] if span else None,
        "end_t_ns": span[1] if span else None,
        "duration_s": (span[1] - span[0]) * 1e-9 if span else 0.0,
        # the first message on the wall clock (its MCAP log time); None for a log from before epoch log times
        "start_utc": (
            datetime.fromtimestamp(reader.epoch_ns(span[0]) / 1e9, UTC).isoformat()
            if span and reader.log_time_offset_ns
            else None
        ),
        "messages": sum(c["messages"] for c in channels.values()),
        # messages the file holds more than once (counted once above) and the chunks that overlap earlier ones
        "duplicates": reader.duplicates.as_dict(),
        "channels": channels,
        "events": [{"t_ns": e.t_ns, "kind": e.kind, **e.fields} for e in reader.events()],
        "metadata": sorted(reader.metadata),
    }
