"""RTDE (Real-Time Data Exchange) packets: the header, the control packages and recipe-typed data packages.

Facts from Universal Robots' "Real-Time Data Exchange (RTDE) Guide" (universal-robots.com, interface
communication articles), cross-checked against the client ur_rtde (SINTEF, ``src/rtde.cpp`` and
``src/robot_state.cpp``), which is the client this module must satisfy:

* Every packet: ``uint16 size`` (header included), ``uint8 type``, payload; all fields big-endian.
* Types: 'V' 86 request protocol version (payload uint16; reply uint8 accepted), 'v' 118 get URControl version
  (reply 4 x uint32 major, minor, bugfix, build), 'M' 77 text message (protocol 2: uint8 length + message,
  uint8 length + source, uint8 warning level), 'U' 85 data package (uint8 recipe id + the recipe's fields),
  'O' 79 setup outputs (protocol 2: double frequency + comma-separated names; reply uint8 recipe id +
  comma-separated types, ``NOT_FOUND`` for an unknown name), 'I' 73 setup inputs (names; reply uint8 recipe
  id + types, ``IN_USE`` for a field another client holds), 'S' 83 start and 'P' 80 pause (reply uint8
  accepted).
* Field types: BOOL, UINT8, UINT32, UINT64, INT32, DOUBLE, VECTOR3D, VECTOR6D, VECTOR6INT32, VECTOR6UINT32.

Written by hand: the only Python RTDE library, UR's ``rtde`` client package, is a client (no server side) and
is not on PyPI under a maintained name; the format is a dozen struct layouts.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from dataclasses import dataclass

HEADER = struct.Struct(">HB")
HEADER_SIZE = HEADER.size

REQUEST_PROTOCOL_VERSION = 86
GET_URCONTROL_VERSION = 118
TEXT_MESSAGE = 77
DATA_PACKAGE = 85
CONTROL_PACKAGE_SETUP_OUTPUTS = 79
CONTROL_PACKAGE_SETUP_INPUTS = 73
CONTROL_PACKAGE_START = 83
CONTROL_PACKAGE_PAUSE = 80

# Warning levels of a text message (RTDE guide: EXCEPTION_MESSAGE 0, ERROR_MESSAGE 1, WARNING_MESSAGE 2, INFO 3).
MESSAGE_ERROR = 1
MESSAGE_WARNING = 2
MESSAGE_INFO = 3

FORMATS = {
    "BOOL": "?",
    "UINT8": "B",
    "UINT32": "I",
    "UINT64": "Q",
    "INT32": "i",
    "DOUBLE": "d",
    "VECTOR3D": "3d",
    "VECTOR6D": "6d",
    "VECTOR6INT32": "6i",
    "VECTOR6UINT32": "6I",
}

_V6 = "VECTOR6D"
# Output fields the emulator serves, by the RTDE guide's table (the subset a UR3 controller has).
OUTPUT_TYPES: dict[str, str] = {
    "timestamp": "DOUBLE",
    "target_q": _V6,
    "target_qd": _V6,
    "target_qdd": _V6,
    "target_current": _V6,
    "target_moment": _V6,
    "actual_q": _V6,
    "actual_qd": _V6,
    "actual_qdd": _V6,
    "actual_current": _V6,
    "actual_current_as_torque": _V6,
    "actual_moment": _V6,
    "joint_control_output": _V6,
    "actual_TCP_pose": _V6,
    "actual_TCP_speed": _V6,
    "actual_TCP_force": _V6,
    "target_TCP_pose": _V6,
    "target_TCP_speed": _V6,
    "actual_digital_input_bits": "UINT64",
    "joint_temperatures": _V6,
    "actual_execution_time": "DOUBLE",
    "robot_mode": "INT32",
    "joint_mode": "VECTOR6INT32",
    "safety_mode": "INT32",
    "safety_status": "INT32",
    "actual_tool_accelerometer": "VECTOR3D",
    "speed_scaling": "DOUBLE",
    "target_speed_fraction": "DOUBLE",
    "actual_momentum": "DOUBLE",
    "actual_main_voltage": "DOUBLE",
    "actual_robot_voltage": "DOUBLE",
    "actual_robot_current": "DOUBLE",
    "actual_joint_voltage": _V6,
    "actual_digital_output_bits": "UINT64",
    "runtime_state": "UINT32",
    "elbow_position": "VECTOR3D",
    "elbow_velocity": "VECTOR3D",
    "robot_status_bits": "UINT32",
    "safety_status_bits": "UINT32",
    "analog_io_types": "UINT32",
    "standard_analog_input0": "DOUBLE",
    "standard_analog_input1": "DOUBLE",
    "standard_analog_output0": "DOUBLE",
    "standard_analog_output1": "DOUBLE",
    "io_current": "DOUBLE",
    "tool_mode": "UINT32",
    "tool_analog_input_types": "UINT32",
    "tool_analog_input0": "DOUBLE",
    "tool_analog_input1": "DOUBLE",
    "tool_output_voltage": "INT32",
    "tool_output_current": "DOUBLE",
    "tool_temperature": "DOUBLE",
    "tcp_force_scalar": "DOUBLE",
    "ft_raw_wrench": _V6,
    "payload": "DOUBLE",
    "payload_cog": "VECTOR3D",
    "payload_inertia": _V6,
    "script_control_line": "UINT32",
    "output_bit_registers0_to_31": "UINT32",
    "output_bit_registers32_to_63": "UINT32",
    "input_bit_registers0_to_31": "UINT32",
    "input_bit_registers32_to_63": "UINT32",
}
for _i in range(48):
    OUTPUT_TYPES[f"output_int_register_{_i}"] = "INT32"
    OUTPUT_TYPES[f"output_double_register_{_i}"] = "DOUBLE"
    OUTPUT_TYPES[f"input_int_register_{_i}"] = "INT32"
    OUTPUT_TYPES[f"input_double_register_{_i}"] = "DOUBLE"

INPUT_TYPES: dict[str, str] = {
    "speed_slider_mask": "UINT32",
    "speed_slider_fraction": "DOUBLE",
    "standard_digital_output_mask": "UINT8",
    "standard_digital_output": "UINT8",
    "configurable_digital_output_mask": "UINT8",
    "configurable_digital_output": "UINT8",
    "tool_digital_output_mask": "UINT8",
    "tool_digital_output": "UINT8",
    "standard_analog_output_mask": "UINT8",
    "standard_analog_output_type": "UINT8",
    "standard_analog_output_0": "DOUBLE",
    "standard_analog_output_1": "DOUBLE",
    "input_bit_registers0_to_31": "UINT32",
    "input_bit_registers32_to_63": "UINT32",
    "external_force_torque": _V6,
}
for _i in range(48):
    INPUT_TYPES[f"input_int_register_{_i}"] = "INT32"
    INPUT_TYPES[f"input_double_register_{_i}"] = "DOUBLE"


class ProtocolError(Exception):
    """A malformed RTDE packet (the connection that sent it is closed)."""


@dataclass(frozen=True)
class Recipe:
    """One output or input recipe: its id, field names and RTDE types, and the struct that packs its data."""

    recipe_id: int
    names: tuple[str, ...]
    types: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return all(t in FORMATS for t in self.types)

    @functools.cached_property
    def struct(self) -> struct.Struct:  # built once: a recipe packs a package every controller tick
        return struct.Struct(">B" + "".join(FORMATS[t] for t in self.types))

    def pack(self, values: dict[str, object]) -> bytes:
        """A data-package payload: the recipe id, then each field from ``values`` in recipe order."""
        flat: list[object] = [self.recipe_id]
        for name, is_vector in self._fields:
            if is_vector:
                flat.extend(values[name])  # type: ignore[arg-type]
            else:
                flat.append(values[name])
        return self.struct.pack(*flat)

    @functools.cached_property
    def _fields(self) -> tuple[tuple[str, bool], ...]:
        """(name, is a vector) per field, in recipe order."""
        return tuple((name, kind.startswith("VECTOR")) for name, kind in zip(self.names, self.types, strict=True))

    def unpack(self, payload: bytes) -> dict[str, object]:
        """Field values of a data-package payload (recipe id first) by name; vectors come back as lists."""
        try:
            flat = list(self.struct.unpack(payload))
        except struct.error as exc:
            raise ProtocolError(f"data package for recipe {self.recipe_id}: {exc}") from None
        out: dict[str, object] = {}
        pos = 1
        for name, kind in zip(self.names, self.types, strict=True):
            width = int(FORMATS[kind][0]) if FORMATS[kind][0].isdigit() else 1
            out[name] = flat[pos : pos + width] if width > 1 else flat[pos]
            pos += width
        return out


def packet(kind: int, payload: bytes = b"") -> bytes:
    """Header plus payload."""
    return HEADER.pack(HEADER_SIZE + len(payload), kind) + payload


def split_packets(buffer: bytearray) -> list[tuple[int, bytes]]:
    """Remove and return every complete packet at the start of ``buffer`` as (type, payload)."""
    out: list[tuple[int, bytes]] = []
    while len(buffer) >= HEADER_SIZE:
        size, kind = HEADER.unpack_from(buffer)
        if size < HEADER_SIZE:
            raise ProtocolError(f"packet size {size} is smaller than its header")
        if len(buffer) < size:
            break
        out.append((kind, bytes(buffer[HEADER_SIZE:size])))
        del buffer[:size]
    return out


def text_message(message: str, source: str = "aiko-ur3", level: int = MESSAGE_INFO) -> bytes:
    """A protocol-2 text message packet (server to client)."""
    m = message.encode()[:255]
    s = source.encode()[:255]
    return packet(TEXT_MESSAGE, bytes([len(m)]) + m + bytes([len(s)]) + s + bytes([level]))


def parse_setup_outputs(payload: bytes, protocol_version: int) -> tuple[float, list[str]]:
    """(frequency in Hz, names) of a setup-outputs request; protocol 1 has no frequency (125 Hz then)."""
    if protocol_version >= 2:
        if len(payload) < 8:
            raise ProtocolError("setup outputs without its frequency")
        (frequency,) = struct.unpack_from(">d", payload)
        names_raw = payload[8:]
    else:
        frequency, names_raw = 125.0, payload
    return frequency, _names(names_raw)


def parse_setup_inputs(payload: bytes) -> list[str]:
    return _names(payload)


def _names(raw: bytes) -> list[str]:
    return [n for n in raw.decode(errors="replace").split(",") if n]


def setup_reply(kind: int, recipe_id: int, types: Iterable[str]) -> bytes:
    """The controller's answer to a setup request: the recipe id and the comma-separated types."""
    return packet(kind, bytes([recipe_id]) + ",".join(types).encode())


def controller_version_reply(major: int, minor: int, bugfix: int, build: int) -> bytes:
    return packet(GET_URCONTROL_VERSION, struct.pack(">IIII", major, minor, bugfix, build))


def accepted_reply(kind: int, accepted: bool) -> bytes:
    return packet(kind, bytes([1 if accepted else 0]))
