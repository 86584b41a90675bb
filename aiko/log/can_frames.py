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

CAN_TOPIC = "/can/frames"


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
    def __init__(self, recorder: Any, clock_ns: Callable[[], int] = time.monotonic_ns, topic: str = CAN_TOPIC):
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
