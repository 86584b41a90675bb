"""The UDP "RDT" (Raw Data Transfer) protocol on port 49152: ATI Net F/T, OptoForce EtherDAQ, OnRobot HEX.

Sources (protocol facts only, no code copied):

* ATI Industrial Automation, *Net F/T Installation and Operation Manual* 9620-05-NET FT, section "UDP interface
  using RDT": request = uint16 command_header 0x1234, uint16 command, uint32 sample_count (0 = infinite), all
  big-endian; commands 0x0000 stop streaming, 0x0002 start high-speed real-time streaming, 0x0003 start high-speed
  buffered streaming, 0x0004 start multi-unit streaming, 0x0041 reset threshold latch, 0x0042 set software bias.
  Record = uint32 rdt_sequence, uint32 ft_sequence, uint32 status, int32 Fx Fy Fz Tx Ty Tz (36 bytes, big-endian);
  in buffered mode one datagram carries several records back to back. The same layout is used by the ROS drivers
  `netft_rdt_driver` / `netft_utils` (src/netft_rdt_driver.cpp: RDTRecord, RDTCommand, RDT_RECORD_SIZE = 36).
* OptoForce / OnRobot: the EtherDAQ (and the HEX Compute Box, which is one) answers the same request and record
  layout, and adds configuration commands in the same 8-byte request: 0x0081 set filter (data 0 none, 1 500 Hz,
  2 150 Hz, 3 50 Hz, 4 15 Hz, 5 5 Hz, 6 1.5 Hz), 0x0082 set speed (data = 1000 / rate in Hz, i.e. the sample
  period in ms), and 0x0042 is a bias *switch* there (data 0xFF bias on, 0x00 bias off). Taken from OnRobot's
  UDP example example/highspeed_udp.c (COMMAND_START 0x0002, COMMAND_STOP 0x0000, COMMAND_BIAS 0x0042,
  COMMAND_FILTER 0x0081, COMMAND_SPEED 0x0082, BIASING_ON 0xFF) and the OptoForce `etherdaq_ros` driver
  (src/etherdaq_driver.cpp) that the OnRobot HEX ROS driver is built on.

Hand-written because no maintained Python package implements RDT (the small PyPI clients only wrap a socket);
the codec is a few struct calls.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from aiko.devices.force_sensor.errors import FrameError

RDT_PORT = 49152
RDT_HEADER = 0x1234
REQUEST_SIZE = 8
RECORD_SIZE = 36
MAX_RECORDS_PER_DATAGRAM = 40  # ATI buffered mode: records per packet = the "RDT buffer size" setting, at most 40

_REQUEST = struct.Struct(">HHI")
_RECORD = struct.Struct(">III6i")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1


class RdtCommand(IntEnum):
    """Request commands. The first six are ATI's; the last two exist on the OptoForce EtherDAQ / OnRobot HEX."""

    STOP_STREAMING = 0x0000
    START_REALTIME = 0x0002
    START_BUFFERED = 0x0003
    START_MULTI_UNIT = 0x0004
    RESET_THRESHOLD_LATCH = 0x0041
    SET_BIAS = 0x0042
    SET_FILTER = 0x0081
    SET_SPEED = 0x0082


BIAS_ON = 0xFF  # EtherDAQ / HEX: data of SET_BIAS
BIAS_OFF = 0x00

# EtherDAQ / HEX filter codes (data of SET_FILTER) -> cut-off in Hz (None = no filter)
FILTER_CODES_HZ: dict[int, float | None] = {0: None, 1: 500.0, 2: 150.0, 3: 50.0, 4: 15.0, 5: 5.0, 6: 1.5}


@dataclass(frozen=True)
class RdtRequest:
    command: RdtCommand
    data: int = 0  # "sample_count" for the streaming commands; the setting for SET_FILTER / SET_SPEED / SET_BIAS


@dataclass(frozen=True)
class RdtRecord:
    rdt_sequence: int
    ft_sequence: int
    status: int
    counts: tuple[int, int, int, int, int, int]  # Fx Fy Fz Tx Ty Tz


def encode_request(request: RdtRequest) -> bytes:
    if not 0 <= request.data <= UINT32_MAX:
        raise FrameError(f"RDT request data {request.data} does not fit in uint32")
    return _REQUEST.pack(RDT_HEADER, int(request.command), request.data)


def decode_request(packet: bytes) -> RdtRequest:
    """An 8-byte request; FrameError on a wrong length, header or an unknown command."""
    if len(packet) != REQUEST_SIZE:
        raise FrameError(f"RDT request is {len(packet)} bytes, expected {REQUEST_SIZE}")
    header, command, data = _REQUEST.unpack(packet)
    if header != RDT_HEADER:
        raise FrameError(f"RDT request header 0x{header:04x}, expected 0x{RDT_HEADER:04x}")
    try:
        return RdtRequest(RdtCommand(command), data)
    except ValueError:
        raise FrameError(f"unknown RDT command 0x{command:04x}") from None


def encode_record(record: RdtRecord) -> bytes:
    if not (0 <= record.rdt_sequence <= UINT32_MAX and 0 <= record.ft_sequence <= UINT32_MAX):
        raise FrameError("RDT sequence numbers are uint32")
    if not 0 <= record.status <= UINT32_MAX:
        raise FrameError("RDT status is uint32")
    if len(record.counts) != 6 or not all(INT32_MIN <= c <= INT32_MAX for c in record.counts):
        raise FrameError("RDT record needs six int32 counts")
    return _RECORD.pack(record.rdt_sequence, record.ft_sequence, record.status, *record.counts)


def decode_records(datagram: bytes) -> list[RdtRecord]:
    """One datagram -> its records (one in real-time mode, several in buffered mode).

    FrameError unless the length is a positive multiple of 36 bytes: a truncated or padded datagram is rejected
    whole, because the record boundaries inside it can no longer be trusted.
    """
    n, rest = divmod(len(datagram), RECORD_SIZE)
    if n == 0 or rest or n > MAX_RECORDS_PER_DATAGRAM:
        raise FrameError(f"RDT datagram of {len(datagram)} bytes is not 1..40 records of {RECORD_SIZE} bytes")
    records = []
    for i in range(n):
        seq, ft_seq, status, *counts = _RECORD.unpack_from(datagram, i * RECORD_SIZE)
        records.append(RdtRecord(seq, ft_seq, status, tuple(counts)))  # type: ignore[arg-type]
    return records


def speed_data_for_rate(rate_hz: float) -> int:
    """EtherDAQ SET_SPEED data for a sample rate: the period in ms (1000 / rate), at least 1."""
    if not rate_hz > 0:
        raise FrameError(f"sample rate must be positive, got {rate_hz}")
    return max(1, round(1000.0 / rate_hz))


def rate_for_speed_data(data: int) -> float:
    if data <= 0:
        raise FrameError(f"EtherDAQ speed data must be >= 1 (ms per sample), got {data}")
    return 1000.0 / data
