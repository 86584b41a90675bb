"""Fast encode/decode of Aiko joint frames, compiled from the DBC signal table at import.

cantools is the reference (`Message.encode`); it spends tens of µs per frame on generic checks, too slow
for an emulator handling ten modules at 1 kHz, so each message is compiled here into (shift, mask, scale)
per signal and packed into one little-endian 64-bit integer. The layout is read from the DBC, never restated;
the test `tests/firmware_protocol/test_codec.py` checks every message against cantools over the full ranges.
Physical values are in the DBC units (deg, deg/s); conversions to SI belong to the callers.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from firmware_protocol.dbc import IdScheme, MessageKind, id_scheme, load_database, message_name
from firmware_protocol.errors import FrameLengthError, SignalRangeError, UnknownFrameError

_F32 = struct.Struct("<f")


@dataclass(frozen=True)
class SignalLayout:
    name: str
    start_bit: int
    length: int
    is_signed: bool
    is_float: bool
    scale: float
    offset: float
    minimum: float
    maximum: float

    raw_minimum: int  # integer bounds of the field's raw value that decode inside [minimum, maximum]
    raw_maximum: int

    @property
    def mask(self) -> int:
        return (1 << self.length) - 1


@dataclass(frozen=True)
class MessageLayout:
    """One DBC message compiled for fast packing (little-endian signals only, as the DBC declares)."""

    name: str
    frame_id: int
    length: int
    signals: tuple[SignalLayout, ...]

    def __post_init__(self) -> None:
        # per signal, the fields the loops below read, as one tuple (attribute and property reads cost more than
        # the packing itself at thousands of frames per second)
        fields = tuple(
            (s.name, s.start_bit, s.mask, s.length, s.is_signed, s.is_float, s.scale, s.offset, s.minimum, s.maximum,
             s.raw_minimum, s.raw_maximum)
            for s in self.signals
        )  # fmt: skip
        object.__setattr__(self, "_fields", fields)

    def encode(self, values: Mapping[str, float], *, check_range: bool = True) -> bytes:
        """Pack physical values; like cantools strict mode, every signal is required and range-checked."""
        word = 0
        for name, start_bit, mask, _, _, is_float, scale, offset, minimum, maximum, _, _ in self._fields:
            try:
                value = values[name]
            except KeyError:
                raise SignalRangeError(
                    f"{self.name}: signal {name!r} is missing; required: {[x.name for x in self.signals]}"
                ) from None
            if check_range and not (minimum <= value <= maximum):
                raise SignalRangeError(f"{self.name}.{name} = {value!r} is outside [{minimum}, {maximum}] (DBC range)")
            if is_float:
                raw = int.from_bytes(_F32.pack(value), "little")
            else:
                # identical expression and rounding (round-half-even) to cantools' LinearConversion
                raw = round((value - offset) / scale) & mask
            word |= raw << start_bit
        return word.to_bytes(8, "little")[: self.length]

    def decode(self, data: bytes | bytearray, *, check_range: bool = False) -> dict[str, float]:
        if len(data) != self.length:
            raise FrameLengthError(f"{self.name} (id 0x{self.frame_id:03X}) needs {self.length} bytes, got {len(data)}")
        word = int.from_bytes(data, "little")
        out: dict[str, float] = {}
        for name, start_bit, mask, length, is_signed, is_float, scale, offset, minimum, maximum, lo, hi in self._fields:
            raw = (word >> start_bit) & mask
            if is_float:
                value = _F32.unpack(raw.to_bytes(4, "little"))[0]
                in_range = minimum <= value <= maximum
            else:
                if is_signed and raw >> (length - 1):
                    raw -= 1 << length
                value = raw * scale + offset
                in_range = lo <= raw <= hi
            if check_range and not in_range:
                raise SignalRangeError(f"{self.name}.{name} = {value!r} is outside [{minimum}, {maximum}] (DBC range)")
            out[name] = value
        return out


@dataclass(frozen=True)
class DecodedFrame:
    kind: MessageKind
    node: int  # 0 for broadcasts
    values: dict[str, float]


class AikoCodec:
    """Encode/decode by (kind, node) and classify frame ids; one instance per process is enough."""

    def __init__(self) -> None:
        database = load_database()
        self.scheme: IdScheme = id_scheme()
        self._by_id: dict[int, MessageLayout] = {m.frame_id: _compile(m) for m in database.messages}
        self._by_kind: dict[tuple[MessageKind, int], MessageLayout] = {}  # filled on use

    def layout(self, kind: MessageKind, node: int = 0) -> MessageLayout:
        try:
            return self._by_kind[kind, node]
        except KeyError:
            layout = self._by_kind[kind, node] = self._by_id[self.scheme.frame_id(kind, node)]
            return layout

    def frame_id(self, kind: MessageKind, node: int = 0) -> int:
        return self.scheme.frame_id(kind, node)

    def encode(self, kind: MessageKind, node: int, values: Mapping[str, float]) -> tuple[int, bytes]:
        """(frame id, payload) of one message; raises SignalRangeError naming the signal and its range."""
        layout = self.layout(kind, node)
        return layout.frame_id, layout.encode(values)

    def decode(self, frame_id: int, data: bytes | bytearray, *, check_range: bool = True) -> DecodedFrame:
        """Decode a protocol frame; UnknownFrameError/FrameLengthError/SignalRangeError on bad traffic."""
        classified = self.scheme.classify(frame_id)
        if classified is None:
            raise UnknownFrameError(f"frame id 0x{frame_id:03X} is not defined in aiko_joint.dbc")
        layout = self._by_id[frame_id]
        return DecodedFrame(classified[0], classified[1], layout.decode(data, check_range=check_range))


def _compile(message) -> MessageLayout:
    signals = []
    for s in message.signals:
        if s.byte_order != "little_endian":
            raise ValueError(f"{message.name}.{s.name}: only little-endian (Intel) signals are supported")
        lo = s.minimum if s.minimum is not None else -math.inf
        hi = s.maximum if s.maximum is not None else math.inf
        field_lo, field_hi = (
            (-(1 << (s.length - 1)), (1 << (s.length - 1)) - 1) if s.is_signed else (0, (1 << s.length) - 1)
        )
        raw_lo, raw_hi = field_lo, field_hi
        if not s.is_float and math.isfinite(lo):
            raw_lo = max(field_lo, math.ceil((lo - s.offset) / s.scale - 1e-9))
        if not s.is_float and math.isfinite(hi):
            raw_hi = min(field_hi, math.floor((hi - s.offset) / s.scale + 1e-9))
        signals.append(
            SignalLayout(
                name=s.name,
                start_bit=s.start,
                length=s.length,
                is_signed=s.is_signed,
                is_float=s.is_float,
                scale=s.scale,
                offset=s.offset,
                minimum=lo,
                maximum=hi,
                raw_minimum=raw_lo,
                raw_maximum=raw_hi,
            )
        )
    return MessageLayout(message.name, message.frame_id, message.length, tuple(signals))


@functools.cache
def default_codec() -> AikoCodec:
    return AikoCodec()


__all__ = ["AikoCodec", "DecodedFrame", "MessageLayout", "SignalLayout", "default_codec", "message_name"]
