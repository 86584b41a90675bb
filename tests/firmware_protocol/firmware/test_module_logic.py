"""The firmware's state machine and controller (joint_module.c), compiled for the host, against the Python model of
the firmware (firmware_protocol.emulator.modules) frame for frame: the same acceptance, rejections, states, replies
and frame schedule; the fixed-point controller within a stated tolerance of the float one."""

import math
import struct

import can
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import ESTOP_KEY, Command, MessageKind, ModuleState, ParameterResult
from firmware_protocol.emulator import EmulatorConfig, IndependentInertiaPlant
from firmware_protocol.emulator.controller import ControllerGains, controller_update, new_controller_state
from firmware_protocol.emulator.firmware import (
    AXIS_FIELDS,
    COUNTS_PER_RAD,
    MODULE_FIELDS,
    MODULE_LAYOUT,
    parameter_values,
)
from firmware_protocol.emulator.modules import EmulatedModules
from firmware_protocol.emulator.rules import REJECTION_REASONS
from tests.firmware_protocol.firmware.host_module import HostModule, build_library, load

CODEC = default_codec()
NODE = 3


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return load(build_library(tmp_path_factory.mktemp("jm")))


def test_the_harness_reads_the_module_with_the_c_layout(library):
    offset = 0
    for name, code in MODULE_FIELDS:
        assert library.shim_offset(name.encode()) == offset, name
        offset += struct.calcsize("<" + code)
    assert library.shim_offset(b"axis") == offset
    axis_offset = 0
    for name, code in AXIS_FIELDS:
        assert library.shim_axis_offset(name.encode()) == axis_offset, name
        axis_offset += struct.calcsize("<" + code)
    assert axis_offset == library.shim_axis_size()
    assert offset + 2 * axis_offset == MODULE_LAYOUT.size
    assert library.shim_module_size() > MODULE_LAYOUT.size  # the module's private fields follow


def test_angles_convert_as_the_python_codec_rounds_them(library):
    """Feedback: counts (0.036 deg) to centidegrees, rounded, no division; references: centidegrees to 1/256 count
    within 0.6 of the exact quotient (2e-5 deg)."""
    for counts in range(-10000, 10001):
        assert library.jm_counts_to_cdeg(counts) == max(-18000, min(18000, round(counts * 3.6))), counts
    for cdeg in range(-18000, 18001, 7):
        assert abs(library.jm_cdeg_to_q8(cdeg) - cdeg * 640 / 9) <= 0.6, cdeg


class Pair:
    """The Python modules and the host-compiled firmware, one module each, fed the same frames and ticks."""

    def __init__(self, library, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig(node_ids=(NODE,))
        self.py = EmulatedModules(self.config, IndependentInertiaPlant(1))
        self.py_frames: list[tuple[int, bytes]] = []
        self.py.emit = lambda frame_id, data, t: self.py_frames.append((frame_id, bytes(data)))
        self.c = HostModule(library, NODE, parameter_values(self.config))
        self.c_frames: list[tuple[int, bytes]] = []
        self.limited = 0  # the H-bridge flags during the last tick (the emulator's current limit, as a board input)

    def counts(self) -> list[int]:
        return [round(x * COUNTS_PER_RAD) for x in self.py.drive.gear_angle_rad[0]]

    def frame(self, frame_id: int, data: bytes, **kw) -> None:
        self.py.handle_frame(can.Message(arbitration_id=frame_id, data=data, is_extended_id=kw.get("extended", False),
                                         is_remote_frame=kw.get("remote", False)))  # fmt: skip
        self.c.counts = self.counts()  # the encoder now (the firmware reads it when it handles a frame)
        self.c_frames += self.c.frame(frame_id, data, **kw)

    def send(self, kind: MessageKind, values: dict) -> None:
        self.frame(*CODEC.encode(kind, 0 if kind is MessageKind.COMMAND else NODE, values))

    def ticks(self, n: int) -> None:
        for _ in range(n):
            _, sent = self.c.tick(self.counts(), self.limited)
            self.c_frames += sent
            before = self.py.current_limited_ticks[0].copy()
            self.py.run_ticks(self.py.tick + 1)
            hit = self.py.current_limited_ticks[0] - before
            self.limited = int(hit[0]) | (int(hit[1]) << 1)

    def assert_same(self) -> None:
        c = self.c.state()
        py = self.py
        assert c["state"] == py.state[0], (ModuleState(c["state"]), ModuleState(int(py.state[0])))
        assert (c["estop"], c["fault"], c["watchdog"]) == (py.estop[0], py.fault[0], py.watchdog[0])
        assert c["accepted_references"] == py.accepted_references[0]
        assert c["ignored_while_disabled"] == py.ignored_while_disabled[0]
        assert c["parameter_writes_accepted"] == py.parameter_writes_accepted[0]
        assert c["watchdog_trips"] == py.watchdog_trips[0]
        assert c["unknown_frames"] == py.unknown_id_frames
        assert dict(zip(REJECTION_REASONS, c["rejected"], strict=True)) == {
            reason: int(v[0]) for reason, v in py.rejected.items()
        }
        last = c["last_sequence"] if c["sequence_valid"] else -1
        assert last == py.last_sequence[0]
        if py.state[0] == ModuleState.ENABLED:  # Enable holds the encoder's count (0.036 deg), the emulator its float
            reference = np.array([a["reference_q8"] for a in c["axis"]]) / 256 / COUNTS_PER_RAD
            np.testing.assert_allclose(reference, py.reference_rad[0], atol=0.5 / COUNTS_PER_RAD + 1e-6)
        assert [f[0] for f in self.c_frames] == [f[0] for f in self.py_frames]
        for (frame_id, c_data), (_, py_data) in zip(self.c_frames, self.py_frames, strict=True):
            base = frame_id & ~0x7F
            if base in (0x580, 0x700):  # ParameterReply, Heartbeat: byte for byte
                assert c_data == py_data, hex(frame_id)
            elif base == 0x200:  # JointFeedback: the state bits and the last sequence; AtLimit, Saturated (and the
                # angles, efforts) come from two controllers, float and fixed point: compared in the tests below
                assert (c_data[6] & 0x27, c_data[7]) == (py_data[6] & 0x27, py_data[7]), (c_data.hex(), py_data.hex())
            elif base == 0x280:  # JointRates: rejected and accepted counts
                assert c_data[4:] == py_data[4:], (hex(frame_id), c_data.hex(), py_data.hex())
        self.c_frames.clear()
        self.py_frames.clear()


# ------------------------------------------------------------------ traffic, event by event
def _parameter_value():
    return st.one_of(
        st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 10.0, 20.0, 100.0, 250.0, 1000.0, 2000.0, 5000.0, 5001.0]),
        st.sampled_from([-1.0, float("nan"), float("inf"), 1e-30, 180.0, 180.5, 0.5]),
        st.floats(width=32, allow_nan=True),
    )


EVENTS = st.one_of(
    st.tuples(st.just("tick"), st.integers(1, 350)),
    st.tuples(
        st.just("command"),
        st.integers(0, 5),
        st.sampled_from([0, 0, NODE, NODE, 5, 130]),
        st.sampled_from([2, 2, 2, 1, 3]),
    ),
    st.tuples(st.just("estop"), st.sampled_from([ESTOP_KEY, ESTOP_KEY, 0x5A, 0]), st.sampled_from([1, 1, 1, 2, 0])),
    st.tuples(
        st.just("reference"),
        st.sampled_from([0, 1, 1, 1, 2, 8, 9, 100, 127, 128, 200, 255]),  # sequence ahead of the last accepted
        st.integers(-18500, 18500),
        st.integers(-9000, 9000),
        st.integers(-2048, 2047),
        st.sampled_from([8, 8, 8, 7]),
    ),
    st.tuples(
        st.just("parameter"),
        st.integers(0, 14),
        st.sampled_from([0, 1, 1, 1, 3, 0x81]),
        _parameter_value(),
        st.sampled_from([0, 0, 0, 1]),
        st.sampled_from([8, 8, 8, 4]),
    ),  # fmt: skip
    st.tuples(st.just("other"), st.integers(0, 0x7FF), st.binary(max_size=8), st.booleans(), st.booleans()),
)


def _apply(pair: Pair, event) -> None:
    kind = event[0]
    if kind == "tick":
        pair.ticks(event[1])
    elif kind == "command":
        _, command, target, dlc = event
        pair.frame(0x010, bytes([command, target, 0])[:dlc])
    elif kind == "estop":
        _, key, dlc = event
        pair.frame(0x000, bytes([key, 0])[:dlc])
    elif kind == "reference":
        _, ahead, angle_h, angle_v, rate, dlc = event
        last = int(pair.py.last_sequence[0])
        data = struct.pack("<hh", angle_h, angle_v)
        rate_h = rate & 0xFFF
        rate_v = (-rate) & 0xFFF
        data += bytes(
            [rate_h & 0xFF, (rate_h >> 8) | ((rate_v & 0x0F) << 4), rate_v >> 4, (max(last, 0) + ahead) % 256]
        )
        pair.frame(0x100 + NODE, data[:dlc])
    elif kind == "parameter":
        _, index, write, value, reserved, dlc = event
        data = bytes([index, write, reserved, 0]) + struct.pack("<f", value)
        pair.frame(0x600 + NODE, data[:dlc])
    else:
        _, frame_id, data, extended, remote = event
        pair.frame(frame_id, b"" if remote else data, extended=extended, remote=remote)


@settings(max_examples=120, deadline=None)
@given(st.lists(EVENTS, min_size=1, max_size=30))
def test_the_firmware_and_the_python_modules_agree_on_every_frame(library, events):
    pair = Pair(library)
    pair.send(MessageKind.COMMAND, {"Command": int(Command.ENABLE), "TargetNode": 0})
    pair.assert_same()
    for event in events:
        _apply(pair, event)
        pair.assert_same()


def test_a_stream_with_a_lost_frame_a_watchdog_trip_and_a_new_enable(library):
    pair = Pair(library)
    pair.send(MessageKind.COMMAND, {"Command": int(Command.ENABLE), "TargetNode": 0})
    for seq in [0, 1, 2, 4, 5, 5, 3, 14, 6]:  # a lost frame, a duplicate, a stale one, a jump
        pair.send(MessageKind.REFERENCE, {"AngleH": 5.0, "AngleV": -2.0, "RateH": 10.0, "RateV": 0.0, "Sequence": seq})
        pair.ticks(100)
        pair.assert_same()
    pair.ticks(400)  # no reference for 0.4 s: the watchdog trips at 301 ticks after the last one
    pair.assert_same()
    assert pair.c.state()["watchdog_trips"] == 1 and pair.c.state()["state"] == ModuleState.WATCHDOG
    pair.send(MessageKind.COMMAND, {"Command": int(Command.ENABLE), "TargetNode": NODE})
    pair.ticks(5)
    pair.assert_same()


def test_every_parameter_reads_back_as_written_and_the_read_only_ones_as_stored(library):
    """The PC driver writes and reads back every parameter 1..9 before enabling (reliability's activation)."""
    pair = Pair(library)
    written = {1: 350.0, 2: 5.5, 3: 410.0, 4: 7.25, 5: 60.0, 6: 33.3, 7: 4.0, 8: 50.0, 9: 200.0}
    for index, value in written.items():
        pair.send(MessageKind.PARAMETER_REQUEST, {"Index": index, "Write": 1, "Value": value})
        pair.send(MessageKind.PARAMETER_REQUEST, {"Index": index, "Write": 0, "Value": 0.0})
    for index in (10, 11, 12, 13, 0):
        pair.send(MessageKind.PARAMETER_REQUEST, {"Index": index, "Write": 0, "Value": 0.0})
    replies = [CODEC.decode(f, d).values for f, d in pair.c_frames]
    pair.assert_same()
    for i, value in enumerate(written.values()):
        assert replies[2 * i]["Result"] == ParameterResult.OK
        assert replies[2 * i + 1]["Value"] == pytest.approx(value, rel=1e-6)
    torque = EmulatorConfig().drive.torque_limit_nm
    assert [r["Value"] for r in replies[-5:-2]] == pytest.approx([torque, torque, 4.0], rel=1e-6)
    assert [r["Result"] for r in replies[-2:]] == [ParameterResult.UNKNOWN_INDEX] * 2


def test_stored_settings_outside_the_rules_fall_back_to_the_defaults(library):
    values = [1e6, -1.0, 400.0, 6.0, 500.0, 90.0, 100.0, 1000.0, 100.0, 2.9, 2.9, 4.0]  # kp, kd, limit, watchdog
    state = HostModule(library, NODE, values).state()
    defaults = parameter_values(EmulatorConfig())
    assert state["parameter"][:2] == pytest.approx(defaults[:2])
    assert state["parameter"][4] == pytest.approx(defaults[4])  # 500 deg: no
    assert state["parameter"][6:8] == pytest.approx(defaults[6:8])  # 100 x 1000 ms = 100 s: no (the pair together)
    values[6:8] = [100.0, 20.0]  # 2 s exactly: yes, as a write would be accepted
    assert HostModule(library, NODE, values).state()["parameter"][6:8] == [100.0, 20.0]


# ------------------------------------------------------------------ the controller's arithmetic
@settings(max_examples=60, deadline=None)
@given(
    reference_deg=st.floats(-60, 60),
    rate_deg_s=st.floats(-500, 500),
    start_counts=st.integers(-1500, 1500),
    steps=st.lists(st.integers(-6, 6), min_size=5, max_size=60),
    gains=st.tuples(st.floats(1, 5000), st.floats(0, 500)),
)
def test_the_fixed_point_controller_matches_the_float_one(
    library, reference_deg, rate_deg_s, start_counts, steps, gains
):
    """Same quantised measurement on both sides, so only the arithmetic differs: the firmware's duty (1/800 of the
    supply) stays within 2 PWM counts (30 mV) of the float controller's voltage clipped to the supply, plus what the
    rate estimate's resolution (1/65536 count per tick = 9.6e-6 rad/s, rounded twice) makes of it through kd: up to
    0.7 counts more at kd = 500 V s/rad."""
    kp, kd = gains
    values = parameter_values(EmulatorConfig())
    values[0], values[1] = np.float32(kp), np.float32(kd)
    module = HostModule(library, NODE, values, counts=(start_counts, 0))
    module.frame(0x010, bytes([Command.ENABLE, 0]))
    cdeg = round(reference_deg * 100)
    qdeg = max(-2048, min(2047, round(rate_deg_s * 4)))
    values = {"AngleH": cdeg / 100, "AngleV": 0.0, "RateH": qdeg / 4, "RateV": 0.0, "Sequence": 1}
    frame_id, data = CODEC.encode(MessageKind.REFERENCE, NODE, values)
    module.frame(frame_id, data)
    g = ControllerGains(kp_h_v_per_rad=float(np.float32(kp)), kd_h_v_s_per_rad=float(np.float32(kd)))
    rad_per_count = 1 / COUNTS_PER_RAD
    state = new_controller_state(g, 1, np.array([[start_counts * rad_per_count, 0.0]]))
    reference = np.radians([[cdeg / 100, 0.0]])
    limit = math.radians(90.0)
    rate = np.radians([[qdeg / 4, 0.0]])
    if abs(reference[0, 0]) >= limit and reference[0, 0] * rate[0, 0] > 0:
        rate[0, 0] = 0.0
    counts = start_counts
    for step in steps:
        counts += step
        _, _ = module.tick((counts, 0))
        duty = module.state()["axis"][0]["duty"] / 800
        demand = controller_update(g, state, np.array([[counts * rad_per_count, 0.0]]), reference, rate, 3.48, 1e-3)
        expected = float(np.clip(demand[0, 0] / 12.0, -1.0, 1.0))
        rate_lsb_rad_s = 1 / COUNTS_PER_RAD / 65536 / 1e-3
        tolerance_counts = 2 + 2 * rate_lsb_rad_s * (kd + 3.48) / (12.0 / 800)
        assert duty == pytest.approx(expected, abs=tolerance_counts / 800), (counts, demand[0, 0])
