"""CAN 2.0A frame lengths on the wire (with bit stuffing) and the bus load of the Aiko protocol.

Used for the bus-load table in docs/can_protocol.md; `exact_frame_bits` builds the real bit stream
(SOF .. CRC-15, stuffing after five equal bits), `worst_case_frame_bits` is the ISO 11898 upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

_FIXED_TAIL_BITS = 1 + 2 + 7 + 3  # CRC delimiter, ACK slot+delimiter, EOF, interframe space (never stuffed)
_CRC15_POLY = 0x4599


def _crc15(bits: list[int]) -> int:
    crc = 0
    for bit in bits:
        feedback = bit ^ ((crc >> 14) & 1)
        crc = (crc << 1) & 0x7FFF
        if feedback:
            crc ^= _CRC15_POLY
    return crc


def _stuffed_length(bits: list[int]) -> int:
    """Length after inserting a complementary bit after every run of five equal bits (stuff bits too)."""
    out = 0
    run_bit, run_len = None, 0
    for bit in bits:
        out += 1
        if bit == run_bit:
            run_len += 1
        else:
            run_bit, run_len = bit, 1
        if run_len == 5:
            out += 1
            run_bit, run_len = 1 - bit, 1
    return out


def exact_frame_bits(frame_id: int, data: bytes) -> int:
    """Bits one standard data frame occupies on the bus, including stuff bits and the interframe space."""
    if not 0 <= frame_id < 0x800:
        raise ValueError(f"frame_id 0x{frame_id:X} is not an 11-bit identifier (0..0x7FF)")
    if len(data) > 8:
        raise ValueError(f"classic CAN carries at most 8 data bytes, got {len(data)}")
    bits = [0]  # SOF
    bits += [(frame_id >> i) & 1 for i in range(10, -1, -1)]
    bits += [0, 0, 0]  # RTR, IDE, r0
    bits += [(len(data) >> i) & 1 for i in range(3, -1, -1)]
    for byte in data:
        bits += [(byte >> i) & 1 for i in range(7, -1, -1)]
    crc = _crc15(bits)
    bits += [(crc >> i) & 1 for i in range(14, -1, -1)]
    return _stuffed_length(bits) + _FIXED_TAIL_BITS


def worst_case_frame_bits(dlc: int) -> int:
    """ISO 11898 bound for a standard frame: 47 + 8·dlc bits plus ⌊(34 + 8·dlc − 1)/4⌋ stuff bits."""
    if not 0 <= dlc <= 8:
        raise ValueError(f"dlc must be 0..8, got {dlc}")
    return 47 + 8 * dlc + (34 + 8 * dlc - 1) // 4


@dataclass(frozen=True)
class BusLoad:
    frames_per_s: float
    bits_per_s: float
    load_fraction: float


def protocol_bus_load(
    reference_rate_hz: float,
    feedback_rate_hz: float,
    n_modules: int = 10,
    bitrate_bps: int = 1_000_000,
    heartbeat_rate_hz: float = 1.0,
) -> BusLoad:
    """Worst-case load: per module one 8-byte reference and two 8-byte feedback frames (JointFeedback +
    JointRates) per period, plus a 4-byte heartbeat."""
    frames = n_modules * (reference_rate_hz + 2 * feedback_rate_hz + heartbeat_rate_hz)
    bits = n_modules * (
        (reference_rate_hz + 2 * feedback_rate_hz) * worst_case_frame_bits(8)
        + heartbeat_rate_hz * worst_case_frame_bits(4)
    )
    return BusLoad(frames_per_s=frames, bits_per_s=bits, load_fraction=bits / bitrate_bps)
