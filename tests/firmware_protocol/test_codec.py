"""The DBC loads, its id scheme is regular, and the fast codec matches cantools byte for byte."""

import math

import cantools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.bus_load import _crc15, exact_frame_bits, protocol_bus_load, worst_case_frame_bits
from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import DBC_PATH, MessageKind, id_scheme, load_database
from firmware_protocol.errors import FrameLengthError, SignalRangeError, UnknownFrameError

DB = load_database()
CODEC = default_codec()


def test_dbc_loads_strictly_with_standard_ids_and_estop_first():
    db = cantools.database.load_file(str(DBC_PATH), strict=True)
    ids = [m.frame_id for m in db.messages]
    assert all(0 <= fid < 0x800 and not m.is_extended_frame for fid, m in zip(ids, db.messages, strict=True))
    assert len(set(ids)) == len(ids)
    assert min(ids) == db.get_message_by_name("EmergencyStop").frame_id == 0  # highest priority on the bus
    assert db.get_message_by_name("Command").frame_id < min(id_scheme().node_bases.values())


def test_angle_signals_meet_resolution_and_range():
    for message in DB.messages:
        for s in message.signals:
            if s.unit == "deg":
                assert s.scale <= 0.01
                assert s.minimum <= -180 and s.maximum >= 180
                raw_bits_needed = math.log2((s.maximum - s.minimum) / s.scale + 1)
                assert s.length >= raw_bits_needed


def test_per_node_families_share_one_layout():
    scheme = id_scheme()
    assert scheme.node_ids == tuple(range(1, 11))
    for kind, base in scheme.node_bases.items():
        layouts = {
            tuple((s.name, s.start, s.length, s.is_signed, s.scale, s.offset, s.minimum, s.maximum) for s in m.signals)
            for m in (DB.get_message_by_frame_id(base + n) for n in scheme.node_ids)
        }
        assert len(layouts) == 1, kind


def _signal_strategy(signal):
    if signal.is_float:
        return st.floats(-1e6, 1e6, width=32, allow_nan=False)
    raw_lo = math.ceil((signal.minimum - signal.offset) / signal.scale - 1e-9)
    raw_hi = math.floor((signal.maximum - signal.offset) / signal.scale + 1e-9)
    raw = st.integers(raw_lo, raw_hi)
    # exact grid points and arbitrary reals in range (rounding must agree with cantools too)
    real = st.floats(signal.minimum, signal.maximum, allow_nan=False)
    return st.one_of(raw.map(lambda r: r * signal.scale + signal.offset), real)


@st.composite
def message_and_values(draw):
    message = draw(st.sampled_from(DB.messages))
    values = {s.name: draw(_signal_strategy(s)) for s in message.signals}
    values = {k: min(max(v, s.minimum), s.maximum) for (k, v), s in zip(values.items(), message.signals, strict=True)}
    return message, values


@settings(max_examples=1500, deadline=None)
@given(message_and_values())
def test_fast_codec_equals_cantools_over_full_ranges(case):
    message, values = case
    expected = message.encode(values, strict=True)
    layout = CODEC._by_id[message.frame_id]
    data = layout.encode(values)
    assert data == expected
    ours = CODEC.decode(message.frame_id, data).values
    theirs = message.decode(expected, decode_choices=False)
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, rel=0, abs=1e-12) or ours[name] == value
        s = message.get_signal_by_name(name)
        tolerance = s.scale / 2 + 1e-9 if not s.is_float else abs(values[name]) * 1e-7
        assert abs(ours[name] - values[name]) <= tolerance  # round trip within resolution


def test_every_message_round_trips_at_its_extremes():
    for message in DB.messages:
        for pick in (
            lambda s: s.minimum,
            lambda s: s.maximum,
            lambda s: 0 if s.minimum <= 0 <= s.maximum else s.minimum,
        ):
            values = {s.name: pick(s) for s in message.signals}
            data = CODEC._by_id[message.frame_id].encode(values)
            assert data == message.encode(values, strict=True)
            decoded = CODEC.decode(message.frame_id, data).values
            for s in message.signals:
                assert decoded[s.name] == pytest.approx(values[s.name], rel=1e-6, abs=s.scale / 2)


def test_bad_traffic_raises_specific_errors():
    fid = CODEC.frame_id(MessageKind.REFERENCE, 4)
    good = dict(AngleH=10.0, AngleV=-5.0, RateH=1.0, RateV=0.0, Sequence=7)
    with pytest.raises(SignalRangeError, match=r"AngleH = 180.5 is outside \[-180, 180\]"):
        CODEC.encode(MessageKind.REFERENCE, 4, {**good, "AngleH": 180.5})
    with pytest.raises(SignalRangeError, match="missing"):
        CODEC.encode(MessageKind.REFERENCE, 4, {"AngleH": 1.0})
    with pytest.raises(FrameLengthError, match="needs 8 bytes, got 7"):
        CODEC.decode(fid, bytes(7))
    with pytest.raises(UnknownFrameError, match="0x7FF"):
        CODEC.decode(0x7FF, bytes(8))
    out_of_range = (18001).to_bytes(2, "little", signed=True) + bytes(6)  # 180.01 deg fits int16 but not the DBC
    with pytest.raises(SignalRangeError, match="AngleH"):
        CODEC.decode(fid, out_of_range)
    assert CODEC.decode(fid, out_of_range, check_range=False).values["AngleH"] == pytest.approx(180.01)
    with pytest.raises(ValueError, match="node 11"):
        CODEC.frame_id(MessageKind.REFERENCE, 11)


def test_crc15_matches_the_published_check_value():
    bits = [(b >> i) & 1 for b in b"123456789" for i in range(7, -1, -1)]
    assert _crc15(bits) == 0x059E  # CRC-15/CAN check value from the CRC catalogue


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 0x7FF), st.binary(min_size=0, max_size=8))
def test_exact_frame_length_is_within_iso_bounds(frame_id, data):
    bits = exact_frame_bits(frame_id, data)
    assert 47 + 8 * len(data) <= bits <= worst_case_frame_bits(len(data))


def test_bus_load_numbers_in_docs():
    assert worst_case_frame_bits(8) == 135
    load_10 = protocol_bus_load(10, 10)
    load_100 = protocol_bus_load(100, 100)
    assert load_10.frames_per_s == 310 and load_10.load_fraction == pytest.approx(0.04145)
    assert load_100.frames_per_s == 3010 and load_100.load_fraction == pytest.approx(0.40595)
