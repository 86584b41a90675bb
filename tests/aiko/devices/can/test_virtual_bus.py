"""LockstepVirtualBus delivers what python-can's VirtualBus delivers, field for field."""

import itertools

import can
import pytest

from aiko.devices.can.virtual_bus import LockstepVirtualBus

_channels = itertools.count()
FIELDS = (
    "timestamp", "arbitration_id", "is_extended_id", "is_remote_frame", "is_error_frame", "channel", "dlc", "data",
    "is_fd", "is_rx", "bitrate_switch", "error_state_indicator",
)  # fmt: skip


def _deliveries(sender_class, channel: str, **kw) -> list[dict]:
    """What a plain virtual bus and a lockstep one receive when ``sender_class`` sends three frames."""
    sender = sender_class(channel=channel, **kw)
    receivers = [can.Bus(interface="virtual", channel=channel), LockstepVirtualBus(channel=channel)]
    frames = [
        can.Message(arbitration_id=0x105, data=[1, 2, 3], is_extended_id=False, timestamp=12.5),
        can.Message(arbitration_id=0x1ABCDE, data=[], is_extended_id=True, is_remote_frame=True, dlc=4),
        can.Message(arbitration_id=0x7FF, data=bytes(range(8)), is_extended_id=False, is_error_frame=True),
    ]
    try:
        for frame in frames:
            sender.send(frame)
        out = []
        for receiver in receivers:
            for _ in frames:
                msg = receiver.recv(timeout=0)
                out.append({name: getattr(msg, name) for name in FIELDS})
            assert receiver.recv(timeout=0) is None and receiver.recv(timeout=0.01) is None
        own = sender.recv(timeout=0)
        out.append(own if own is None else {name: getattr(own, name) for name in FIELDS})
        return out
    finally:
        for bus in (sender, *receivers):
            bus.shutdown()


@pytest.mark.parametrize(
    "kw", [{"preserve_timestamps": True}, {"receive_own_messages": True, "preserve_timestamps": True}]
)
def test_frames_arrive_as_from_pythons_can_virtual_bus(kw):
    channel = f"test-virtual-bus-{next(_channels)}"
    plain = _deliveries(lambda **k: can.Bus(interface="virtual", **k), channel, **kw)
    ours = _deliveries(LockstepVirtualBus, channel, **kw)
    assert ours == plain
    assert plain[0]["timestamp"] == 12.5 and plain[0]["is_rx"] and plain[0]["data"] == bytearray([1, 2, 3])
    assert (plain[-1] is not None) == kw.get("receive_own_messages", False)


def test_each_receiver_gets_its_own_copy_and_a_closed_bus_refuses():
    channel = f"test-virtual-bus-{next(_channels)}"
    sender, a, b = (LockstepVirtualBus(channel=channel) for _ in range(3))
    frame = can.Message(arbitration_id=0x10, data=[7, 7], is_extended_id=False)
    sender.send(frame)
    got_a, got_b = a.recv(timeout=0), b.recv(timeout=0)
    got_a.data[0] = 99
    assert got_b.data == bytearray([7, 7]) and frame.data == bytearray([7, 7])
    for bus in (sender, a, b):
        bus.shutdown()
    with pytest.raises(can.CanOperationError):
        sender.send(frame)
    with pytest.raises(can.CanOperationError):
        a.recv(timeout=0)
