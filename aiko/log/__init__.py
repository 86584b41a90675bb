"""The experiment log: MCAP files with JSON-schema channels on one monotonic clock.

``McapRecorder`` writes (the ``aiko.core.interfaces.Recorder`` protocol) records on channels declared beside their
message types (``aiko.core.messages``) and events of declared kinds (``aiko.core.events``); ``LogReader`` reads back
numpy arrays (also from logs written before schemas were declared), ``recover`` repairs a file whose writer was
killed, ``export_csv`` writes one CSV per channel. docs/viewers.md: which outside tools open the files.
"""

from aiko.core.events import EVENTS_TOPIC
from aiko.log.csv_export import export_csv
from aiko.log.reader import ChannelArrays, ChannelInfo, Event, LogReader, LogReadError, read_log
from aiko.log.recorder import LogOpenError, LogWriteError, McapRecorder
from aiko.log.recover import RecoveryResult, recover

__all__ = [
    "EVENTS_TOPIC",
    "ChannelArrays",
    "ChannelInfo",
    "Event",
    "LogReadError",
    "LogOpenError",
    "LogReader",
    "LogWriteError",
    "McapRecorder",
    "RecoveryResult",
    "export_csv",
    "read_log",
    "recover",
]
