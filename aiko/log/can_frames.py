"""Raw CAN frames in the experiment log: a python-can ``Listener`` that records every frame on ``/can/frames``.

Attach it to the bus with ``can.Notifier(bus, [CanFrameLogger(recorder, clock_ns)])``. Frames are stamped on the
run's clock when python-can hands them over (python-can's own ``msg.timestamp`` is kept as ``bus_timestamp_s``
because its epoch depends on the interface). For very busy buses, write python-can's own log beside the MCAP
instead (``can.Logger("run.blf")``) and note its name with ``recorder.add_metadata``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import can

from aiko.core.messages import Channel, Message, boolean, integer, integers, number, string

CAN_CHANNEL = Channel("/can/frames", Message(
    "aiko.CanFrame",
    "One raw CAN frame as python-can handed it over (the log's clock stamps its arrival).",
    {
        "arbitration_id": integer("the frame's identifier"),
        "is_extended_id": boolean("29-bit identifier"),
        "is_remote_frame": boolean("remote transmission request"),
        "is_error_frame": boolean("error frame"),
        "is_rx": boolean("received (false: sent by this PC)"),
        "dlc": integer("data length code"),
        "data": integers("the data bytes, 0..255"),
        "channel": string("the interface's channel name"),
        "bus_timestamp_s": number("python-can's own timestamp (its epoch depends on the interface)", "s"),
    },
))  # fmt: skip
CAN_TOPIC = CAN_CHANNEL


def frame_payload(msg: can.Message) -> dict[str, Any]:
    return {
        "arbitration_id": int(msg.arbitration_id),
        "is_extended_id": bool(msg.is_extended_id),
        "is_remote_frame": bool(msg.is_remote_frame),
        "is_error_frame": bool(msg.is_error_frame),
        "is_rx": bool(msg.is_rx),
        "dlc": int(msg.dlc),
        "data": list(bytes(msg.data)),
        "channel": "" if msg.channel is None else str(msg.channel),
        "bus_timestamp_s": float(msg.timestamp),
    }


class CanFrameLogger(can.Listener):
    def __init__(self, recorder: Any, clock_ns: Callable[[], int] = time.monotonic_ns, topic: Channel = CAN_CHANNEL):
        self.recorder = recorder
        self.clock_ns = clock_ns
        self.topic = topic
        self.frames = 0

    def on_message_received(self, msg: can.Message) -> None:
        self.recorder.record(self.topic, self.clock_ns(), frame_payload(msg))
        self.frames += 1

    def on_error(self, exc: Exception) -> None:
        self.recorder.event("can_error", self.clock_ns(), error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        pass
