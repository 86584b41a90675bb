"""RTDE packets: header framing, recipe packing, setup parsing."""

import struct

import pytest

from aiko.devices.ur import rtde_protocol as rp


def test_recipe_round_trip_keeps_every_type():
    names = ("timestamp", "actual_q", "robot_mode", "runtime_state", "joint_mode", "actual_digital_input_bits")
    recipe = rp.Recipe(3, names, tuple(rp.OUTPUT_TYPES[n] for n in names))
    values = {
        "timestamp": 1.5,
        "actual_q": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "robot_mode": 7,
        "runtime_state": 2,
        "joint_mode": [253] * 6,
        "actual_digital_input_bits": 2**40,
    }
    payload = recipe.pack(values)
    assert payload[0] == 3
    assert len(payload) == 1 + 8 + 48 + 4 + 4 + 24 + 8
    assert recipe.unpack(payload) == values


def test_values_are_big_endian():
    recipe = rp.Recipe(1, ("input_int_register_0",), ("INT32",))
    assert recipe.pack({"input_int_register_0": 24}) == b"\x01\x00\x00\x00\x18"


def test_split_packets_waits_for_a_whole_packet():
    data = bytearray(rp.packet(rp.CONTROL_PACKAGE_START) + rp.packet(rp.DATA_PACKAGE, b"\x01abc")[:5])
    assert rp.split_packets(data) == [(rp.CONTROL_PACKAGE_START, b"")]
    assert len(data) == 5
    data.extend(b"bc")
    assert rp.split_packets(data) == [(rp.DATA_PACKAGE, b"\x01abc")]
    assert data == bytearray()


def test_a_size_below_the_header_is_an_error():
    with pytest.raises(rp.ProtocolError):
        rp.split_packets(bytearray(b"\x00\x01U"))


def test_setup_outputs_protocol_2_carries_the_frequency():
    payload = struct.pack(">d", 500.0) + b"actual_q,runtime_state"
    assert rp.parse_setup_outputs(payload, 2) == (500.0, ["actual_q", "runtime_state"])
    assert rp.parse_setup_outputs(b"actual_q", 1) == (125.0, ["actual_q"])


def test_unknown_and_short_data_packages_fail_clearly():
    recipe = rp.Recipe(2, ("input_double_register_0",), ("DOUBLE",))
    with pytest.raises(rp.ProtocolError, match="recipe 2"):
        recipe.unpack(b"\x02\x00")
    assert not rp.Recipe(1, ("nope",), ("NOT_FOUND",)).valid


def test_text_message_layout():
    msg = rp.text_message("hi", "src", rp.MESSAGE_WARNING)
    assert msg == b"\x00\x0bM" + b"\x02hi" + b"\x03src" + b"\x02"
