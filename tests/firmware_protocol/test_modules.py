"""The protocol and safety rules of docs/can_protocol.md, checked from the bus against both kinds of joint modules
(the `modules` fixture): the Python model of the firmware and the firmware itself on simulated ATmega128 boards.

The same frames go in, the same answers must come out. Where the two legitimately differ, the tolerance is stated
where it is used:
- time: the firmware hears a frame when the bus delivers it (the PC's adapter puts it on the bus at the next 1 ms
  period; a frame takes 50-130 us, its interrupt some 30 us), the Python modules at once; its ticks run on its own
  clock (powered 10 ms before time 0), so a tick-exact instant there is exact to +-2 ms here;
- angles: the firmware measures with a 0.036 deg encoder and computes in fixed point (the Python model in float):
  a settled joint is exact to 0.08 deg instead of 0.05 deg;
- unknown identifiers: the firmware's MCP2515 filters keep every frame not addressed to it out, so it counts none
  (`unknown_id_frames`); the rejection counters of frames that are addressed to it are identical.
"""

import itertools
import math

import can
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import ESTOP_KEY, Command, MessageKind, ModuleState, Parameter, ParameterResult
from firmware_protocol.emulator import EmulatorConfig, JointControllerEmulator
from firmware_protocol.emulator.transport import BusTransport

CODEC = default_codec()
_channels = itertools.count()


class ModuleRig:
    """A PC-side bus and the modules of one kind on one private virtual channel, stepped in lockstep."""

    def __init__(self, kind: str, config: EmulatorConfig | None = None) -> None:
        channel = f"test-modules-{kind}-{next(_channels)}"
        self.kind = kind
        self.config = config or EmulatorConfig()
        self.pc = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        if kind == "firmware":
            from firmware_protocol.emulator.firmware import FirmwareModules

            self.emu: BusTransport = BusTransport(bus, FirmwareModules(self.config))
        else:
            self.emu = JointControllerEmulator(bus, self.config)
        self._bus = bus
        self.received: list[can.Message] = []
        self.sequence = 0

    @property
    def latency_s(self) -> float:
        """How long a frame takes to act: at once for the Python modules; the next period, the bus and the
        interrupt for the firmware (2 ms covers it with a margin)."""
        return 0.002 if self.kind == "firmware" else 0.0

    def close(self) -> None:
        self.emu.close()
        self.pc.shutdown()
        self._bus.shutdown()

    # ------------------------------------------------------------------ frames
    def send(self, kind: MessageKind, node: int, values: dict) -> None:
        self.send_raw(*CODEC.encode(kind, node, values))

    def send_raw(self, frame_id: int, data: bytes, **kw) -> None:
        self.pc.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=kw.pop("ext", False), **kw))

    def command(self, command: Command, target: int = 0) -> None:
        self.send(MessageKind.COMMAND, 0, {"Command": int(command), "TargetNode": target})

    def reference_all(self, angle_h_deg, angle_v_deg=0.0, rate_h=0.0) -> None:
        for i, node in enumerate(self.config.node_ids):
            h = angle_h_deg[i] if np.ndim(angle_h_deg) else angle_h_deg
            values = dict(AngleH=h, AngleV=angle_v_deg, RateH=rate_h, RateV=0.0, Sequence=self.sequence % 256)
            self.send(MessageKind.REFERENCE, node, values)
        self.sequence += 1

    def step_to(self, t_s: float) -> None:
        self.emu.step_to(t_s)
        while (msg := self.pc.recv(timeout=0)) is not None:
            self.received.append(msg)

    def settle(self) -> None:
        """Let the frames sent so far act (see `latency_s`), one tick at least."""
        self.step_to(self.emu.time_s + max(self.latency_s, self.emu.dt_s))

    def hold(self, angle_h_deg, until_s: float, angle_v_deg: float = 0.0, period_s: float = 0.1) -> None:
        t = self.emu.time_s
        while t < until_s - 1e-9:
            self.reference_all(angle_h_deg, angle_v_deg)
            t = round(t + period_s, 9)
            self.step_to(t)

    def decoded(self, kind: MessageKind, node: int) -> list[tuple[float, dict]]:
        fid = CODEC.frame_id(kind, node)
        return [(m.timestamp, CODEC.decode(fid, m.data).values) for m in self.received if m.arbitration_id == fid]

    def parameter(self, node: int, parameter: Parameter, value: float | None = None) -> dict:
        """Read (value None) or write one parameter over CAN: the module's one reply."""
        before = len(self.decoded(MessageKind.PARAMETER_REPLY, node))
        write = value is not None
        self.send(
            MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": int(write), "Value": value or 0.0}
        )
        self.settle()
        replies = self.decoded(MessageKind.PARAMETER_REPLY, node)[before:]
        assert len(replies) == 1, replies
        return replies[0][1]

    # ------------------------------------------------------------------ the modules' state
    def states(self) -> list[ModuleState]:
        return [ModuleState[name] for name in self.emu.counters()["state"]]

    def braked(self) -> np.ndarray:
        """(n, 2): the H-bridge brakes (the Python model's drive flag; the firmware's brake pins)."""
        return self.emu.modules.brake.copy() if self.kind == "firmware" else self.emu.modules.drive.brake.copy()

    def voltage(self) -> np.ndarray:
        return self.emu.modules.drive.voltage_v.copy()

    def gear_deg(self) -> np.ndarray:
        return np.degrees(self.emu.modules.drive.gear_angle_rad)

    def reference_deg(self) -> np.ndarray:
        modules = self.emu.modules
        return np.degrees(modules.reference_rad() if self.kind == "firmware" else modules.reference_rad)


@pytest.fixture
def rig(modules):
    made = []

    def make(config=None):
        made.append(ModuleRig(modules, config))
        return made[-1]

    yield make
    for r in made:
        r.close()


def angle_tolerance_deg(r: ModuleRig) -> float:
    return 0.08 if r.kind == "firmware" else 0.05


# ---------------------------------------------------------------- control
def test_a_step_is_tracked_and_held_with_the_state_bits_of_a_healthy_module(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
    r.command(Command.ENABLE)
    r.hold(10.0, until_s=1.5, angle_v_deg=-5.0)
    np.testing.assert_allclose(r.gear_deg(), np.tile([10.0, -5.0], (3, 1)), atol=angle_tolerance_deg(r))
    last = r.decoded(MessageKind.FEEDBACK, 2)[-1][1]
    assert (last["Enabled"], last["Watchdog"], last["EStop"], last["Fault"], last["Saturated"]) == (1, 0, 0, 0, 0)
    assert last["AngleH"] == pytest.approx(10.0, abs=angle_tolerance_deg(r) + 0.01)  # 0.01 deg on the wire


def test_a_large_step_saturates_and_the_joint_limit_clamps(rig):
    r = rig(EmulatorConfig(node_ids=(1,), limit_h_rad=math.radians(45.0)))
    r.command(Command.ENABLE)
    r.hold(80.0, until_s=0.3)  # beyond the 45 deg limit
    flags = [v for _, v in r.decoded(MessageKind.FEEDBACK, 1)]
    assert any(v["Saturated"] == 1 for v in flags) and any(abs(v["EffortH"]) == pytest.approx(1.0) for v in flags)
    r.hold(80.0, until_s=2.5)
    last = r.decoded(MessageKind.FEEDBACK, 1)[-1][1]
    assert last["AtLimit"] == 1 and last["AngleH"] == pytest.approx(45.0, abs=0.1)


def test_enabling_holds_the_joint_where_it_is(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.step_to(0.05)
    start = r.gear_deg()
    r.command(Command.ENABLE)
    r.step_to(0.29)
    assert r.states() == [ModuleState.ENABLED]
    assert np.abs(r.gear_deg() - start).max() < 0.05  # no jump: the reference is where the joint was


# ---------------------------------------------------------------- watchdog and e-stop
def test_the_watchdog_stops_every_module_three_periods_after_its_last_reference(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
    r.command(Command.ENABLE)
    r.hold([5.0, -5.0, 10.0], until_s=0.5)  # last reference at t = 0.4 s
    last_sent_s = 0.4
    trips = {}
    while r.emu.time_s < 1.0:
        r.step_to(r.emu.time_s + 0.001)
        for node in (1, 2, 3):
            beats = [t for t, v in r.decoded(MessageKind.FEEDBACK, node) if v["Watchdog"]]
            if beats and node not in trips:
                trips[node] = beats[0]
    period = 0.1
    for node in (1, 2, 3):  # 3 periods and the next tick (feedback at 100 Hz: seen within 10 ms of the trip)
        assert last_sent_s + 3 * period < trips[node] <= last_sent_s + 3 * period + 0.011 + r.latency_s, node
    assert r.states() == [ModuleState.WATCHDOG] * 3
    assert r.braked().all() and not r.voltage().any()
    r.command(Command.ENABLE)  # a new Enable clears it
    r.settle()
    assert r.states() == [ModuleState.ENABLED] * 3


def test_an_emergency_stop_brakes_every_module_before_its_next_tick_and_latches(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
    r.command(Command.ENABLE)
    r.reference_all(20.0)
    r.step_to(0.05)
    assert r.voltage().any()
    r.send_raw(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([ESTOP_KEY]))
    r.settle()  # Python: the frame handler alone; firmware: the receive interrupt, within the next period
    assert r.states() == [ModuleState.ESTOP] * 3 and r.braked().all()
    r.reference_all(20.0)
    r.command(Command.ENABLE)  # neither a reference nor Enable alone re-arms it
    r.step_to(0.2)
    assert r.states() == [ModuleState.ESTOP] * 3 and not r.voltage().any()
    last = r.decoded(MessageKind.FEEDBACK, 3)[-1][1]
    assert (last["EStop"], last["Fault"], last["Enabled"]) == (1, 1, 0)
    r.command(Command.CLEAR_FAULTS)
    r.command(Command.ENABLE)
    r.step_to(0.22)
    assert r.states() == [ModuleState.ENABLED] * 3


def test_a_disable_stops_the_drive_of_its_target_only(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.command(Command.ENABLE)
    r.reference_all(20.0)
    r.step_to(0.05)
    r.command(Command.DISABLE, target=1)
    r.step_to(0.06)
    assert r.states() == [ModuleState.DISABLED, ModuleState.ENABLED]
    assert r.braked()[0].all() and not r.braked()[1].any()
    r.send(MessageKind.COMMAND, 0, {"Command": 9, "TargetNode": 2})  # unknown command: counted by its target
    r.settle()
    assert r.emu.counters()["rejected"]["unknown_command"] == [0, 1]


def test_a_disable_brakes_when_it_is_received_not_a_tick_later(rig):
    """As an e-stop does: the frame handler brakes the drive (the firmware in its main loop, the Python model when
    it handles the frame), so no duty of the disabled controller is applied after the frame arrived."""
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.command(Command.ENABLE)
    r.reference_all(20.0)
    r.step_to(0.05)
    assert not r.braked().any() and r.voltage().any()
    r.command(Command.DISABLE)
    r.step_to(r.emu.time_s + r.latency_s)  # the Python model: the frame handled, no tick run
    assert r.braked().all() and not r.voltage().any()
    assert r.states() == [ModuleState.DISABLED]


# ---------------------------------------------------------------- bad traffic
def test_bad_traffic_is_rejected_counted_and_never_actuated(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.command(Command.ENABLE)
    r.reference_all(5.0)
    r.step_to(0.05)
    accepted = r.emu.counters()["accepted_references"]
    ref1 = CODEC.frame_id(MessageKind.REFERENCE, 1)
    good = dict(AngleH=-30.0, AngleV=0.0, RateH=0.0, RateV=0.0)
    _, data = CODEC.encode(MessageKind.REFERENCE, 1, {**good, "Sequence": 1})
    r.send_raw(ref1, data[:7])  # wrong DLC
    r.send_raw(0x7F0, data)  # unknown id
    r.send_raw(ref1, data, ext=True)  # extended id: not the protocol's
    r.send_raw(ref1, (18001).to_bytes(2, "little", signed=True) + data[2:])  # out of range
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 0})  # duplicate of the accepted 0
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 200})  # stale
    r.send_raw(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([0xA4]))  # wrong e-stop key
    r.send_raw(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([0xA5, 0]))  # e-stop with a wrong DLC
    r.step_to(0.06)
    c = r.emu.counters()
    assert c["accepted_references"] == accepted and r.states() == [ModuleState.ENABLED] * 2
    np.testing.assert_allclose(r.reference_deg()[:, 0], [5.0, 5.0], atol=1e-3)
    assert r.voltage().any()
    assert c["rejected"]["wrong_dlc"] == [2, 1]  # the short reference (node 1) and the long e-stop (both)
    assert c["rejected"]["out_of_range"] == [1, 0]
    assert c["rejected"]["duplicate_sequence"] == [1, 0] and c["rejected"]["stale_sequence"] == [1, 0]
    assert c["rejected"]["bad_estop_key"] == [1, 1]
    assert c["unknown_id_frames"] == (0 if r.kind == "firmware" else 2)  # the firmware's filters (module doc)
    r.step_to(0.2)
    rates = r.decoded(MessageKind.RATES, 1)
    assert rates[-1][1]["RejectedFrames"] == 6  # the count reaches the PC in JointRates
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 1})  # the next valid sequence is still accepted
    r.settle()
    assert r.reference_deg()[0, 0] == pytest.approx(-30.0, abs=1e-3)


def test_a_forged_sequence_jump_does_not_lock_out_the_real_sender(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.command(Command.ENABLE)
    good = dict(AngleH=10.0, AngleV=0.0, RateH=0.0, RateV=0.0)
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 0})
    r.step_to(0.01)
    r.send(MessageKind.REFERENCE, 1, {**good, "AngleH": -40.0, "Sequence": 100})  # forged: +100
    for seq in range(1, 6):
        r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": seq})
    r.step_to(0.02)
    c = r.emu.counters()
    assert c["accepted_references"] == [6] and c["rejected"]["sequence_jump"] == [1]
    assert r.reference_deg()[0, 0] == pytest.approx(10.0, abs=1e-3)  # the forged angle never actuated


def test_the_sequence_wraps_around(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.command(Command.ENABLE)
    r.sequence = 250
    r.hold(1.0, until_s=1.5)
    c = r.emu.counters()
    assert c["accepted_references"] == [15] and c["rejected_total"] == 0


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 0x7FF), st.binary(min_size=0, max_size=8)), min_size=1, max_size=300))
def test_the_watchdog_stops_every_module_whatever_stray_frames_arrive(rig, frames):
    """Stray frames while the modules are enabled (not Command frames: Disable, a write, Enable is how the PC
    reconfigures a module, and a frame cannot tell a stray sender from the PC): the modules' settings stay, and
    0.3 s after the PC's last reference every module has stopped (watchdog, or a stray e-stop)."""
    r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
    r.command(Command.ENABLE)
    r.reference_all(0.0)
    r.step_to(0.001)
    for frame_id, data in frames:
        if frame_id != 0x010:
            r.send_raw(frame_id, data)
    r.step_to(0.05)
    for node in (1, 2, 3):
        assert r.parameter(node, Parameter.WATCHDOG_PERIODS)["Value"] == 3.0
        assert r.parameter(node, Parameter.REFERENCE_PERIOD_MS)["Value"] == 100.0
    r.step_to(0.31 + r.latency_s)
    assert ModuleState.ENABLED not in r.states()


# ---------------------------------------------------------------- parameters
def test_every_parameter_is_answered_and_writes_read_back(rig):
    """The PC driver writes and reads back parameters 1..9 before it enables (and may read 10..12)."""
    r = rig(EmulatorConfig(node_ids=(4,), feedback_rate_hz=0.0))
    written = {Parameter.KP_H: 250.0, Parameter.KD_H: 5.5, Parameter.KP_V: 410.0, Parameter.KD_V: 7.25,
               Parameter.LIMIT_H_DEG: 60.0, Parameter.LIMIT_V_DEG: 33.25, Parameter.WATCHDOG_PERIODS: 4.0,
               Parameter.REFERENCE_PERIOD_MS: 50.0, Parameter.FEEDBACK_RATE_HZ: 200.0}  # fmt: skip
    for parameter, value in written.items():
        reply = r.parameter(4, parameter, value)
        assert (reply["Result"], reply["Value"]) == (ParameterResult.OK, value)
        assert r.parameter(4, parameter)["Value"] == value
    torque = r.config.drive.torque_limit_nm
    for parameter, expected in [(Parameter.TORQUE_LIMIT_H_NM, torque), (Parameter.TORQUE_LIMIT_V_NM, torque),
                                (Parameter.FREE_PLAY_DEG, 4.0)]:  # fmt: skip
        reply = r.parameter(4, parameter)
        assert reply["Result"] == ParameterResult.OK and reply["Value"] == pytest.approx(expected, rel=1e-6)
        assert r.parameter(4, parameter, 1.0)["Result"] == ParameterResult.READ_ONLY
    assert r.parameter(4, 13)["Result"] == ParameterResult.UNKNOWN_INDEX


def test_parameter_writes_are_locked_while_enabled_and_counted(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.command(Command.ENABLE)
    r.reference_all(0.0)
    r.step_to(0.01)
    for node in (1, 2):
        reply = r.parameter(node, Parameter.WATCHDOG_PERIODS, 100.0)
        assert (reply["Result"], reply["Value"]) == (ParameterResult.LOCKED, 3.0)
    assert r.emu.counters()["rejected"]["parameter_while_enabled"] == [1, 1]
    r.command(Command.DISABLE)
    r.settle()
    assert r.parameter(1, Parameter.WATCHDOG_PERIODS, 5.0)["Result"] == ParameterResult.OK


@pytest.mark.parametrize(("periods", "period_ms", "result"), [
    (3.0, 100.0, ParameterResult.OK), (100.0, 20.0, ParameterResult.OK), (100.0, 21.0, ParameterResult.OUT_OF_RANGE),
    (1.0, 9.0, ParameterResult.OUT_OF_RANGE), (1.0, 1001.0, ParameterResult.OUT_OF_RANGE),
    (2.0, 5.0, ParameterResult.OUT_OF_RANGE),  # 5 ms x the 1 period still held is 5 ms: write the periods first
])  # fmt: skip
def test_the_watchdog_timeout_has_a_floor_and_a_ceiling(rig, periods, period_ms, result):
    """Whichever of the two is written, the product must stay in 10..2000 ms; the period is written first here."""
    r = rig(EmulatorConfig(node_ids=(1,), watchdog_periods=1.0, reference_period_s=0.1))
    first = r.parameter(1, Parameter.REFERENCE_PERIOD_MS, period_ms)["Result"]
    second = r.parameter(1, Parameter.WATCHDOG_PERIODS, periods)["Result"]
    if result == ParameterResult.OK:
        assert (first, second) == (ParameterResult.OK, ParameterResult.OK)
    else:
        assert ParameterResult.OUT_OF_RANGE in (first, second)
    timeout_ms = (
        r.parameter(1, Parameter.WATCHDOG_PERIODS)["Value"] * r.parameter(1, Parameter.REFERENCE_PERIOD_MS)["Value"]
    )
    assert 10.0 <= timeout_ms <= 2000.0


def test_a_parameter_request_with_reserved_bits_or_a_value_outside_the_dbc_is_rejected_unanswered(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    fid, data = CODEC.encode(
        MessageKind.PARAMETER_REQUEST, 1, {"Index": int(Parameter.KP_H), "Write": 1, "Value": 10.0}
    )
    r.send_raw(fid, data[:2] + b"\x01" + data[3:])
    r.send_raw(fid, data[:1] + bytes([data[1] | 0x80]) + data[2:])
    r.send_raw(fid, data[:4] + bytes.fromhex("0000c07f"))  # Value = NaN: outside the DBC's float range
    r.send_raw(fid, bytes([1, 0, 0, 0]) + bytes.fromhex("0000807f"))  # a read with Value = +inf
    r.settle()
    c = r.emu.counters()
    assert c["rejected"]["reserved_bits"] == [2] and c["rejected"]["out_of_range"] == [2]
    assert r.decoded(MessageKind.PARAMETER_REPLY, 1) == []
    assert r.parameter(1, Parameter.KP_H)["Value"] == 400.0


# ---------------------------------------------------------------- commands, references to disabled modules, frames
def test_references_to_a_disabled_module_are_counted_and_clamped_once_enabled(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), limit_h_rad=math.radians(45.0), limit_v_rad=math.radians(20.0)))
    for _ in range(3):
        r.reference_all(60.0, -30.0)
    r.settle()
    assert r.emu.counters()["ignored_while_disabled"] == [3, 3]
    r.command(Command.ENABLE)
    r.reference_all(60.0, -30.0)
    r.settle()
    np.testing.assert_allclose(r.reference_deg(), [[45.0, -20.0], [45.0, -20.0]], atol=1e-3)


def test_feedback_requested_over_can_is_sent_even_when_the_default_rate_is_zero(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), feedback_rate_hz=0.0))
    r.step_to(0.1)
    assert not r.decoded(MessageKind.FEEDBACK, 1) and not r.decoded(MessageKind.FEEDBACK, 2)
    assert r.parameter(2, Parameter.FEEDBACK_RATE_HZ, 100.0)["Result"] == ParameterResult.OK
    r.step_to(0.2)
    assert not r.decoded(MessageKind.FEEDBACK, 1) and 9 <= len(r.decoded(MessageKind.FEEDBACK, 2)) <= 11


def test_heartbeats_once_a_second_with_state_version_and_uptime(rig):
    r = rig(EmulatorConfig(node_ids=(3,), feedback_rate_hz=0.0))
    r.step_to(2.5)
    beats = r.decoded(MessageKind.HEARTBEAT, 3)
    times = [t - r.emu.timestamp_offset_s for t, _ in beats]
    assert len(beats) in (2, 3) and np.allclose(np.diff(times), 1.0, atol=1e-3)  # the firmware's first one: at -8 ms
    for t, values in zip(times, [v for _, v in beats], strict=True):
        assert (values["State"], values["FirmwareVersion"]) == (ModuleState.DISABLED, 1)
        assert values["Uptime"] == round(t)  # whole seconds since power-up (the firmware: 10 ms before time 0)
