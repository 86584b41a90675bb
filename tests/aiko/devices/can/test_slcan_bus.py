"""Reception over slcan survives what a port shared with another process does to it (issue 26): reads that fail,
half lines; and the driver's receive thread survives any exception the bus raises. Counted, never fatal."""

from __future__ import annotations

import queue
import threading
import time

import can
import pytest
import serial

from aiko.devices.can.driver import CanDriverSettings, CanJointDriver
from aiko.devices.can.slcan_bus import BufferedSlcanBus

SHARED = serial.SerialException(
    "device reports readiness to read but returned no data (device disconnected or multiple access on port?)"
)


class ScriptedPort:
    """A serial port that returns (or raises) the scripted items one read at a time, then nothing; keeps what is
    written, one entry per write call."""

    port = "/dev/pts/test"
    write_timeout = None

    def __init__(self, script=()) -> None:
        self.script = list(script)
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    @property
    def in_waiting(self) -> int:
        head = self.script[0] if self.script else b""
        return len(head) if isinstance(head, bytes) else 0

    def read(self, size: int = 1) -> bytes:
        if not self.script:
            return b""
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def _bus(script) -> BufferedSlcanBus:
    """The bus's reading half over a scripted port (python-can's constructor would open a real one)."""
    bus = BufferedSlcanBus.__new__(BufferedSlcanBus)
    bus._buffer = bytearray()
    bus._queue = queue.SimpleQueue()
    bus.serialPortOrig = ScriptedPort(script)
    return bus


def _frames(bus: BufferedSlcanBus, reads: int) -> list[tuple[int, bytes]]:
    out = []
    for _ in range(reads):
        msg, _ = bus._recv_internal(0.0)
        if msg is not None:
            out.append((msg.arbitration_id, bytes(msg.data)))
    return out


def test_a_failed_read_is_counted_and_reception_goes_on():
    bus = _bus([b"t2018", SHARED, b"0102030405060708\r", SHARED, SHARED, OSError(5, "EIO"), b"t70141122", b"3344\r"])
    frames = _frames(bus, 8)
    assert frames == [(0x201, bytes(range(1, 9))), (0x701, bytes.fromhex("11223344"))]
    assert bus.read_errors == 4 and bus.garbage_lines == 0


def test_half_a_line_taken_by_another_reader_is_garbage_not_deafness():
    # the other process took "t20180102" of the first frame: what is left ends in CR and is no frame
    bus = _bus([b"030405060708\rt2028", b"1112131415161718\r"])
    assert _frames(bus, 4) == [(0x202, bytes(range(0x11, 0x19)))]
    assert bus.read_errors == 0


class FlakyBus(can.BusABC):
    """A bus whose receive raises now and then, as a bus shared with other processes can."""

    def __init__(self, script) -> None:
        super().__init__(channel="flaky")
        self.script = list(script)
        self.done = threading.Event()

    def _recv_internal(self, timeout):
        if not self.script:
            self.done.set()
            time.sleep(timeout or 0.0)
            return None, False
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item, False

    def send(self, msg, timeout=None) -> None:
        pass


def test_the_drivers_receive_thread_survives_any_bus_error_and_says_so():
    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import MessageKind

    codec = default_codec()
    feedback = {"AngleH": 1.0, "AngleV": 2.0, "EffortH": 0.0, "EffortV": 0.0, "RefSequence": 0}
    feedback |= {"Enabled": 1, "Fault": 0, "Watchdog": 0, "EStop": 1, "AtLimit": 0, "Saturated": 0}
    frame_id, data = codec.encode(MessageKind.FEEDBACK, 1, feedback)
    estop = can.Message(arbitration_id=frame_id, data=data, is_extended_id=False)
    bus = FlakyBus([can.CanOperationError("bus off"), SHARED, ValueError("odd"), estop])
    events = []
    settings = CanDriverSettings(nodes=(1,), limit_h_rad=1.0, limit_v_rad=1.0)
    driver = CanJointDriver(bus, settings, time.monotonic, on_event=lambda kind, fields: events.append(kind))
    driver.start()
    try:
        assert bus.done.wait(30.0), "the receive thread stopped before reading the whole script"
    finally:
        driver.close()
    assert driver.receive_errors == 3
    assert driver.health.modules[1].estop, "the frame after the errors was heard"
    assert events.count("can_warning") == 3  # one per kind of error
    assert driver.statistics()["can_receive_errors"] == 3


def test_a_frame_line_glued_from_two_frames_is_refused():
    """Another reader took the middle of the stream: the start of a feedback line and the end of another. python-can
    would decode it as a frame nobody sent; its length gives it away."""
    glued = b"t2018AABB" + b"\r" + b"t2018" + b"0102030405060708" + b"t28188" + b"\r"
    bus = _bus([glued, b"t28180000000000000000\r", b"t7014112233441A2B\r", b"r2018\r", b"z\r"])
    frames = _frames(bus, 8)
    # the 0x701 line carries the adapter's timestamp; r201 is a remote frame (no data)
    assert frames == [(0x281, bytes(8)), (0x701, bytes.fromhex("11223344")), (0x201, b"")]
    assert bus.garbage_lines == 2


@pytest.mark.parametrize(
    "line, ok",
    [
        (b"t20180102030405060708", True),
        (b"t201801020304050607081234", True),  # with the adapter's timestamp
        (b"t2018010203040506070", False),
        (b"t201801020304050607081", False),
        (b"t2019010203040506070809", False),  # dlc 9
        (b"t20180102030405060G08", False),
        (b"T1234567820102", True),
        (b"r2014", True),
        (b"R123456784", True),
        (b"z", True),
        (b"V1013", True),
        (b"", True),
    ],
)
def test_well_formed_frame_lines(line, ok):
    from aiko.devices.can.slcan_bus import well_formed

    assert well_formed(line) is ok


def test_a_reference_to_every_module_is_one_write():
    """A PC frozen between two frames of one reference would leave some modules on the new reference: the driver
    hands the ten frames over at once, and the slcan bus writes them with one call."""
    bus = _bus([])
    frames = [can.Message(arbitration_id=0x100 + n, data=bytes([n] * 8), is_extended_id=False) for n in (1, 2, 3)]
    bus.send_batch(frames)
    bus.send(frames[0])
    assert bus.serialPortOrig.writes == [
        b"t10180101010101010101\rt10280202020202020202\rt10380303030303030303\r",
        b"t10180101010101010101\r",
    ]


def test_the_driver_sends_a_reference_as_one_batch():
    import numpy as np

    sent: list[list[int]] = []

    class BatchBus(FlakyBus):
        def send_batch(self, msgs) -> None:
            sent.append([m.arbitration_id for m in msgs])

    settings = CanDriverSettings(nodes=(1, 2, 3), limit_h_rad=1.0, limit_v_rad=1.0)
    driver = CanJointDriver(BatchBus([]), settings, lambda: 0.0, use_notifier=False)
    driver.write(0.0, np.zeros((3, 2)), np.zeros((3, 2)))
    assert sent == [[0x101, 0x102, 0x103]] and driver.frames_sent == 3


def _pty_bus() -> tuple[BufferedSlcanBus, int]:
    """The bus's writing half on the slave side of a real pty (python-can's constructor would also talk to an
    adapter); the master's descriptor, non-blocking, is the other end."""
    import os
    import pty

    master, slave = pty.openpty()
    bus = BufferedSlcanBus.__new__(BufferedSlcanBus)
    bus._buffer = bytearray()
    bus._queue = queue.SimpleQueue()
    bus.serialPortOrig = serial.Serial(os.ttyname(slave), timeout=0.05)
    os.close(slave)
    os.set_blocking(master, False)
    return bus, master


def _drain(master: int, until: bytes = b"", timeout_s: float = 5.0) -> bytes:
    """Everything the master side receives until it ends with ``until`` (or, with no ``until``, until nothing more
    comes for 0.2 s)."""
    import os

    got, quiet_since, deadline = b"", time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except BlockingIOError:
            chunk = b""
        if chunk:
            got, quiet_since = got + chunk, time.monotonic()
            if until and got.endswith(until):
                return got
        elif not until and time.monotonic() - quiet_since > 0.2:
            return got
        time.sleep(0.001)
    return got


def test_writing_to_a_tty_never_polls_it(monkeypatch):
    """pyserial select()s the port after each write, and on a tty that waits for the kernel's normal-priority tty
    worker (issue 26: the run's SCHED_FIFO sender blocked 0.45 s so on a loaded PC). The bus writes without it."""
    import os
    import select

    bus, master = _pty_bus()
    frames = [can.Message(arbitration_id=0x100 + n, data=bytes([n] * 8), is_extended_id=False) for n in (1, 2)]

    def no_poll(*args, **kwargs):
        raise AssertionError("the write path polled the port")

    try:
        with monkeypatch.context() as patch:
            patch.setattr(select, "select", no_poll)
            bus.send_batch(frames)
            bus.send(frames[0])
        assert _drain(master, until=b"t10180101010101010101\r") == (
            b"t10180101010101010101\rt10280202020202020202\rt10180101010101010101\r"
        )
    finally:
        bus.serialPortOrig.close()
        os.close(master)


def test_a_port_that_takes_nothing_fails_the_write_and_never_cuts_a_line(monkeypatch):
    """A receiver that stops reading fills the port: the write gives up (a CanError the driver counts, the run goes
    on) instead of waiting forever, and the next write first finishes the line it left half written, so the
    receiver never sees a line cut short."""
    import os

    from aiko.devices.can import slcan_bus
    from aiko.devices.can.slcan_bus import well_formed

    monkeypatch.setattr(slcan_bus, "_WRITE_GIVE_UP_S", 0.05)
    bus, master = _pty_bus()
    frames = [can.Message(arbitration_id=0x100 + n, data=bytes([n] * 8), is_extended_id=False) for n in range(1, 11)]
    try:
        with pytest.raises(can.CanOperationError, match="took nothing"):
            for _ in range(100_000):  # ~220 bytes a batch: the pty's buffers (tens of kB) fill long before
                bus.send_batch(frames)
        received = _drain(master)
        last = can.Message(arbitration_id=0x7A, data=bytes([0xAB] * 8), is_extended_id=False)
        bus.send(last)
        received += _drain(master, until=b"t07A8ABABABABABABABAB\r")
        lines = received.split(b"\r")
        assert lines[-1] == b"" and lines[-2] == b"t07A8ABABABABABABABAB"
        assert all(line and well_formed(line) for line in lines[:-1])
    finally:
        bus.serialPortOrig.close()
        os.close(master)


def test_reading_a_tty_takes_what_is_waiting_without_asking_how_much(monkeypatch):
    """``in_waiting`` (TIOCINQ) takes the tty's termios lock for writing, behind the kernel's tty worker, and the
    sender's write would queue behind it: the bus reads with one os.read, and gets every frame, split or not."""
    import os

    bus, master = _pty_bus()

    def no_inq(self):
        raise AssertionError("the read path asked the port how much is waiting")

    monkeypatch.setattr(serial.Serial, "in_waiting", property(no_inq))
    try:
        os.write(master, b"t10180101010101010101\rt1028020202")
        time.sleep(0.05)
        os.write(master, b"0202020202\r")
        assert _frames(bus, 20) == [(0x101, bytes([1] * 8)), (0x102, bytes([2] * 8))]
        assert bus.read_errors == 0
    finally:
        bus.serialPortOrig.close()
        os.close(master)
