"""The OptoForce (now OnRobot) USB/UART DAQ serial protocol: data frames and the configuration command.

Sources (protocol facts only, no code copied): *OptoForce General DAQ - USB, CAN, UART* v1.7, as implemented by
the PyPI package `optoforce` (github.com/alknemeyer/optoforce: optoforce/__init__.py, reading.py, status.py) and
Shadow Robot's ROS driver (github.com/shadow-robot/optoforce: optoforce/src/optoforce/optoforce.py):

* serial: 1,000,000 baud, 8N1 (a USB CDC device, so the baud rate is nominal).
* data frame = header 0xAA 0x07 0x08 N, uint16 sample counter, uint16 status, the int16 counts, uint16 checksum,
  all big-endian; N = bytes between header and checksum = 4 + 2 x values. Known frames: N = 10 (16 bytes,
  single-channel 3-axis Fx Fy Fz), N = 16 (22 bytes, single-channel 6-axis Fx Fy Fz Tx Ty Tz: the HEX on the USB
  DAQ), N = 28 (34 bytes, 4-channel 3-axis). (Shadow's header tree pairs N = 16 with 34 bytes and N = 28 with 22;
  the `optoforce` package and the length arithmetic agree on the pairing used here.)
* checksum = the sum of all preceding bytes of the frame, header included, as uint16.
* status bits: 15-13 DAQ error (0 none, 1 DAQ error, 2 communication error), 12-10 sensor error (0 none,
  1 not detected, 2 failure, 4 temperature), 9-4 overload Fx Fy Fz Tx Ty Tz, 3 multiple sensors, 2-0 sensor number.
* configuration = 0xAA 0x00 0x32 0x03, speed, filter, zero, uint16 checksum (sum of the 7 bytes before it).
  speed = ms per sample (0 stop, 1 = 1000 Hz, 3 = 333 Hz, 10 = 100 Hz, 33 = 30 Hz, 100 = 10 Hz); filter 0 none,
  1 500 Hz, 2 150 Hz, 3 50 Hz, 4 15 Hz, 5 5 Hz, 6 1.5 Hz; zero 255 = zero (tare in the DAQ), 0 = unzero.

The counts -> N / N·m factors come from each sensor's sensitivity report; no generic value exists (see
:data:`DAQ_PLACEHOLDER_SCALE`). Hand-written because the `optoforce` package is a blocking reader for one model
with hard-coded scales and no frame resynchronisation or error counting, which the bench needs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from aiko.devices.force_sensor.errors import ChecksumError, FrameError
from aiko.devices.force_sensor.wrench import CountsScale

DAQ_BAUDRATE = 1_000_000
DATA_PREFIX = b"\xaa\x07\x08"
CONFIG_HEADER = b"\xaa\x00\x32\x03"
CONFIG_SIZE = 9
# N (the header's 4th byte) -> number of int16 values in the frame
VALUES_FOR_LENGTH_BYTE = {10: 3, 16: 6, 28: 12}
SIX_AXIS_LENGTH_BYTE = 16
SIX_AXIS_FRAME_SIZE = 22

SPEED_CODES_HZ: dict[int, float] = {1: 1000.0, 3: 1000.0 / 3, 10: 100.0, 33: 1000.0 / 33, 100: 10.0}
SPEED_STOP = 0
FILTER_CODES_HZ: dict[int, float | None] = {0: None, 1: 500.0, 2: 150.0, 3: 50.0, 4: 15.0, 5: 5.0, 6: 1.5}
ZERO_ON = 255
ZERO_OFF = 0

OVERLOAD_SHIFT = 4  # bit 9 = Fx ... bit 4 = Tz
OVERLOAD_MASK = 0b11_1111 << OVERLOAD_SHIFT

# Not a vendor fact: a stand-in until you enter your sensor's sensitivity report (counts per N / per N·m). With it
# an int16 spans +-327 N and +-32.7 N·m, above a HEX-E's rated 200 N / 10 N·m, so the emulator can saturate.
DAQ_PLACEHOLDER_SCALE = CountsScale(counts_per_n=100.0, counts_per_nm=1000.0)


def frame_size(length_byte: int) -> int:
    return length_byte + 6


@dataclass(frozen=True)
class DaqFrame:
    counter: int  # uint16 sample counter (wraps)
    status: int
    values: tuple[int, ...]  # int16 counts


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFF


def encode_frame(frame: DaqFrame) -> bytes:
    n_values = len(frame.values)
    length_byte = 4 + 2 * n_values
    if length_byte not in VALUES_FOR_LENGTH_BYTE:
        raise FrameError(f"a DAQ frame carries 3, 6 or 12 values, not {n_values}")
    if not (0 <= frame.counter <= 0xFFFF and 0 <= frame.status <= 0xFFFF):
        raise FrameError("DAQ counter and status are uint16")
    if not all(-32768 <= v <= 32767 for v in frame.values):
        raise FrameError("DAQ counts are int16")
    body = (
        DATA_PREFIX + bytes([length_byte]) + struct.pack(f">HH{n_values}h", frame.counter, frame.status, *frame.values)
    )
    return body + struct.pack(">H", checksum(body))


def decode_frame(data: bytes) -> DaqFrame:
    """One complete frame; FrameError for a wrong header or length, ChecksumError for a bad checksum."""
    if len(data) < 4 or data[:3] != DATA_PREFIX or data[3] not in VALUES_FOR_LENGTH_BYTE:
        raise FrameError(f"not a DAQ data frame header: {data[:4].hex()}")
    if len(data) != frame_size(data[3]):
        raise FrameError(f"DAQ frame with N={data[3]} must be {frame_size(data[3])} bytes, got {len(data)}")
    (sent,) = struct.unpack_from(">H", data, len(data) - 2)
    if checksum(data[:-2]) != sent:
        raise ChecksumError(f"DAQ frame checksum 0x{sent:04x}, computed 0x{checksum(data[:-2]):04x}")
    n_values = VALUES_FOR_LENGTH_BYTE[data[3]]
    counter, status, *values = struct.unpack_from(f">HH{n_values}h", data, 4)
    return DaqFrame(counter, status, tuple(values))


def overloaded_axes(status: int) -> tuple[bool, ...]:
    """Fx Fy Fz Tx Ty Tz overload flags of a status word (bits 9..4)."""
    return tuple(bool(status >> (9 - i) & 1) for i in range(6))


def overload_bits(flags: tuple[bool, ...] | list[bool]) -> int:
    return sum(1 << (9 - i) for i, flag in enumerate(flags) if flag)


@dataclass(frozen=True)
class DaqConfig:
    speed: int = 1  # ms per sample; 0 = stop
    filter: int = 0
    zero: int = ZERO_OFF


def encode_config(config: DaqConfig) -> bytes:
    if config.speed != SPEED_STOP and config.speed not in SPEED_CODES_HZ:
        raise FrameError(f"DAQ speed code {config.speed} is not one of 0, {', '.join(map(str, SPEED_CODES_HZ))}")
    if config.filter not in FILTER_CODES_HZ:
        raise FrameError(f"DAQ filter code {config.filter} is not 0..6")
    if config.zero not in (ZERO_ON, ZERO_OFF):
        raise FrameError(f"DAQ zero must be 0 or 255, got {config.zero}")
    body = CONFIG_HEADER + bytes([config.speed, config.filter, config.zero])
    return body + struct.pack(">H", checksum(body))


def decode_config(data: bytes) -> DaqConfig:
    if len(data) != CONFIG_SIZE or data[:4] != CONFIG_HEADER:
        raise FrameError(f"not a DAQ configuration command: {data.hex()}")
    (sent,) = struct.unpack_from(">H", data, 7)
    if checksum(data[:7]) != sent:
        raise ChecksumError(f"DAQ configuration checksum 0x{sent:04x}, computed 0x{checksum(data[:7]):04x}")
    speed, filt, zero = data[4], data[5], data[6]
    if (speed != SPEED_STOP and speed not in SPEED_CODES_HZ) or filt not in FILTER_CODES_HZ or zero not in (0, 255):
        raise FrameError(f"DAQ configuration out of range: speed {speed}, filter {filt}, zero {zero}")
    return DaqConfig(speed, filt, zero)


def speed_code_for_rate(rate_hz: float) -> int:
    """The DAQ speed code for one of its rates (1000, 333, 100, 30, 10 Hz); FrameError for any other."""
    for code, hz in SPEED_CODES_HZ.items():
        if abs(hz - rate_hz) < 0.5:
            return code
    raise FrameError(f"the DAQ streams at 1000, 333, 100, 30 or 10 Hz, not {rate_hz:g}")


class FrameParser:
    """Splits a serial byte stream into frames, resynchronising on the header after garbage.

    Counters (exact by construction): ``frames`` decoded, ``checksum_failures`` (header and length right, checksum
    wrong: the whole frame is skipped, its boundaries are trusted), ``garbage_bytes`` (bytes skipped while looking
    for a header). Non-six-axis frames are decoded too (the caller decides what to do with them).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.frames = 0
        self.checksum_failures = 0
        self.garbage_bytes = 0

    def feed(self, data: bytes) -> list[DaqFrame]:
        self._buffer.extend(data)
        out: list[DaqFrame] = []
        buf = self._buffer
        while True:
            start = buf.find(DATA_PREFIX)
            if start < 0:
                keep = 2 if buf.endswith(DATA_PREFIX[:2]) else 1 if buf.endswith(DATA_PREFIX[:1]) else 0
                self.garbage_bytes += len(buf) - keep
                del buf[: len(buf) - keep]
                break
            if start:
                self.garbage_bytes += start
                del buf[:start]
            if len(buf) < 4:
                break
            if buf[3] not in VALUES_FOR_LENGTH_BYTE:
                self.garbage_bytes += 1
                del buf[:1]
                continue
            size = frame_size(buf[3])
            if len(buf) < size:
                break
            raw = bytes(buf[:size])
            del buf[:size]
            try:
                out.append(decode_frame(raw))
                self.frames += 1
            except ChecksumError:
                self.checksum_failures += 1
        return out


class ConfigParser:
    """The emulator's side: configuration commands out of the PC's byte stream, with a count of bad ones."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.commands = 0
        self.bad_commands = 0
        self.garbage_bytes = 0

    def feed(self, data: bytes) -> list[DaqConfig]:
        self._buffer.extend(data)
        buf = self._buffer
        out: list[DaqConfig] = []
        while True:
            start = buf.find(CONFIG_HEADER)
            if start < 0:
                keep = min(len(buf), len(CONFIG_HEADER) - 1)
                self.garbage_bytes += len(buf) - keep
                del buf[: len(buf) - keep]
                break
            self.garbage_bytes += start
            del buf[:start]
            if len(buf) < CONFIG_SIZE:
                break
            raw = bytes(buf[:CONFIG_SIZE])
            del buf[:CONFIG_SIZE]
            try:
                out.append(decode_config(raw))
                self.commands += 1
            except FrameError:
                self.bad_commands += 1
        return out
