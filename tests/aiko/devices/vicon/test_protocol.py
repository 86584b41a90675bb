"""The ViconCGStream codec: every object survives encode → decode, packets split anywhere in a TCP stream are
reassembled, the byte layout matches the SDK headers, and broken input is a one-line protocol error."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.devices.vicon import protocol as p

u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
f64 = st.floats(allow_nan=False, width=64)
f32 = st.floats(allow_nan=False, width=32)
names = st.text(max_size=12)


def tup(strategy, n):
    return st.tuples(*([strategy] * n))


segment_info = st.builds(p.SegmentInfo, u32, u32, tup(f32, 6), names)
subject_info = st.builds(
    p.SubjectInfo,
    u32,
    names,
    st.lists(segment_info, max_size=4).map(tuple),
    st.lists(st.builds(p.MarkerInfo, u32, names), max_size=4).map(tuple),
    st.lists(st.builds(p.Attachment, u32, u32), max_size=4).map(tuple),
)
poses = st.lists(st.builds(p.SegmentPose, u32, tup(f64, 3), tup(f64, 9)), max_size=4).map(tuple)
recon = st.builds(p.LabeledRecon, u32, u32, f64, tup(f64, 3), tup(f64, 9), u32)
objects = st.one_of(
    st.builds(p.StreamInfo, st.integers(-(2**63), 2**63 - 1)),
    st.builds(p.FrameInfo, u32),
    subject_info,
    st.builds(p.GlobalSegments, u32, poses),
    st.builds(p.LocalSegments, u32, poses),
    st.builds(p.LabeledRecons, st.lists(recon, max_size=3).map(tuple)),
    st.builds(p.LatencyInfo, st.lists(st.builds(p.LatencySample, names, f64), max_size=3).map(tuple)),
    st.builds(p.ApplicationInfo, st.sampled_from([0, 1])),
    st.builds(p.Timecode, u8, u8, u8, u8, u16, u16, u32, u32, u8),
    st.builds(
        p.Contents,
        st.dictionaries(u32, u32, max_size=4).map(lambda d: tuple(sorted(d.items()))),
        st.frozensets(u32, max_size=4),
    ),
    st.builds(p.ObjectEnums, st.frozensets(u32, max_size=8)),
    st.builds(p.RequestFrame, st.booleans()),
    st.builds(p.RequestNextFrame, u32),
    st.builds(p.Ping, st.integers(0, 2**64 - 1)),
    st.just(p.KeepAlive()),
)


@settings(max_examples=300, deadline=None)
@given(obj=objects)
def test_every_object_round_trips(obj):
    encoded = obj.encode()
    type_id, length = struct.unpack_from("<II", encoded)
    assert type_id == int(obj.TYPE) and length == len(encoded) - 8
    assert p.decode_object(type_id, encoded[8:]) == obj


@settings(max_examples=100, deadline=None)
@given(packets=st.lists(st.lists(objects, max_size=4), min_size=1, max_size=4), cuts=st.lists(st.integers(0, 4000)))
def test_packets_split_anywhere_in_the_stream_come_back_whole(packets, cuts):
    data = b"".join(p.encode_packet(objs) for objs in packets)
    stream = p.PacketStream()
    got = []
    start = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
        stream.feed(data[start:cut])
        got.extend(stream.packets())
        start = cut
    assert got == packets


def test_layout_matches_the_sdk_headers():
    # StreamInfo.h: Int64 FramePeriod in 135 MHz ticks; 100 Hz -> 1 350 000
    assert p.StreamInfo.for_rate(100.0).encode() == struct.pack("<IIq", 1, 8, 1_350_000)
    # ApplicationInfo.h: EAxisOrientation is a Char enum (one byte)
    assert p.ApplicationInfo(1).encode() == struct.pack("<IIB", 37, 1, 1)
    # Timecode.h Read order: H M S Frames Subframes SubframesPerFrame Standard UserBits FieldFlag
    tc = p.Timecode(1, 2, 3, 4, 5, 6, standard=7, user_bits=8, field_flag=9).encode()
    assert tc == struct.pack("<II4B2H2IB", 23, 17, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    # SubjectInfo.h + SubjectInfoDetail.h: id, name, segments{parent, id, f32 bounds[6], name}, markers, attachments
    segment = p.SegmentInfo(0, 1, (0.0,) * 6, "s")
    info = p.SubjectInfo(3, "ab", (segment,), (p.MarkerInfo(2, "m"),), (p.Attachment(2, 1),))
    body = struct.pack("<II2sIII6fI1sIII1sIII", 3, 2, b"ab", 1, 0, 1, *([0.0] * 6), 1, b"s", 1, 2, 1, b"m", 1, 2, 1)
    assert info.encode() == struct.pack("<II", 2, len(body)) + body
    # ObjectEnums.h: a std::set<Enum> is a count then sorted u32s; a packet is an Objects (0x1A2B0001) block
    assert p.encode_packet([p.ObjectEnums(frozenset({9, 1}))]) == struct.pack(
        "<IIIIIII", 0x1A2B0001, 20, 100001, 12, 2, 1, 9
    )


def test_unknown_objects_pass_through_by_length():
    packet = p.encode_packet([p.UnknownObject(31, b"\x01\x02\x03"), p.FrameInfo(7)])
    assert p.decode_packet(packet) == [p.UnknownObject(31, b"\x01\x02\x03"), p.FrameInfo(7)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack("<II", 0x12345678, 0), "expected 0x1A2B0001"),
        (struct.pack("<II", p.PACKET_TYPE, 12) + struct.pack("<II", 5, 8) + b"\0" * 4, "claims 8 bytes"),
        (struct.pack("<II", p.PACKET_TYPE, 16) + struct.pack("<II", 5, 4) + b"\0" * 4, "header says 16"),
        (struct.pack("<II", p.PACKET_TYPE, 13) + struct.pack("<II", 5, 5) + b"\0" * 5, "left over"),
        (struct.pack("<II", p.PACKET_TYPE, 16) + struct.pack("<IIII", 2, 8, 1, 0xFFFFFFFF), "runs past"),
    ],
)
def test_broken_packets_are_protocol_errors(data, message):
    with pytest.raises(p.ViconProtocolError, match=message):
        p.decode_packet(data)


def test_a_stream_of_garbage_is_refused_before_buffering_it():
    stream = p.PacketStream()
    stream.feed(struct.pack("<II", p.PACKET_TYPE, p.MAX_PACKET_BYTES + 1))
    with pytest.raises(p.ViconProtocolError, match="beyond any tracker frame"):
        list(stream.packets())
