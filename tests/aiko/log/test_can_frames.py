"""CAN frames from a python-can virtual bus land in the log byte for byte."""

import time

import can
import numpy as np

from aiko.log import LogReader, McapRecorder
from aiko.log.can_frames import CanFrameLogger


def test_frames_from_a_virtual_bus_are_logged(tmp_path):
    path = tmp_path / "can.mcap"
    sent = [can.Message(arbitration_id=0x100 + k, data=bytes([k, 255 - k, 7]), is_extended_id=False) for k in range(20)]
    with McapRecorder(path) as rec:
        logger = CanFrameLogger(rec)
        with can.Bus(interface="virtual", channel="i5test") as rx, can.Bus(interface="virtual", channel="i5test") as tx:
            notifier = can.Notifier(rx, [logger])
            for msg in sent:
                tx.send(msg)
            deadline = 200
            while logger.frames < len(sent) and deadline:
                time.sleep(0.01)
                deadline -= 1
            notifier.stop()
    frames = LogReader(path).channel("/can/frames")
    np.testing.assert_array_equal(frames["arbitration_id"], [m.arbitration_id for m in sent])
    np.testing.assert_array_equal(frames["data"], [list(m.data) for m in sent])
    assert (np.diff(frames.t_ns) >= 0).all()
