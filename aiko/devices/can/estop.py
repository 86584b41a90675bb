"""``aiko can estop``: send the broadcast emergency stop and confirm it from the modules' status frames.

This is the lab's first-class stop path, so it must start fast and must not disturb a run that shares the bus:

- It imports almost nothing (no numpy, no cantools, no simulator): the frame it sends and the two status fields
  it reads are the constants below, checked against ``aiko_joint.dbc`` by ``tests/aiko/devices/can/test_estop.py``.
  Loading the DBC with cantools alone costs ~150 ms; a stop must not wait for that.
- slcan is written with pyserial directly, *not* with python-can's ``slcan`` interface: python-can 4.6 sends the
  Lawicel close command ``C`` when it opens the port (``set_bitrate`` closes, sets, reopens) and again on
  ``shutdown``. On an adapter that a running ``aiko run`` is using, that close stops the adapter forwarding
  frames, and the run loses all feedback. Here the port is opened without touching the adapter's state: ``Sn`` and
  ``O`` are sent (an adapter that is already open answers them with BEL and stays as it is; a closed one opens),
  never ``C``.
- socketcan (and other shared-bus interfaces) are joined with python-can; another socket on the same interface is
  unaffected.
- ``virtual`` is refused: that bus lives inside one process, so no module and no other process can hear it.

Confirmation: every listed module must report ESTOP (JointFeedback.EStop = 1 or Heartbeat.State = EStop) within
the timeout after the first frame is sent, else the command exits 1 naming the silent modules.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

# -- protocol constants (aiko_joint.dbc; checked by tests/aiko/devices/can/test_estop.py)
ESTOP_FRAME_ID = 0x000
ESTOP_DATA = b"\xa5"  # EmergencyStop.Key = 0xA5
FEEDBACK_BASE = 0x200  # JointFeedback_NN = 0x200 + node, 8 bytes
FEEDBACK_DLC = 8
FEEDBACK_ESTOP_BYTE, FEEDBACK_ESTOP_BIT = 6, 5  # JointFeedback.EStop: start bit 53
HEARTBEAT_BASE = 0x700  # Heartbeat_NN = 0x700 + node, 4 bytes, State in byte 0
HEARTBEAT_DLC = 4
HEARTBEAT_STATE_ESTOP = 5
NODES = tuple(range(1, 11))

PROCESS_LOCAL_INTERFACES = frozenset({"virtual"})
_SLCAN_BITRATES = {10_000: "S0", 20_000: "S1", 50_000: "S2", 100_000: "S3", 125_000: "S4"}
_SLCAN_BITRATES |= {250_000: "S5", 500_000: "S6", 750_000: "S7", 1_000_000: "S8"}


class EstopError(Exception):
    """The stop could not be sent (the channel does not open or the write fails)."""


class EstopRefused(Exception):
    """An interface on which an emergency stop cannot reach any module (process-local bus)."""


class EstopResult:
    """What a stop did. A plain class, not a dataclass: ``dataclasses`` imports ``inspect`` (and ``ast``, ``dis``,
    ``tokenize``), milliseconds a stop should not spend."""

    def __init__(self, nodes: tuple[int, ...]) -> None:
        self.nodes = nodes
        self.confirmed: dict[int, float] = {}  # node -> seconds after the first frame was sent
        self.frames_sent = 0
        self.sent_after_s = 0.0  # from `run` being called to the first frame on the wire
        self.sent_monotonic_s = 0.0  # time.monotonic() of the first frame (system-wide: other processes compare)

    @property
    def silent(self) -> list[int]:
        return [n for n in self.nodes if n not in self.confirmed]

    def first_frame_sent(self, t0: float) -> float:
        """Record the first stop frame on the wire now (t0: when the command started); returns that time."""
        start = time.monotonic()
        self.sent_after_s, self.sent_monotonic_s, self.frames_sent = start - t0, start, 1
        return start


def estop_confirmation(frame_id: int, data: bytes) -> int | None:
    """The node a received frame proves to be in ESTOP, or None."""
    if FEEDBACK_BASE < frame_id <= FEEDBACK_BASE + 0x7F and len(data) == FEEDBACK_DLC:
        if data[FEEDBACK_ESTOP_BYTE] >> FEEDBACK_ESTOP_BIT & 1:
            return frame_id - FEEDBACK_BASE
    elif HEARTBEAT_BASE < frame_id <= HEARTBEAT_BASE + 0x7F and len(data) == HEARTBEAT_DLC:
        if data[0] == HEARTBEAT_STATE_ESTOP:
            return frame_id - HEARTBEAT_BASE
    return None


def parse_slcan_line(line: bytes) -> tuple[int, bytes] | None:
    """(id, data) of a standard-id Lawicel frame line ``tIIIL<hex>`` (optionally with a 4-digit timestamp)."""
    if len(line) < 5 or line[0:1] != b"t":
        return None
    try:
        frame_id = int(line[1:4], 16)
        dlc = int(line[4:5], 16)
        if dlc > 8 or len(line) < 5 + 2 * dlc:
            return None
        return frame_id, bytes.fromhex(line[5 : 5 + 2 * dlc].decode("ascii"))
    except ValueError:
        return None


def _slcan_frame(frame_id: int, data: bytes) -> bytes:
    return f"t{frame_id:03X}{len(data):d}{data.hex().upper()}\r".encode()


class _Confirmations:
    def __init__(self, nodes: Iterable[int], start: float) -> None:
        self.nodes = set(nodes)
        self.start = start
        self.confirmed: dict[int, float] = {}

    def see(self, frame_id: int, data: bytes) -> None:
        node = estop_confirmation(frame_id, data)
        if node in self.nodes and node not in self.confirmed:
            self.confirmed[node] = time.monotonic() - self.start

    @property
    def done(self) -> bool:
        return len(self.confirmed) == len(self.nodes)


def _split_channel(channel: str) -> tuple[str, int]:
    """python-can's slcan channel spelling: ``/dev/ttyACM0@115200`` (baud rate optional)."""
    if "@" in channel:
        port, baud = channel.rsplit("@", 1)
        try:
            return port, int(baud)
        except ValueError:
            raise EstopError(f"slcan channel {channel!r}: the part after '@' must be a baud rate") from None
    return channel, 115200


def estop_slcan(
    channel: str, nodes: tuple[int, ...], *, bitrate: int, timeout_s: float, repeat: int, t0: float
) -> EstopResult:
    import serial  # pyserial: 2 ms to import

    port, baud = _split_channel(channel)
    try:
        ser = serial.serial_for_url(port, baudrate=baud, timeout=0, write_timeout=None)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise EstopError(f"cannot open slcan channel {channel}: {exc}") from None
    result = EstopResult(nodes)
    try:
        setup = b""
        if bitrate in _SLCAN_BITRATES:
            setup += _SLCAN_BITRATES[bitrate].encode() + b"\r"
        frame = _slcan_frame(ESTOP_FRAME_ID, ESTOP_DATA)
        try:  # one write: bitrate + open (ignored by an adapter that is already open) + the stop
            ser.write(setup + b"O\r" + frame)
        except (serial.SerialException, OSError) as exc:
            raise EstopError(f"emergency stop NOT sent on slcan:{channel}: {exc}") from None
        start = result.first_frame_sent(t0)
        seen = _Confirmations(nodes, start)
        buffer = bytearray()
        next_repeat = start + 0.01
        deadline = start + timeout_s
        while not seen.done:
            now = time.monotonic()
            if now >= deadline:
                break
            if now >= next_repeat:
                # while unconfirmed: repeat the stop (up to --repeat) and re-send 'O', which reopens an adapter
                # that the exiting run closed (python-can sends 'C' on shutdown) so that feedback keeps coming
                try:
                    ser.write(b"O\r" + (frame if result.frames_sent < repeat else b""))
                    result.frames_sent += result.frames_sent < repeat
                except (serial.SerialException, OSError):
                    pass
                next_repeat = now + 0.01
            try:
                chunk = ser.read(max(1, ser.in_waiting))
            except (serial.SerialException, OSError):
                chunk = b""
            if not chunk:
                time.sleep(0.0005)
                continue
            buffer.extend(chunk)
            *lines, rest = bytes(buffer).replace(b"\x07", b"\r").split(b"\r")
            buffer[:] = rest
            for line in lines:
                parsed = parse_slcan_line(line.strip(b"\n"))
                if parsed is not None:
                    seen.see(*parsed)
        result.confirmed = seen.confirmed
        return result
    finally:
        ser.close()  # just the file descriptor: no 'C', the adapter stays open for whoever else uses it


def estop_python_can(
    interface: str, channel: str, nodes: tuple[int, ...], *, bitrate: int, timeout_s: float, repeat: int, t0: float
) -> EstopResult:
    import can

    kwargs = {} if interface == "socketcan" else {"bitrate": bitrate}
    try:
        bus = can.Bus(interface=interface, channel=channel, **kwargs)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        raise EstopError(f"cannot open CAN bus {interface}:{channel}: {exc}") from None
    result = EstopResult(nodes)
    msg = can.Message(arbitration_id=ESTOP_FRAME_ID, data=ESTOP_DATA, is_extended_id=False)
    try:
        try:
            bus.send(msg, timeout=0.1)
        except can.CanError as exc:
            raise EstopError(f"emergency stop NOT sent on {interface}:{channel}: {exc}") from None
        start = result.first_frame_sent(t0)
        seen = _Confirmations(nodes, start)
        next_repeat = start + 0.01
        deadline = start + timeout_s
        while not seen.done and (now := time.monotonic()) < deadline:
            if result.frames_sent < repeat and now >= next_repeat:
                try:
                    bus.send(msg, timeout=0.01)
                    result.frames_sent += 1
                except can.CanError:
                    pass
                next_repeat = now + 0.01
            received = bus.recv(timeout=min(0.005, max(0.0, deadline - now)))
            if received is not None and not (received.is_error_frame or received.is_remote_frame):
                if not received.is_extended_id:
                    seen.see(received.arbitration_id, bytes(received.data))
        result.confirmed = seen.confirmed
        return result
    finally:
        bus.shutdown()


def emergency_stop(
    interface: str,
    channel: str,
    nodes: tuple[int, ...] = NODES,
    *,
    bitrate: int = 1_000_000,
    timeout_s: float = 0.2,
    repeat: int = 3,
    t0: float | None = None,
) -> EstopResult:
    """Send the stop on ``interface:channel`` and wait up to ``timeout_s`` for every node to report ESTOP."""
    t0 = time.monotonic() if t0 is None else t0
    if interface in PROCESS_LOCAL_INTERFACES:
        raise EstopRefused(
            f"--interface {interface} is a bus inside one process: no module and no other process can hear an "
            "emergency stop sent on it (use the interface the robot is on: socketcan, slcan, ...)"
        )
    repeat = max(1, repeat)
    if interface == "slcan":
        return estop_slcan(channel, nodes, bitrate=bitrate, timeout_s=timeout_s, repeat=repeat, t0=t0)
    return estop_python_can(interface, channel, nodes, bitrate=bitrate, timeout_s=timeout_s, repeat=repeat, t0=t0)
