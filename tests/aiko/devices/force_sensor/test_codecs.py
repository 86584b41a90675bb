"""Encode/decode round trips of the RDT (UDP) and OptoForce DAQ (serial) codecs, and their rejections."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.core.errors import ConfigError
from aiko.devices.force_sensor import daq_serial, rdt
from aiko.devices.force_sensor.errors import ChecksumError, FrameError
from aiko.devices.force_sensor.wrench import ONROBOT_HEX_DEFAULT, CountsScale, Wrench

u32 = st.integers(0, 2**32 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-32768, 32767)
u16 = st.integers(0, 0xFFFF)
records = st.builds(rdt.RdtRecord, u32, u32, u32, st.tuples(i32, i32, i32, i32, i32, i32))


@given(st.sampled_from(list(rdt.RdtCommand)), u32)
def test_rdt_request_round_trip(command, data):
    packet = rdt.encode_request(rdt.RdtRequest(command, data))
    assert len(packet) == 8 and packet[:2] == b"\x12\x34"
    assert rdt.decode_request(packet) == rdt.RdtRequest(command, data)


def test_rdt_request_wire_bytes():
    """Start real-time streaming, infinite samples: 12 34 00 02 00 00 00 00 (big-endian, as the manual shows)."""
    assert rdt.encode_request(rdt.RdtRequest(rdt.RdtCommand.START_REALTIME)) == bytes.fromhex("1234000200000000")
    assert rdt.encode_request(rdt.RdtRequest(rdt.RdtCommand.SET_SPEED, 1)) == bytes.fromhex("1234008200000001")


@pytest.mark.parametrize(
    "packet",
    [b"", bytes.fromhex("12340002000000"), bytes.fromhex("4321000200000000"), bytes.fromhex("1234777700000000")],
)
def test_rdt_request_rejections(packet):
    with pytest.raises(FrameError):
        rdt.decode_request(packet)


@given(st.lists(records, min_size=1, max_size=40))
def test_rdt_records_round_trip(recs):
    datagram = b"".join(rdt.encode_record(r) for r in recs)
    assert len(datagram) == 36 * len(recs)
    assert rdt.decode_records(datagram) == recs


@given(records, st.integers(1, 35))
def test_rdt_truncated_or_padded_datagram_is_rejected_whole(record, cut):
    data = rdt.encode_record(record)
    with pytest.raises(FrameError):
        rdt.decode_records(data[:-cut])
    with pytest.raises(FrameError):
        rdt.decode_records(data + data[:cut])


def test_rdt_record_layout_is_big_endian():
    data = rdt.encode_record(rdt.RdtRecord(1, 2, 3, (-1, 2, -3, 4, -5, 6)))
    assert data[:12] == bytes.fromhex("000000010000000200000003") and data[12:16] == b"\xff\xff\xff\xff"
    with pytest.raises(FrameError):
        rdt.encode_record(rdt.RdtRecord(1, 2, 3, (2**31, 0, 0, 0, 0, 0)))


@pytest.mark.parametrize("n_values", [3, 6, 12])
@given(data=st.data())
def test_daq_frame_round_trip(n_values, data):
    frame = daq_serial.DaqFrame(data.draw(u16), data.draw(u16), tuple(data.draw(i16) for _ in range(n_values)))
    raw = daq_serial.encode_frame(frame)
    assert len(raw) == {3: 16, 6: 22, 12: 34}[n_values]
    assert raw[:4] == bytes([0xAA, 0x07, 0x08, 4 + 2 * n_values])
    assert daq_serial.decode_frame(raw) == frame


@given(st.tuples(*[i16] * 6), u16, st.integers(4, 21), st.integers(1, 255))
def test_daq_any_single_byte_change_after_the_header_fails_the_checksum(values, counter, index, delta):
    raw = bytearray(daq_serial.encode_frame(daq_serial.DaqFrame(counter, 0, values)))
    raw[index] = (raw[index] + delta) % 256
    with pytest.raises(ChecksumError):
        daq_serial.decode_frame(bytes(raw))


def test_daq_checksum_is_the_byte_sum_including_the_header():
    raw = daq_serial.encode_frame(daq_serial.DaqFrame(1, 0, (1, 2, 3, 4, 5, 6)))
    assert struct.unpack(">H", raw[-2:])[0] == sum(raw[:-2])


@given(
    st.sampled_from([0, *daq_serial.SPEED_CODES_HZ]),
    st.sampled_from(list(daq_serial.FILTER_CODES_HZ)),
    st.sampled_from([0, 255]),
)
def test_daq_config_round_trip(speed, filt, zero):
    raw = daq_serial.encode_config(daq_serial.DaqConfig(speed, filt, zero))
    assert raw[:4] == bytes([170, 0, 50, 3]) and len(raw) == 9
    assert daq_serial.decode_config(raw) == daq_serial.DaqConfig(speed, filt, zero)


def test_daq_config_wire_bytes_and_rejections():
    # 1000 Hz, 15 Hz filter, no zero: checksum = 170 + 0 + 50 + 3 + 1 + 4 + 0 = 228
    assert daq_serial.encode_config(daq_serial.DaqConfig(1, 4, 0)) == bytes([170, 0, 50, 3, 1, 4, 0, 0, 228])
    with pytest.raises(ChecksumError):
        daq_serial.decode_config(bytes([170, 0, 50, 3, 1, 4, 0, 0, 229]))
    with pytest.raises(FrameError):
        daq_serial.encode_config(daq_serial.DaqConfig(2, 0, 0))  # 500 Hz is not a DAQ rate
    assert daq_serial.speed_code_for_rate(1000) == 1 and daq_serial.speed_code_for_rate(100) == 10
    with pytest.raises(FrameError):
        daq_serial.speed_code_for_rate(500)


@given(
    st.lists(st.tuples(u16, st.tuples(*[i16] * 6)), min_size=1, max_size=20),
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\xaa", b"\x55")), min_size=21, max_size=21),
    st.lists(st.integers(1, 50), min_size=1, max_size=10),
)
def test_frame_parser_recovers_every_frame_through_garbage_and_any_chunking(frames, garbage, chunk_sizes):
    stream = b""
    for (counter, values), junk in zip(frames, garbage, strict=False):
        stream += junk + daq_serial.encode_frame(daq_serial.DaqFrame(counter, 0, values))
    stream += garbage[-1]
    parser = daq_serial.FrameParser()
    out, i, k = [], 0, 0
    while i < len(stream):
        n = chunk_sizes[k % len(chunk_sizes)]
        out += parser.feed(stream[i : i + n])
        i, k = i + n, k + 1
    assert [(f.counter, f.values) for f in out] == frames
    assert parser.garbage_bytes == sum(len(g) for g in garbage[: len(frames)]) + len(garbage[-1])
    assert parser.checksum_failures == 0


def test_frame_parser_counts_bad_checksums_exactly_and_keeps_the_next_frame():
    good = [daq_serial.encode_frame(daq_serial.DaqFrame(c, 0, (c, 0, 0, 0, 0, 0))) for c in range(5)]
    bad = good[2][:-1] + bytes([good[2][-1] ^ 1])
    parser = daq_serial.FrameParser()
    out = parser.feed(good[0] + good[1] + bad + good[3] + good[4])
    assert [f.counter for f in out] == [0, 1, 3, 4]
    assert parser.checksum_failures == 1 and parser.garbage_bytes == 0


def test_overload_bits_are_bits_9_to_4():
    assert daq_serial.overload_bits((True, False, False, False, False, True)) == (1 << 9) | (1 << 4)
    assert daq_serial.overloaded_axes(1 << 7) == (False, False, True, False, False, False)


@given(st.tuples(*[st.floats(-300, 300)] * 3 + [st.floats(-20, 20)] * 3))
def test_counts_scale_round_trip_within_one_count(wrench):
    scale = ONROBOT_HEX_DEFAULT
    force, torque = scale.to_si(scale.to_counts(wrench))
    for got, want in zip((*force, *torque), wrench, strict=True):
        assert abs(got - want) <= 0.5 / min(scale.counts_per_n, scale.counts_per_nm) + 1e-12


def test_scale_and_wrench_payload():
    with pytest.raises(ConfigError):
        CountsScale(0, 1)
    w = Wrench((1.0, 2.0, 3.0), (0.1, 0.2, 0.3), sequence=7, t_ns=99, status=0, saturated=True)
    assert w.as_payload() == {
        "fx_n": 1.0,
        "fy_n": 2.0,
        "fz_n": 3.0,
        "tx_nm": 0.1,
        "ty_nm": 0.2,
        "tz_nm": 0.3,
        "sequence": 7,
        "t_ns": 99,
        "status": 0,
        "saturated": True,
    }
