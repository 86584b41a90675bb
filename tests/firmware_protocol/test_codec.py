"""The DBC loads, its id scheme is regular, and the fast codec matches cantools byte for byte."""

import math

import cantools
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.bus_load import _crc15, exact_frame_bits, protocol_bus_load, worst_case_frame_bits
from firmware_protocol.codec import AikoCodec, _compile, default_codec
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


# ------------------------------------------------------------------ compiled afresh (mutation-testing survivors)
def _expected_raw_bounds(s) -> tuple[int, int]:
    """By enumeration: the smallest and largest raw value the signal's field holds that decodes inside the DBC's
    [minimum, maximum] (a millionth of a step of slack: decimal scales are not exact in binary)."""
    field = np.arange(-(1 << (s.length - 1)), 1 << (s.length - 1)) if s.is_signed else np.arange(1 << s.length)
    physical = field * s.scale + s.offset
    tolerance = 1e-6 * s.scale
    inside = field[(physical >= s.minimum - tolerance) & (physical <= s.maximum + tolerance)]
    return int(inside.min()), int(inside.max())


def _check_compiled_against_cantools(codec_layout, message):
    assert (codec_layout.name, codec_layout.frame_id, codec_layout.length) == (
        message.name,
        message.frame_id,
        message.length,
    )
    assert [s.name for s in codec_layout.signals] == [s.name for s in message.signals]
    for ours, theirs in zip(codec_layout.signals, message.signals, strict=True):
        assert (ours.start_bit, ours.length, ours.is_signed, ours.is_float) == (
            theirs.start,
            theirs.length,
            theirs.is_signed,
            theirs.is_float,
        )
        assert (ours.scale, ours.offset, ours.minimum, ours.maximum) == (
            theirs.scale,
            theirs.offset,
            theirs.minimum,
            theirs.maximum,
        )
        if not theirs.is_float:
            assert (ours.raw_minimum, ours.raw_maximum) == _expected_raw_bounds(theirs), theirs.name
    for pick in (lambda s: s.minimum, lambda s: s.maximum):
        values = {s.name: pick(s) for s in message.signals}
        data = codec_layout.encode(values)
        assert data == message.encode(values, strict=True)
        decoded = codec_layout.decode(data, check_range=True)  # DBC ranges are inclusive, as in cantools
        for s in message.signals:
            assert decoded[s.name] == pytest.approx(values[s.name], rel=1e-6, abs=s.scale / 2)


def test_a_codec_compiled_in_the_test_matches_the_dbc_signal_by_signal():
    """`CODEC` above is compiled once at import; this compiles a fresh one, so a fault in the compilation itself
    (field bounds, raw range, signal attributes) fails here rather than hiding in the shared instance."""
    fresh = AikoCodec()
    assert sorted(fresh._by_id) == sorted(m.frame_id for m in DB.messages)
    for message in DB.messages:
        _check_compiled_against_cantools(fresh._by_id[message.frame_id], message)
    frame_id, data = fresh.encode(
        MessageKind.REFERENCE, 3, dict(AngleH=1.5, AngleV=-2.0, RateH=4.0, RateV=0.0, Sequence=9)
    )
    decoded = fresh.decode(frame_id, data)
    assert (decoded.kind, decoded.node, decoded.values["Sequence"]) == (MessageKind.REFERENCE, 3, 9)


SYNTHETIC_DBC = """VERSION ""
BU_: A B
BO_ 100 Synthetic: 8 A
 SG_ Temperature : 0|8@1+ (0.5,-40) [-40|87.5] "degC" B
 SG_ Torque : 8|12@1- (0.25,2) [-400|400] "N.m" B
 SG_ Gain : 32|32@1- (1,0) [-1|1] "" B

BO_ 102 NoRange: 1 A
 SG_ Free : 0|8@1+ (1,0) [0|0] "" B

BO_ 103 BigEndian: 2 A
 SG_ Motorola : 7|16@0+ (1,0) [0|100] "" B

BO_ 101 WiderThanItsField: 2 A
 SG_ Signed : 0|8@1- (1,0) [-1000|1000] "" B
 SG_ Unsigned : 8|8@1+ (1,0) [-5|300] "" B
SIG_VALTYPE_ 100 Gain : 1;
"""


def test_offsets_and_float_ranges_that_the_aiko_dbc_does_not_use_are_compiled_right():
    """Every signal of aiko_joint.dbc has offset 0 and its one float has a range no float32 reaches, so a codec
    that added the offset instead of subtracting it, or made a float range exclusive, would pass the tests above.
    A synthetic DBC with offsets, a float range [-1, 1] and ranges wider than their fields pins them."""
    message = cantools.database.load_string(SYNTHETIC_DBC, strict=True).get_message_by_name("Synthetic")
    layout = _compile(message)
    _check_compiled_against_cantools(layout, message)
    for temperature in (-40.0, -39.5, 0.0, 25.25, 87.5):
        for torque in (-400.0, -1.75, 0.0, 2.0, 400.0):
            values = {"Temperature": temperature, "Torque": torque, "Gain": 0.5}
            data = layout.encode(values)
            assert data == message.encode(values, strict=True)
            assert layout.decode(data) == pytest.approx(message.decode(data, decode_choices=False), abs=1e-12)
    # a DBC range wider than the field: the raw range is the field's own
    wide = cantools.database.load_string(SYNTHETIC_DBC, strict=True).get_message_by_name("WiderThanItsField")
    bounds = [(s.raw_minimum, s.raw_maximum) for s in _compile(wide).signals]
    assert bounds == [(-128, 127), (0, 255)]
    # no range in the DBC ([0|0]): unbounded, the whole field is valid
    free = _compile(cantools.database.load_string(SYNTHETIC_DBC, strict=True).get_message_by_name("NoRange"))
    s = free.signals[0]
    assert (s.minimum, s.maximum, s.raw_minimum, s.raw_maximum) == (-math.inf, math.inf, 0, 255)
    assert free.decode(bytes([255]), check_range=True) == {"Free": 255}
    big_endian = cantools.database.load_string(SYNTHETIC_DBC, strict=True).get_message_by_name("BigEndian")
    with pytest.raises(ValueError, match=r"BigEndian\.Motorola: only little-endian \(Intel\) signals"):
        _compile(big_endian)
    out_of_range_gain = layout.encode({"Temperature": 0.0, "Torque": 0.0, "Gain": 1.5}, check_range=False)
    with pytest.raises(SignalRangeError, match="Gain"):
        layout.decode(out_of_range_gain, check_range=True)


def test_decode_reports_kind_and_node_and_a_layout_decodes_without_range_check_by_default():
    for kind, base in id_scheme().node_bases.items():
        for node in (1, 7, 10):
            layout = CODEC.layout(kind, node)
            data = layout.encode({s.name: 0 if s.minimum <= 0 <= s.maximum else s.minimum for s in layout.signals})
            decoded = CODEC.decode(base + node, data)
            assert (decoded.kind, decoded.node) == (kind, node)
    estop = CODEC.decode(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([0xA5]))
    assert (estop.kind, estop.node) == (MessageKind.EMERGENCY_STOP, 0)
    out_of_range = (18001).to_bytes(2, "little", signed=True) + bytes(6)
    assert CODEC.layout(MessageKind.REFERENCE, 4).decode(out_of_range)["AngleH"] == pytest.approx(180.01)


def test_a_per_node_message_without_a_node_is_refused_not_sent_to_node_1():
    with pytest.raises(ValueError, match="node 0"):
        CODEC.frame_id(MessageKind.REFERENCE)
    with pytest.raises(ValueError, match="node 0"):
        CODEC.layout(MessageKind.REFERENCE)
    assert CODEC.frame_id(MessageKind.EMERGENCY_STOP) == 0  # broadcasts need no node
