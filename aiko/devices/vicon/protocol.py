"""The Vicon DataStream wire protocol (ViconCGStream over TCP): packets and the objects a tracker serves.

Facts from Vicon's DataStream SDK 1.11.0 sources (MIT licence), as shipped in the ``pyvicon-datastream`` 0.2.4
sdist under ``lib_src/vicondatastream-1.11.0/Vicon/CrossMarket/``:

- ``DataStream/ViconCGStream/Enum.h``: the object type ids (``Objects`` = 0x1A2B0001 is the packet header).
- ``StreamCommon/Buffer.h``, ``BufferDetail.h``: the encoding. Plain values are written raw in host byte order
  (little-endian on every platform Vicon ships), with no padding; ``bool`` is one byte; a ``std::string`` is a
  u32 length then its bytes (no NUL); ``std::vector``/``std::set`` a u32 count then the elements; ``std::map`` a
  u32 count then key, value pairs; fixed arrays raw.
- ``DataStream/ViconCGStream/ScopedWriter.h``/``ScopedReader.h`` and ``ViconCGStreamClient/CGStreamReaderWriter.cpp``:
  every block is ``u32 type, u32 length, payload``; a packet is one ``Objects`` block whose payload is a run of
  object blocks.
- One header per object (the ``Read``/``Write`` members give the field order): ``StreamInfo.h``, ``SubjectInfo.h``
  + ``SubjectInfoDetail.h``, ``FrameInfo.h``, ``GlobalSegments.h`` + ``GlobalSegmentsDetail.h``,
  ``LocalSegments.h`` + ``LocalSegmentsDetail.h``, ``LabeledRecons.h`` + ``LabeledReconsDetail.h``,
  ``LatencyInfo.h`` + ``LatencyInfoDetail.h``, ``ApplicationInfo.h`` (a ``Char`` enum), ``Timecode.h``,
  ``Contents.h``, ``ObjectEnums.h``, ``RequestFrame.h``, ``RequestNextFrame.h``, ``Ping.h``, ``KeepAlive.h``,
  ``StartMulticastSender.h``, ``StopMulticastSender.h``.

Written by hand with :mod:`struct` because no maintained Python library speaks this format: Vicon's SDK is C++
and ``pyvicon-datastream`` wraps only its client side.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

from aiko.core.errors import AikoError

PACKET_TYPE = 0x1A2B0001  # ViconCGStreamEnum::Objects
HEADER = struct.Struct("<II")
MAX_PACKET_BYTES = 64 * 1024 * 1024  # far above a tracker's frame; a larger length is a corrupt stream
TICKS_PER_SECOND = 135_000_000  # StreamInfo.m_FramePeriod unit (CoreClient.cpp GetFrameRate: 135000000 / Period)


class ViconProtocolError(AikoError):
    """Bytes that are not a valid ViconCGStream packet or object."""


class ObjectType(IntEnum):
    """``ViconCGStreamEnum`` values (Enum.h) of the objects this module encodes."""

    STREAM_INFO = 1
    SUBJECT_INFO = 2
    FRAME_INFO = 5
    LABELED_RECONS = 6
    LOCAL_SEGMENTS = 8
    GLOBAL_SEGMENTS = 9
    TIMECODE = 23
    LATENCY_INFO = 26
    APPLICATION_INFO = 37
    PING = 42
    OBJECT_ENUMS = 100001
    REQUEST_FRAME = 100002
    KEEP_ALIVE = 100003
    CONTENTS = 100004
    START_MULTICAST_SENDER = 100005
    STOP_MULTICAST_SENDER = 100006
    FILTER = 100007
    REQUEST_NEXT_FRAME = 100008


class _Reader:
    """Sequential little-endian reads over one payload; running short is a protocol error, not an IndexError."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def unpack(self, fmt: str) -> tuple:
        s = struct.Struct("<" + fmt)
        if self.pos + s.size > len(self.data):
            raise ViconProtocolError(f"{self.what}: payload ends {self.pos + s.size - len(self.data)} bytes early")
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def one(self, fmt: str) -> int | float | bool:
        return self.unpack(fmt)[0]

    def string(self) -> str:
        n = int(self.one("I"))
        if self.pos + n > len(self.data):
            raise ViconProtocolError(f"{self.what}: a string of {n} bytes runs past the payload")
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ViconProtocolError(f"{self.what}: a name is not UTF-8 ({exc.reason})") from None

    def count(self, min_item_bytes: int) -> int:
        n = int(self.one("I"))
        if n * min_item_bytes > len(self.data) - self.pos:
            raise ViconProtocolError(f"{self.what}: a count of {n} items runs past the payload")
        return n

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ViconProtocolError(f"{self.what}: {len(self.data) - self.pos} bytes left over after the object")


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def _floats(fmt: str, values: Sequence[float], n: int, what: str) -> bytes:
    if len(values) != n:
        raise ViconProtocolError(f"{what}: expected {n} numbers, got {len(values)}")
    return struct.pack(f"<{n}{fmt}", *values)


@dataclass(frozen=True)
class VObject:
    """One ViconCGStream object; subclasses give ``TYPE``, ``payload()`` and ``parse()``."""

    TYPE: ClassVar[ObjectType]

    def payload(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def parse(cls, reader: _Reader) -> VObject:
        raise NotImplementedError

    def encode(self) -> bytes:
        body = self.payload()
        return HEADER.pack(int(self.TYPE), len(body)) + body


@dataclass(frozen=True)
class StreamInfo(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.STREAM_INFO
    frame_period_ticks: int  # i64, 135 MHz ticks per frame

    @classmethod
    def for_rate(cls, rate_hz: float) -> StreamInfo:
        return cls(round(TICKS_PER_SECOND / rate_hz))

    def payload(self) -> bytes:
        return struct.pack("<q", self.frame_period_ticks)

    @classmethod
    def parse(cls, r: _Reader) -> StreamInfo:
        return cls(int(r.one("q")))


@dataclass(frozen=True)
class FrameInfo(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.FRAME_INFO
    frame_id: int  # u32; the client reports frame number = frame_id + 1

    def payload(self) -> bytes:
        return struct.pack("<I", self.frame_id)

    @classmethod
    def parse(cls, r: _Reader) -> FrameInfo:
        return cls(int(r.one("I")))


@dataclass(frozen=True)
class SegmentInfo:
    parent_id: int  # 0 = the root (the client looks parents up by id)
    segment_id: int
    bounds: tuple[float, ...]  # f32[6]
    name: str


@dataclass(frozen=True)
class MarkerInfo:
    marker_id: int
    name: str


@dataclass(frozen=True)
class Attachment:
    marker_id: int
    segment_id: int


@dataclass(frozen=True)
class SubjectInfo(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.SUBJECT_INFO
    subject_id: int
    name: str
    segments: tuple[SegmentInfo, ...] = ()
    markers: tuple[MarkerInfo, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    def payload(self) -> bytes:
        out = [struct.pack("<I", self.subject_id), _string(self.name), struct.pack("<I", len(self.segments))]
        for s in self.segments:
            out += [struct.pack("<II", s.parent_id, s.segment_id), _floats("f", s.bounds, 6, "segment bounds")]
            out.append(_string(s.name))
        out.append(struct.pack("<I", len(self.markers)))
        for m in self.markers:
            out += [struct.pack("<I", m.marker_id), _string(m.name)]
        out.append(struct.pack("<I", len(self.attachments)))
        out += [struct.pack("<II", a.marker_id, a.segment_id) for a in self.attachments]
        return b"".join(out)

    @classmethod
    def parse(cls, r: _Reader) -> SubjectInfo:
        subject_id, name = int(r.one("I")), r.string()
        segments = []
        for _ in range(r.count(36)):
            parent, seg = r.unpack("II")
            bounds = r.unpack("6f")
            segments.append(SegmentInfo(parent, seg, tuple(bounds), r.string()))
        markers = tuple(MarkerInfo(int(r.one("I")), r.string()) for _ in range(r.count(8)))
        attachments = tuple(Attachment(*r.unpack("II")) for _ in range(r.count(8)))
        return cls(subject_id, name, tuple(segments), markers, attachments)


@dataclass(frozen=True)
class SegmentPose:
    segment_id: int
    translation_mm: tuple[float, float, float]  # f64[3]
    rotation: tuple[float, ...]  # f64[9], row-major segment → world


@dataclass(frozen=True)
class GlobalSegments(VObject):
    """Poses of one subject's segments; a segment left out of the list is occluded for the client."""

    TYPE: ClassVar[ObjectType] = ObjectType.GLOBAL_SEGMENTS
    subject_id: int
    segments: tuple[SegmentPose, ...] = ()

    def payload(self) -> bytes:
        out = [struct.pack("<II", self.subject_id, len(self.segments))]
        for s in self.segments:
            out += [struct.pack("<I", s.segment_id), _floats("d", s.translation_mm, 3, "translation")]
            out.append(_floats("d", s.rotation, 9, "rotation"))
        return b"".join(out)

    @classmethod
    def parse(cls, r: _Reader) -> GlobalSegments:
        subject_id = int(r.one("I"))
        segs = []
        for _ in range(r.count(100)):
            seg_id = int(r.one("I"))
            segs.append(SegmentPose(seg_id, tuple(r.unpack("3d")), tuple(r.unpack("9d"))))
        return cls(subject_id, tuple(segs))


@dataclass(frozen=True)
class LocalSegments(GlobalSegments):
    """The same layout as GlobalSegments, poses relative to the parent segment."""

    TYPE: ClassVar[ObjectType] = ObjectType.LOCAL_SEGMENTS


@dataclass(frozen=True)
class LabeledRecon:
    subject_id: int
    marker_id: int
    radius_mm: float
    position_mm: tuple[float, float, float]
    covariance: tuple[float, ...] = (0.0,) * 9
    trajectory_id: int = 0


@dataclass(frozen=True)
class LabeledRecons(VObject):
    """Labelled marker positions of every subject; a marker left out is occluded for the client."""

    TYPE: ClassVar[ObjectType] = ObjectType.LABELED_RECONS
    recons: tuple[LabeledRecon, ...] = ()

    def payload(self) -> bytes:
        out = [struct.pack("<I", len(self.recons))]
        for m in self.recons:
            out += [struct.pack("<IId", m.subject_id, m.marker_id, m.radius_mm)]
            out += [_floats("d", m.position_mm, 3, "marker position"), _floats("d", m.covariance, 9, "covariance")]
            out.append(struct.pack("<I", m.trajectory_id))
        return b"".join(out)

    @classmethod
    def parse(cls, r: _Reader) -> LabeledRecons:
        recons = []
        for _ in range(r.count(112)):
            subject_id, marker_id, radius = r.unpack("IId")
            pos, cov = tuple(r.unpack("3d")), tuple(r.unpack("9d"))
            recons.append(LabeledRecon(int(subject_id), int(marker_id), float(radius), pos, cov, int(r.one("I"))))
        return cls(tuple(recons))


@dataclass(frozen=True)
class LatencySample:
    name: str
    latency_s: float


@dataclass(frozen=True)
class LatencyInfo(VObject):
    """Named latency contributions in seconds; the client's ``GetLatencyTotal`` is their sum."""

    TYPE: ClassVar[ObjectType] = ObjectType.LATENCY_INFO
    samples: tuple[LatencySample, ...] = ()

    def payload(self) -> bytes:
        out = [struct.pack("<I", len(self.samples))]
        out += [_string(s.name) + struct.pack("<d", s.latency_s) for s in self.samples]
        return b"".join(out)

    @classmethod
    def parse(cls, r: _Reader) -> LatencyInfo:
        return cls(tuple(LatencySample(r.string(), float(r.one("d"))) for _ in range(r.count(12))))

    @property
    def total_s(self) -> float:
        return sum(s.latency_s for s in self.samples)


@dataclass(frozen=True)
class ApplicationInfo(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.APPLICATION_INFO
    Z_UP: ClassVar[int] = 0
    Y_UP: ClassVar[int] = 1
    axis_orientation: int = 0  # EAxisOrientation : Char

    def payload(self) -> bytes:
        return struct.pack("<B", self.axis_orientation)

    @classmethod
    def parse(cls, r: _Reader) -> ApplicationInfo:
        return cls(int(r.one("B")))


@dataclass(frozen=True)
class Timecode(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.TIMECODE
    hours: int = 0
    minutes: int = 0
    seconds: int = 0
    frames: int = 0
    subframes: int = 0
    subframes_per_frame: int = 1
    standard: int = 0  # 0 = none (Timecode.h ETimecodeStandard)
    user_bits: int = 0
    field_flag: int = 0

    _FORMAT: ClassVar[str] = "<BBBBHHIIB"  # the Read order of Timecode.h (standard before user bits)

    def payload(self) -> bytes:
        return struct.pack(
            self._FORMAT,
            self.hours,
            self.minutes,
            self.seconds,
            self.frames,
            self.subframes,
            self.subframes_per_frame,
            self.standard,
            self.user_bits,
            self.field_flag,
        )

    @classmethod
    def parse(cls, r: _Reader) -> Timecode:
        return cls(*(int(v) for v in r.unpack(cls._FORMAT[1:])))


@dataclass(frozen=True)
class Contents(VObject):
    """Which object types a frame holds (type → count) and which are unchanged since the last frame."""

    TYPE: ClassVar[ObjectType] = ObjectType.CONTENTS
    enums_table: tuple[tuple[int, int], ...] = ()  # std::map: sorted (type, count) pairs
    unchanged: frozenset[int] = field(default_factory=frozenset)

    def payload(self) -> bytes:
        table = sorted(dict(self.enums_table).items())
        out = [struct.pack("<I", len(table))] + [struct.pack("<II", k, v) for k, v in table]
        out.append(_set_u32(self.unchanged))
        return b"".join(out)

    @classmethod
    def parse(cls, r: _Reader) -> Contents:
        table = tuple(tuple(int(v) for v in r.unpack("II")) for _ in range(r.count(8)))
        return cls(table, frozenset(int(r.one("I")) for _ in range(r.count(4))))  # type: ignore[arg-type]


def _set_u32(values: Iterable[int]) -> bytes:
    items = sorted(set(values))  # std::set iterates in order
    return struct.pack(f"<I{len(items)}I", len(items), *items)


@dataclass(frozen=True)
class ObjectEnums(VObject):
    """Server → client first: the types it can send; client → server: the subset it wants."""

    TYPE: ClassVar[ObjectType] = ObjectType.OBJECT_ENUMS
    enums: frozenset[int] = field(default_factory=frozenset)

    def payload(self) -> bytes:
        return _set_u32(self.enums)

    @classmethod
    def parse(cls, r: _Reader) -> ObjectEnums:
        return cls(frozenset(int(r.one("I")) for _ in range(r.count(4))))


@dataclass(frozen=True)
class RequestFrame(VObject):
    """``streaming`` False: send one frame now (ClientPull); True: push every frame from now on (ServerPush)."""

    TYPE: ClassVar[ObjectType] = ObjectType.REQUEST_FRAME
    streaming: bool = False

    def payload(self) -> bytes:
        return struct.pack("<?", self.streaming)

    @classmethod
    def parse(cls, r: _Reader) -> RequestFrame:
        return cls(bool(r.one("B")))


@dataclass(frozen=True)
class RequestNextFrame(VObject):
    """ClientPullPreFetch: send the next ``count`` new frames when they exist."""

    TYPE: ClassVar[ObjectType] = ObjectType.REQUEST_NEXT_FRAME
    count: int = 1

    def payload(self) -> bytes:
        return struct.pack("<I", self.count)

    @classmethod
    def parse(cls, r: _Reader) -> RequestNextFrame:
        return cls(int(r.one("I")))


@dataclass(frozen=True)
class Ping(VObject):
    """Client → server after frames; echoed back, it gives the client its round-trip time."""

    TYPE: ClassVar[ObjectType] = ObjectType.PING
    ping_id: int = 0

    def payload(self) -> bytes:
        return struct.pack("<Q", self.ping_id)

    @classmethod
    def parse(cls, r: _Reader) -> Ping:
        return cls(int(r.one("Q")))


@dataclass(frozen=True)
class KeepAlive(VObject):
    TYPE: ClassVar[ObjectType] = ObjectType.KEEP_ALIVE

    def payload(self) -> bytes:
        return b""

    @classmethod
    def parse(cls, r: _Reader) -> KeepAlive:
        return cls()


@dataclass(frozen=True)
class StartMulticastSender(VObject):
    """Client → server (``StartTransmittingMulticast``): send the frames this client receives to a multicast group too.

    The addresses are ``boost::asio::ip::address_v4::to_ulong()`` values (``ViconCGStreamClient.cpp``,
    ``SetServerToTransmitMulticast``): the address as a number, 239.0.0.1 = 0xEF000001, written raw like any u32.
    """

    TYPE: ClassVar[ObjectType] = ObjectType.START_MULTICAST_SENDER
    multicast_ip: int = 0  # u32, the group (or 255.255.255.255, broadcast)
    source_ip: int = 0  # u32, the server interface to send from
    port: int = 44801  # u16

    def payload(self) -> bytes:
        return struct.pack("<IIH", self.multicast_ip, self.source_ip, self.port)

    @classmethod
    def parse(cls, r: _Reader) -> StartMulticastSender:
        return cls(*(int(v) for v in r.unpack("IIH")))


@dataclass(frozen=True)
class StopMulticastSender(VObject):
    """Client → server (``StopTransmittingMulticast``): no payload."""

    TYPE: ClassVar[ObjectType] = ObjectType.STOP_MULTICAST_SENDER

    def payload(self) -> bytes:
        return b""

    @classmethod
    def parse(cls, r: _Reader) -> StopMulticastSender:
        return cls()


@dataclass(frozen=True)
class UnknownObject:
    """An object type this module does not decode (the client and server skip those by length)."""

    type_id: int
    data: bytes

    def encode(self) -> bytes:
        return HEADER.pack(self.type_id, len(self.data)) + self.data


OBJECT_CLASSES: dict[int, type[VObject]] = {
    int(c.TYPE): c
    for c in (
        StreamInfo,
        SubjectInfo,
        FrameInfo,
        LabeledRecons,
        LocalSegments,
        GlobalSegments,
        Timecode,
        LatencyInfo,
        ApplicationInfo,
        Ping,
        ObjectEnums,
        RequestFrame,
        KeepAlive,
        Contents,
        StartMulticastSender,
        StopMulticastSender,
        RequestNextFrame,
    )
}

AnyObject = VObject | UnknownObject


def encode_packet(objects: Iterable[VObject | UnknownObject]) -> bytes:
    body = b"".join(o.encode() for o in objects)
    return HEADER.pack(PACKET_TYPE, len(body)) + body


def decode_object(type_id: int, payload: bytes | memoryview) -> AnyObject:
    cls = OBJECT_CLASSES.get(type_id)
    if cls is None:
        return UnknownObject(type_id, bytes(payload))
    reader = _Reader(payload, f"{cls.__name__} ({type_id})")
    obj = cls.parse(reader)
    reader.done()
    return obj


def decode_body(body: bytes | memoryview) -> list[AnyObject]:
    """The objects in a packet's body (after its 8-byte header)."""
    view = memoryview(body)
    objects: list[AnyObject] = []
    pos = 0
    while pos < len(view):
        if pos + HEADER.size > len(view):
            raise ViconProtocolError(f"packet: {len(view) - pos} stray bytes after the last object")
        type_id, length = HEADER.unpack_from(view, pos)
        pos += HEADER.size
        if pos + length > len(view):
            raise ViconProtocolError(f"packet: object {type_id} claims {length} bytes, {len(view) - pos} remain")
        objects.append(decode_object(type_id, view[pos : pos + length]))
        pos += length
    return objects


def decode_packet(data: bytes) -> list[AnyObject]:
    """One complete packet (header included) → its objects."""
    if len(data) < HEADER.size:
        raise ViconProtocolError(f"packet: {len(data)} bytes is shorter than its header")
    kind, length = HEADER.unpack_from(data, 0)
    if kind != PACKET_TYPE:
        raise ViconProtocolError(f"packet: header type 0x{kind:08X}, expected 0x{PACKET_TYPE:08X} (Objects)")
    if length != len(data) - HEADER.size:
        raise ViconProtocolError(f"packet: header says {length} bytes of body, got {len(data) - HEADER.size}")
    return decode_body(memoryview(data)[HEADER.size :])


class PacketStream:
    """Splits a TCP byte stream into packets: ``feed(bytes)`` then iterate ``packets()``."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def packets(self) -> Iterator[list[AnyObject]]:
        while len(self._buffer) >= HEADER.size:
            kind, length = HEADER.unpack_from(self._buffer, 0)
            if kind != PACKET_TYPE:
                raise ViconProtocolError(f"stream: header type 0x{kind:08X}, expected 0x{PACKET_TYPE:08X} (Objects)")
            if length > MAX_PACKET_BYTES:
                raise ViconProtocolError(f"stream: a packet of {length} bytes is beyond any tracker frame")
            end = HEADER.size + length
            if len(self._buffer) < end:
                return
            body = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            yield decode_body(body)
