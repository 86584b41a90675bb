"""Emulated joint modules in lockstep on python-can's virtual bus: physics, watchdog, e-stop, bad traffic."""

import itertools
import math

import can
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import Command, MessageKind, ModuleState, Parameter, ParameterResult
from firmware_protocol.emulator import (
    DriveParams,
    EmulatorConfig,
    EmulatorConfigError,
    IndependentInertiaPlant,
    JointControllerEmulator,
)
from firmware_protocol.emulator.drive import drive_substep, new_drive_state

CODEC = default_codec()
_channels = itertools.count()


class Rig:
    """A PC-side bus and an emulator on one private virtual channel, stepped in lockstep."""

    def __init__(self, config: EmulatorConfig | None = None, plant=None) -> None:
        channel = f"test-emulator-{next(_channels)}"
        self.pc = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        self.emu_bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        self.emu = JointControllerEmulator(self.emu_bus, config or EmulatorConfig(), plant)
        self.received: list[can.Message] = []
        self.sequence = 0

    def close(self) -> None:
        self.pc.shutdown()
        self.emu_bus.shutdown()

    def send(self, kind: MessageKind, node: int, values: dict) -> None:
        frame_id, data = CODEC.encode(kind, node, values)
        self.send_raw(frame_id, data)

    def send_raw(self, frame_id: int, data: bytes, **kw) -> None:
        self.pc.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=kw.pop("ext", False), **kw))

    def enable(self) -> None:
        self.send(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})

    def reference_all(self, angle_h_deg, angle_v_deg=0.0, rate_h=0.0, rate_v=0.0) -> None:
        for i, node in enumerate(self.emu.config.node_ids):
            h = angle_h_deg[i] if np.ndim(angle_h_deg) else angle_h_deg
            rh = rate_h[i] if np.ndim(rate_h) else rate_h
            values = dict(AngleH=h, AngleV=angle_v_deg, RateH=rh, RateV=rate_v, Sequence=self.sequence % 256)
            self.send(MessageKind.REFERENCE, node, values)
        self.sequence += 1

    def step_to(self, t_s: float) -> None:
        self.emu.step_to(t_s)
        while (msg := self.pc.recv(timeout=0)) is not None:
            self.received.append(msg)

    def feedback(self, node: int) -> list[tuple[float, dict]]:
        fid = CODEC.frame_id(MessageKind.FEEDBACK, node)
        return [(m.timestamp, CODEC.decode(fid, m.data).values) for m in self.received if m.arbitration_id == fid]


@pytest.fixture
def rig():
    made = []

    def make(config=None, plant=None):
        made.append(Rig(config, plant))
        return made[-1]

    yield make
    for r in made:
        r.close()


def hold_reference(r: Rig, angle_h_deg, until_s: float, period_s: float = 0.1, angle_v_deg: float = 0.0):
    t = r.emu.time_s
    while t < until_s - 1e-9:
        r.reference_all(angle_h_deg, angle_v_deg)
        t = round(t + period_s, 9)
        r.step_to(t)


# ---------------------------------------------------------------- drive physics (analytic special cases)
def test_short_brake_decays_with_the_electrical_time_constant():
    p = DriveParams(free_play_rad=math.radians(19.0))  # joint never touched: gear side alone
    state = new_drive_state(1)
    state.gear_rate_rad_s[...] = 1.0
    joint = np.zeros((1, 2))
    dt, steps = 0.25e-3, 80
    for _ in range(steps):
        assert not drive_substep(p, state, joint, joint, dt).any()  # inside the free play: no joint torque
    damping = p.gear_efficiency * p.gear_ratio**2 * p.torque_constant_nm_a**2 / p.resistance_ohm
    tau = p.reflected_inertia_kg_m2 / (damping + p.gear_viscous_nm_s_rad)
    expected = math.exp(-steps * dt / tau)
    assert state.gear_rate_rad_s[0, 0] == pytest.approx(expected, rel=5e-3)  # Euler error (dt/tau)^2 n/2 ~ 2e-3


def test_no_load_speed_matches_the_motor_equation():
    p = DriveParams(free_play_rad=math.radians(19.0), current_limit_a=100.0)
    state = new_drive_state(1)
    state.brake[...] = False
    state.voltage_v[...] = p.supply_v
    joint = np.zeros((1, 2))
    joint_far = joint.copy()
    for _ in range(4000):  # 1 s >> tau; keep the joint following inside the dead zone
        joint_far[...] = state.gear_angle_rad
        drive_substep(p, state, joint_far, joint, 0.25e-3)
    k = p.gear_efficiency * p.gear_ratio * p.torque_constant_nm_a / p.resistance_ohm
    speed = k * p.supply_v / (k * p.torque_constant_nm_a * p.gear_ratio + p.gear_viscous_nm_s_rad)
    assert state.gear_rate_rad_s[0, 0] == pytest.approx(speed, rel=1e-6)


# ---------------------------------------------------------------- closed loop
def test_step_response_tracks_within_free_play_and_holds_still(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
    r.enable()
    hold_reference(r, 10.0, until_s=1.5, angle_v_deg=-5.0)
    gear = np.degrees(r.emu.drive.gear_angle_rad)
    joint = np.degrees(r.emu.plant.joint_state()[0])
    half_play = math.degrees(r.emu.config.drive.free_play_rad) / 2
    np.testing.assert_allclose(gear, np.tile([10.0, -5.0], (3, 1)), atol=0.05)  # PD, no load: no offset
    assert np.all(np.abs(joint - gear) <= half_play + 0.05)  # the joint rests somewhere inside the free play
    np.testing.assert_allclose(np.degrees(r.emu.drive.gear_rate_rad_s), 0.0, atol=0.05)
    last = r.feedback(2)[-1][1]
    assert (last["Enabled"], last["Watchdog"], last["EStop"], last["Saturated"]) == (1, 0, 0, 0)
    assert last["AngleH"] == pytest.approx(10.0, abs=0.06)  # gear-side encoder, 0.01 deg resolution


def test_free_play_lets_the_joint_lag_the_gear_on_reversal(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.enable()
    gaps = []
    t = 0.0
    for k in range(60):  # 1 Hz square wave +-5 deg
        r.reference_all(5.0 if (k // 5) % 2 == 0 else -5.0)
        for _ in range(100):
            t += 1e-3
            r.step_to(t)
            gaps.append(np.degrees(r.emu.drive.gear_angle_rad[0, 0] - r.emu.plant.joint_state()[0][0, 0]))
    half_play = math.degrees(r.emu.config.drive.free_play_rad) / 2
    assert max(gaps) > 0.8 * half_play and min(gaps) < -0.8 * half_play  # both flanks of the play are used
    # contact compliance: static deflection torque_limit / k, at most doubled by a suddenly applied load
    compliance = math.degrees(r.emu.config.drive.torque_limit_nm / r.emu.config.drive.contact_stiffness_nm_rad)
    assert max(np.abs(gaps)) <= half_play + 2 * compliance


def test_large_step_saturates_and_limits_clamp(rig):
    r = rig(EmulatorConfig(node_ids=(1,), limit_h_rad=math.radians(45.0)))
    r.enable()
    hold_reference(r, 80.0, until_s=0.3)  # beyond the 45 deg limit
    flags = [v for _, v in r.feedback(1)]
    assert any(v["Saturated"] == 1 for v in flags)
    assert any(abs(v["EffortH"]) == pytest.approx(1.0) for v in flags)
    limited = r.emu.counters()["current_limited_ticks"][0]
    assert limited[0] > 0 and limited[1] == 0  # the stepped axis hit the current limit, the still one never did
    assert 0 < r.emu.counters()["current_limited_fraction"] < 0.5
    hold_reference(r, 80.0, until_s=2.5)
    assert math.degrees(r.emu.plant.joint_state()[0][0, 0]) <= 45.0 + 1e-9
    last = r.feedback(1)[-1][1]
    assert last["AtLimit"] == 1
    assert last["AngleH"] == pytest.approx(45.0, abs=0.1)


# ---------------------------------------------------------------- watchdog and e-stop
def test_watchdog_trips_every_module_within_three_periods_plus_one_tick(rig):
    # "linear" hold keeps extrapolating the last reference, so the modules are still moving when the watchdog
    # must stop them (with "zoh" they would already rest at the last reference)
    config = EmulatorConfig(feedback_rate_hz=1000.0, reference_hold="linear")
    r = rig(config)
    r.enable()
    t, period = 0.0, 0.1
    phases = np.radians(-50.0) * np.arange(10)
    for _ in range(10):  # a moving gait for 1 s
        w = math.radians(80.0)
        r.reference_all(30 * np.sin(w * t + phases), rate_h=30 * w * np.cos(w * t + phases))
        t = round(t + period, 9)
        r.step_to(t)
    last_reference_s = t - period  # handled at the start of step_to(t)
    deadline_s = last_reference_s + 3 * period + r.emu.dt_s
    trip_s = {}
    moving_at_trip = False
    while r.emu.time_s < deadline_s + 0.6:
        r.step_to(r.emu.time_s + 1e-3)
        for row, node in enumerate(config.node_ids):
            if node not in trip_s and r.emu.watchdog[row]:
                trip_s[node] = r.emu.watchdog_trip_s[row]
                assert r.emu.drive.brake[row].all() and not r.emu.drive.voltage_v[row].any()
                moving_at_trip |= bool(np.abs(r.emu.drive.gear_rate_rad_s[row]).max() > math.radians(5))
    assert sorted(trip_s) == list(config.node_ids)
    assert all(last_reference_s + 3 * period < ts <= deadline_s + 1e-9 for ts in trip_s.values()), trip_s
    assert moving_at_trip  # the test is meaningful: modules were moving when the PC went silent
    for node in config.node_ids:
        after = [v for ts, v in r.feedback(node) if ts > trip_s[node] + 1e-9]
        assert after and all(v["Watchdog"] == 1 and v["Enabled"] == 0 for v in after)
    # short brake + free play: everything has stopped 0.6 s later
    assert np.abs(np.degrees(r.emu.drive.gear_rate_rad_s)).max() < 0.5
    assert np.abs(np.degrees(r.emu.plant.joint_state()[1])).max() < 0.5


def test_watchdog_is_reset_by_a_new_enable(rig):
    r = rig(EmulatorConfig(node_ids=(4,)))
    r.enable()
    r.step_to(0.5)
    assert r.emu.watchdog[0]
    r.enable()
    r.reference_all(1.0)
    r.step_to(0.6)
    assert not r.emu.watchdog[0] and r.feedback(4)[-1][1]["Enabled"] == 1


def test_emergency_stop_disables_every_module_within_one_frame(rig):
    r = rig(EmulatorConfig(feedback_rate_hz=1000.0))
    r.enable()
    hold_reference(r, 20.0, until_s=0.3)
    r.reference_all(-20.0)
    r.step_to(0.305)
    assert r.emu.drive.voltage_v.any()
    r.send(MessageKind.EMERGENCY_STOP, 0, {"Key": 0xA5})
    r.emu.poll_bus()  # the frame handler alone, no controller tick yet
    assert r.emu.drive.brake.all() and not r.emu.drive.voltage_v.any()
    n_before = len(r.received)
    r.step_to(0.306)
    first_after = {}
    for m in r.received[n_before:]:
        kind, node = CODEC.scheme.classify(m.arbitration_id)
        if kind is MessageKind.FEEDBACK and node not in first_after:
            first_after[node] = CODEC.decode(m.arbitration_id, m.data).values
    assert sorted(first_after) == list(range(1, 11))
    assert all(v["Enabled"] == 0 and v["EStop"] == 1 and v["Fault"] == 1 for v in first_after.values())
    # references and enable are ignored until faults are cleared
    r.enable()
    r.reference_all(0.0)
    r.step_to(0.4)
    assert not r.emu.drive.voltage_v.any()
    r.send(MessageKind.COMMAND, 0, {"Command": int(Command.CLEAR_FAULTS), "TargetNode": 0})
    r.enable()
    r.step_to(0.41)
    assert r.feedback(3)[-1][1]["Enabled"] == 1 and r.feedback(3)[-1][1]["EStop"] == 0


# ---------------------------------------------------------------- bad traffic
def test_bad_traffic_is_rejected_counted_and_never_actuated(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.enable()
    r.reference_all(5.0)
    r.step_to(0.05)
    reference_before = r.emu.reference_rad.copy()
    accepted_before = r.emu.accepted_references.copy()
    ref1 = CODEC.frame_id(MessageKind.REFERENCE, 1)
    good = dict(AngleH=-30.0, AngleV=0.0, RateH=0.0, RateV=0.0)
    _, data = CODEC.encode(MessageKind.REFERENCE, 1, {**good, "Sequence": 1})
    r.send_raw(ref1, data[:7])  # wrong DLC
    r.send_raw(0x7F0, data)  # unknown id
    r.send_raw(ref1, data, ext=True)  # extended id: not ours
    out_of_range = (18001).to_bytes(2, "little", signed=True) + data[2:]
    r.send_raw(ref1, out_of_range)
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 0})  # duplicate of the accepted seq 0
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 200})  # stale (200 - 0 mod 256 >= 128)
    r.send_raw(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([0xA4]))  # wrong e-stop key
    r.send_raw(CODEC.frame_id(MessageKind.EMERGENCY_STOP), bytes([0xA5, 0]))  # e-stop with wrong DLC
    r.send(MessageKind.COMMAND, 0, {"Command": 9, "TargetNode": 0})  # unknown command
    r.step_to(0.06)
    np.testing.assert_array_equal(r.emu.reference_rad, reference_before)
    np.testing.assert_array_equal(r.emu.accepted_references, accepted_before)
    assert not r.emu.estop.any() and r.emu.drive.voltage_v.any()
    c = r.emu.counters()
    assert c["rejected"]["wrong_dlc"] == [2, 1]  # the bad reference (node 1) + the bad e-stop (both)
    assert c["rejected"]["out_of_range"] == [1, 0]
    assert c["rejected"]["duplicate_sequence"] == [1, 0]
    assert c["rejected"]["stale_sequence"] == [1, 0]
    assert c["rejected"]["bad_estop_key"] == [1, 1]
    assert c["rejected"]["unknown_command"] == [1, 1]
    assert c["unknown_id_frames"] == 2
    # the counter reaches the PC in JointRates
    r.step_to(0.2)
    rates = [m for m in r.received if m.arbitration_id == CODEC.frame_id(MessageKind.RATES, 1)]
    assert CODEC.decode(rates[-1].arbitration_id, rates[-1].data).values["RejectedFrames"] == 7
    # and a valid next sequence is still accepted
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 1})
    r.step_to(0.21)
    assert math.degrees(r.emu.reference_rad[0, 0]) == pytest.approx(-30.0)


def test_sequence_wraps_around(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.enable()
    r.sequence = 250
    hold_reference(r, 1.0, until_s=1.5)  # 15 frames: 250..255, 0..8
    assert r.emu.accepted_references[0] == 15 and r.emu.counters()["rejected_total"] == 0


def test_parameters_read_write_over_can(rig):
    r = rig(EmulatorConfig(node_ids=(5,)))
    request = MessageKind.PARAMETER_REQUEST
    r.send(request, 5, {"Index": int(Parameter.KP_H), "Write": 1, "Value": 250.0})
    r.send(request, 5, {"Index": int(Parameter.REFERENCE_PERIOD_MS), "Write": 1, "Value": 10.0})
    r.send(request, 5, {"Index": int(Parameter.TORQUE_LIMIT_V_NM), "Write": 1, "Value": 99.0})
    r.send(request, 5, {"Index": int(Parameter.WATCHDOG_PERIODS), "Write": 1, "Value": 1e6})
    r.send(request, 5, {"Index": 77, "Write": 0, "Value": 0.0})
    r.step_to(0.001)
    replies = [CODEC.decode(m.arbitration_id, m.data).values for m in r.received if m.arbitration_id == 0x585]
    assert [(v["Index"], v["Result"]) for v in replies] == [
        (Parameter.KP_H, ParameterResult.OK),
        (Parameter.REFERENCE_PERIOD_MS, ParameterResult.OK),
        (Parameter.TORQUE_LIMIT_V_NM, ParameterResult.READ_ONLY),
        (Parameter.WATCHDOG_PERIODS, ParameterResult.OUT_OF_RANGE),
        (77, ParameterResult.UNKNOWN_INDEX),
    ]
    assert replies[0]["Value"] == 250.0 and r.emu.controller.kp[0, 0] == 250.0
    assert r.emu.reference_period_s[0] == pytest.approx(0.01)
    assert replies[2]["Value"] == pytest.approx(r.emu.config.drive.torque_limit_nm, rel=1e-6)


# ---------------------------------------------------------------- plant seam and determinism
class RecordingPlant(IndependentInertiaPlant):
    def __init__(self, n):
        super().__init__(n)
        self.calls = []

    def advance(self, torques_nm, dt_s):
        self.calls.append((torques_nm.copy(), dt_s))
        super().advance(torques_nm, dt_s)


def test_external_plant_receives_joint_torques_at_the_physics_rate(rig):
    plant = RecordingPlant(2)
    r = rig(EmulatorConfig(node_ids=(1, 2)), plant)
    r.enable()
    r.reference_all(10.0)
    r.step_to(0.1)
    assert len(plant.calls) == 100 * r.emu.config.physics_substeps
    assert all(dt == pytest.approx(0.25e-3) for _, dt in plant.calls)
    torques = np.array([t for t, _ in plant.calls])
    assert torques.shape == (400, 2, 2) and torques[:, :, 0].max() > 0.1  # pushes toward +10 deg
    assert np.abs(torques).max() <= r.emu.config.drive.torque_limit_nm * 1.5


def test_plant_with_wrong_shape_is_refused():
    bus = can.Bus(interface="virtual", channel="test-emulator-shape")
    try:
        with pytest.raises(EmulatorConfigError, match=r"expected \(10, 2\)"):
            JointControllerEmulator(bus, EmulatorConfig(), IndependentInertiaPlant(3))
        with pytest.raises(EmulatorConfigError, match="reference_hold"):
            EmulatorConfig(reference_hold="cubic")
    finally:
        bus.shutdown()


def test_lockstep_is_deterministic(rig):
    runs = []
    for _ in range(2):
        r = rig(EmulatorConfig(node_ids=(1, 2, 3)))
        r.enable()
        hold_reference(r, [5.0, -7.0, 12.0], until_s=0.5)
        runs.append([(m.arbitration_id, bytes(m.data), round(m.timestamp, 9)) for m in r.received])
    assert runs[0] == runs[1] and len(runs[0]) > 100


@pytest.mark.parametrize("sensor", ["gear", "joint"])
def test_free_play_inside_the_loop_hunts_outside_it_rests(rig, sensor):
    """Backlash between sensor and motor puts a dead zone inside the position loop: the classic limit cycle.
    Measuring on the gear side (the default, as with a motor encoder) the joint rests inside the play instead."""
    r = rig(EmulatorConfig(node_ids=(1,), sensor=sensor))
    r.enable()
    joint_deg = []
    t = 0.0
    for _ in range(30):
        r.reference_all(10.0)
        for _ in range(100):
            t += 1e-3
            r.step_to(t)
            joint_deg.append(math.degrees(r.emu.plant.joint_state()[0][0, 0]))
    last_second = np.array(joint_deg[-1000:])
    play_deg = math.degrees(r.emu.config.drive.free_play_rad)
    peak_to_peak = last_second.max() - last_second.min()
    if sensor == "gear":
        assert peak_to_peak < 0.01 and abs(last_second.mean() - 10.0) <= play_deg / 2 + 0.05
    else:
        assert play_deg / 2 < peak_to_peak < 2 * play_deg  # a sustained oscillation about the size of the play
        assert abs(last_second.mean() - 10.0) < play_deg / 2


# ---------------------------------------------------------------- fuzzing the receive path
_REFERENCE_IDS = {CODEC.frame_id(MessageKind.REFERENCE, n) for n in (1, 2)}


@pytest.fixture(scope="module")
def fuzz_bus():
    bus = can.Bus(interface="virtual", channel="test-emulator-fuzz")
    yield bus
    bus.shutdown()


@settings(max_examples=400, deadline=None)
@given(
    frame_id=st.one_of(st.integers(0, 0x7FF), st.sampled_from(sorted(_REFERENCE_IDS))),
    data=st.binary(min_size=0, max_size=8),
    extended=st.booleans(),
)
def test_random_frames_never_raise_and_only_valid_references_move_the_setpoint(fuzz_bus, frame_id, data, extended):
    emu = JointControllerEmulator(fuzz_bus, EmulatorConfig(node_ids=(1, 2)))
    emu.handle_frame(can.Message(arbitration_id=0x010, data=bytes([1, 0]), is_extended_id=False))  # enable all
    emu.reference_rad[...] = 0.123  # a recognisable setpoint
    before_rejected = emu.counters()["rejected_total"] + emu.unknown_id_frames
    emu.handle_frame(can.Message(arbitration_id=frame_id, data=data, is_extended_id=extended))
    moved = not np.all(emu.reference_rad == 0.123)
    valid_reference = False
    if not extended and frame_id in _REFERENCE_IDS and len(data) == 8:
        angle_h = int.from_bytes(data[0:2], "little", signed=True)
        angle_v = int.from_bytes(data[2:4], "little", signed=True)
        valid_reference = abs(angle_h) <= 18000 and abs(angle_v) <= 18000  # first reference after enable
    assert moved == valid_reference
    if moved:  # and then only within the joint limits
        assert np.all(np.abs(emu.reference_rad) <= emu.limits_rad + 1e-12)
    classified = None if extended else CODEC.scheme.classify(frame_id)
    if classified is None:
        assert emu.unknown_id_frames == 1  # every frame outside the protocol is counted
    elif frame_id in _REFERENCE_IDS and not valid_reference:  # ours but bad: counted (others' are not ours)
        assert emu.counters()["rejected_total"] + emu.unknown_id_frames == before_rejected + 1


# ---------------------------------------------------------------- reconfiguration lock, sequence window, watchdog floor
def _replies(r: Rig, node: int) -> list[dict]:
    fid = CODEC.frame_id(MessageKind.PARAMETER_REPLY, node)
    return [CODEC.decode(fid, m.data).values for m in r.received if m.arbitration_id == fid]


def test_parameter_writes_are_locked_while_enabled_and_counted(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.enable()
    r.reference_all(0.0)
    r.step_to(0.01)
    stray = [
        (Parameter.WATCHDOG_PERIODS, 100.0),
        (Parameter.REFERENCE_PERIOD_MS, 1000.0),
        (Parameter.KP_H, 5.7e-22),
        (Parameter.LIMIT_H_DEG, 180.0),
    ]
    for node in (1, 2):
        for _ in range(5):  # 20 stray frames per module
            for parameter, value in stray:
                r.send(MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": 1, "Value": value})
    r.step_to(0.02)
    assert r.emu.watchdog_periods.tolist() == [3.0, 3.0] and r.emu.reference_period_s.tolist() == [0.1, 0.1]
    assert (r.emu.controller.kp[:, 0] > 1.0).all() and np.degrees(r.emu.limits_rad[:, 0]) == pytest.approx(90.0)
    assert r.emu.counters()["rejected"]["parameter_while_enabled"] == [20, 20]
    assert {v["Result"] for v in _replies(r, 1)} == {ParameterResult.LOCKED}
    # the watchdog still trips 0.3 s after the last reference (sent at t = 0)
    r.step_to(0.5)
    assert np.all(np.abs(r.emu.watchdog_trip_s - 0.3) <= 2 * r.emu.dt_s)
    # disabled, the same write is accepted
    r.send(MessageKind.COMMAND, 0, {"Command": int(Command.DISABLE), "TargetNode": 0})
    r.send(MessageKind.PARAMETER_REQUEST, 1, {"Index": int(Parameter.WATCHDOG_PERIODS), "Write": 1, "Value": 5.0})
    r.step_to(0.51)
    assert r.emu.watchdog_periods[0] == 5.0 and _replies(r, 1)[-1]["Result"] == ParameterResult.OK


@pytest.mark.parametrize(
    ("periods", "period_ms", "accepted"),
    [(100.0, 1000.0, False), (20.0, 100.0, True), (21.0, 100.0, False), (1.0, 9.0, False), (1.0, 10.0, True)],
)
def test_watchdog_timeout_has_a_floor_and_a_ceiling(rig, periods, period_ms, accepted):
    r = rig(EmulatorConfig(node_ids=(1,)))
    request = MessageKind.PARAMETER_REQUEST
    r.send(request, 1, {"Index": int(Parameter.REFERENCE_PERIOD_MS), "Write": 1, "Value": period_ms})
    r.send(request, 1, {"Index": int(Parameter.WATCHDOG_PERIODS), "Write": 1, "Value": periods})
    r.step_to(0.001)
    timeout_ms = r.emu.watchdog_periods[0] * r.emu.reference_period_s[0] * 1e3
    assert 10.0 - 1e-9 <= timeout_ms <= 2000.0 + 1e-9  # whatever was written
    assert (r.emu.watchdog_periods[0] == periods) == accepted
    with pytest.raises(EmulatorConfigError, match="watchdog_periods"):
        EmulatorConfig(watchdog_periods=100, reference_period_s=0.5)


def test_parameter_request_with_reserved_bits_is_rejected(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    fid, data = CODEC.encode(
        MessageKind.PARAMETER_REQUEST, 1, {"Index": int(Parameter.KP_H), "Write": 1, "Value": 10.0}
    )
    r.send_raw(fid, data[:2] + b"\x01" + data[3:])
    r.send_raw(fid, data[:1] + bytes([data[1] | 0x80]) + data[2:])
    r.step_to(0.001)
    assert r.emu.counters()["rejected"]["reserved_bits"] == [2] and r.emu.controller.kp[0, 0] != 10.0
    assert _replies(r, 1) == []


def test_a_forged_sequence_jump_does_not_lock_out_the_real_sender(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.enable()
    good = dict(AngleH=10.0, AngleV=0.0, RateH=0.0, RateV=0.0)
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 0})
    r.step_to(0.01)
    r.send(MessageKind.REFERENCE, 1, {**good, "AngleH": -40.0, "Sequence": 100})  # forged: +100
    for seq in range(1, 6):
        r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": seq})
    r.step_to(0.02)
    assert r.emu.accepted_references[0] == 6  # 0, then 1..5 of the real stream
    assert r.emu.counters()["rejected"]["sequence_jump"] == [1]
    assert math.degrees(r.emu.reference_rad[0, 0]) == pytest.approx(10.0)  # the forged angle never actuated
    # a sender that lost more than the window resynchronises on an explicit Enable
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 50})
    r.enable()
    r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": 50})
    r.step_to(0.03)
    assert r.emu.accepted_references[0] == 7


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 0x7FF), st.binary(min_size=0, max_size=8)), min_size=1, max_size=1000))
def test_watchdog_stops_every_module_after_any_random_frames(frames):
    """Whatever stray frames arrive while the modules are enabled, the watchdog trips <= 0.3 s after the PC's
    last reference (3 periods of 100 ms), or the modules are already stopped (a stray Disable or e-stop)."""
    r = Rig(EmulatorConfig(node_ids=(1, 2, 3)))
    try:
        r.enable()
        r.reference_all(0.0)
        r.step_to(0.001)
        for frame_id, data in frames:
            if frame_id == 0x010:
                # broadcast commands are left out: Disable, a write, Enable is how the PC legitimately
                # reconfigures a module, and a frame cannot tell a stray sender from the PC
                continue
            r.send_raw(frame_id, data)
        r.step_to(0.002)
        assert r.emu.watchdog_periods.tolist() == [3.0] * 3 and r.emu.reference_period_s.tolist() == [0.1] * 3
        r.step_to(0.31)
        assert (r.emu.state != 2).all()  # not ENABLED: watchdog (or a stray e-stop) stopped each one
    finally:
        r.close()


# ---------------------------------------------------------------- safety logic, edge by edge (mutation testing)
def _parameter(r: Rig, node: int, parameter, value: float | None = None) -> dict:
    """Read (value None) or write one parameter over CAN; returns the module's reply."""
    write = value is not None
    r.send(MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": int(write), "Value": value or 0.0})
    n_before = len(r.received)
    r.step_to(r.emu.time_s + r.emu.dt_s)
    reply_id = CODEC.frame_id(MessageKind.PARAMETER_REPLY, node)
    replies = [
        CODEC.decode(m.arbitration_id, m.data).values for m in r.received[n_before:] if m.arbitration_id == reply_id
    ]
    assert len(replies) == 1
    return replies[0]


def test_a_watchdog_trip_is_counted_once_logged_and_leaves_disabled_modules_braked(rig, caplog):
    """Module 1 is enabled and goes silent, module 2 was never enabled: at module 1's trip the disabled module
    must stay braked with no voltage (the trip must not re-enable anything), each trip counts once, and the log
    names the module."""
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    r.send(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 1})
    r.step_to(0.001)
    trip_tick_s = 0.3 + r.emu.dt_s  # enabled at t = 0 (frames are handled before the ticks), 3 × 0.1 s, next tick
    with caplog.at_level("WARNING", logger="firmware_protocol.emulator.modules"):
        while not r.emu.watchdog[0]:
            r.step_to(r.emu.time_s + r.emu.dt_s)
            assert r.emu.drive.brake[1].all() and not r.emu.drive.voltage_v[1].any()
    assert r.emu.watchdog_trip_s[0] == pytest.approx(trip_tick_s)
    assert r.emu.drive.brake.all() and not r.emu.drive.voltage_v.any()
    assert r.emu.counters()["watchdog_trips"] == [1, 0]
    assert "module 1: no valid reference since" in caplog.text and "watchdog tripped" in caplog.text
    r.enable()  # both; module 2 then also goes silent
    r.step_to(1.0)
    assert r.emu.counters()["watchdog_trips"] == [2, 1]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_limit_lowered_over_can_clamps_the_reference_already_held(rig, sign):
    """Limits change only while the module is disabled (an enabled module answers Locked); the tick clamps the held
    reference to the current limits, so a limit lowered while disabled holds a reference held from before, on
    either side, at once after the next Enable, without waiting for a new reference."""
    r = rig(EmulatorConfig(node_ids=(1,), reference_period_s=0.5))
    r.enable()
    r.reference_all(sign * 60.0, angle_v_deg=-sign * 40.0)
    r.step_to(0.001)
    assert _parameter(r, 1, Parameter.LIMIT_H_DEG, 30.0)["Result"] == ParameterResult.LOCKED
    r.step_to(1.0)
    np.testing.assert_allclose(np.degrees(r.emu.drive.gear_angle_rad[0]), [sign * 60.0, -sign * 40.0], atol=0.05)
    r.send(MessageKind.COMMAND, 0, {"Command": int(Command.DISABLE), "TargetNode": 0})
    assert _parameter(r, 1, Parameter.LIMIT_H_DEG, 30.0)["Result"] == ParameterResult.OK
    assert _parameter(r, 1, Parameter.LIMIT_V_DEG, 20.0)["Result"] == ParameterResult.OK
    r.enable()
    r.step_to(r.emu.time_s + 1.0)
    np.testing.assert_allclose(np.degrees(r.emu.drive.gear_angle_rad[0]), [sign * 30.0, -sign * 20.0], atol=0.05)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_linear_hold_extrapolates_with_the_rate_and_stops_at_the_limit(rig, sign):
    """reference_hold = "linear": α_r(t) = α + α̇ (t − t_ref), clamped to the module's joint limit (here 30°; the
    plant's hard stops are at 90°, so only the module's clamp stops the joint). At the clamp the rate
    feed-forward must stop too: kept, it would hold the joint (kd + k_emf) α̇ / kp ≈ 0.47° beyond the limit,
    pushing on for as long as the extrapolation lasts."""
    config = EmulatorConfig(  # watchdog 2 × 1 s (the protocol's 2000 ms ceiling): trips at 2.5 s, after the checks
        node_ids=(1,),
        reference_hold="linear",
        reference_period_s=1.0,
        watchdog_periods=2,
        limit_h_rad=math.radians(30),
    )
    r = rig(config, IndependentInertiaPlant(1))
    r.enable()
    r.reference_all(0.0)
    r.step_to(0.5)
    r.reference_all(0.0, rate_h=sign * 20.0)  # t_ref = 0.5 s
    r.step_to(1.0)
    # 0.5 s into the ramp: 10°. The PD with rate and back-EMF feed-forward lags the ramp by 0.024° (gear friction,
    # rate filter); without either feed-forward the lag would be ≥ 0.17°
    assert math.degrees(r.emu.drive.gear_angle_rad[0, 0]) == pytest.approx(sign * 10.0, abs=0.05)
    r.step_to(2.4)  # the ramp would be at 38°: clamped to 30°
    assert math.degrees(r.emu.drive.gear_angle_rad[0, 0]) == pytest.approx(sign * 30.0, abs=0.05)
    assert abs(math.degrees(r.emu.plant.joint_state()[0][0, 0])) <= 30.0 + math.degrees(config.drive.free_play_rad) / 2


def test_drive_voltage_stays_within_the_supply_and_effort_is_voltage_over_supply(rig):
    r = rig(EmulatorConfig(node_ids=(1,), feedback_rate_hz=1000.0))
    r.enable()
    supply = r.emu.config.drive.supply_v
    for target in (0.3, -80.0):  # a small step that does not saturate, then one that does (negative)
        r.reference_all(target)
        for _ in range(200):
            r.step_to(r.emu.time_s + r.emu.dt_s)
            assert np.all(np.abs(r.emu.drive.voltage_v) <= supply)
            np.testing.assert_allclose(r.emu.effort, r.emu.drive.voltage_v / supply, rtol=1e-12)
            assert np.all(r.emu.saturated[np.abs(r.emu.drive.voltage_v) >= supply])  # at the rail: Saturated
    small = [v["EffortH"] for _, v in r.feedback(1)[:200]]
    assert 0.0 < max(np.abs(small)) < 1.0  # the small step was actually unsaturated


def test_at_limit_flags_within_half_a_degree_of_the_limit(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), limit_h_rad=math.radians(45.0)))
    r.enable()
    hold_reference(r, [44.0, 44.7], until_s=1.5)
    last = {node: r.feedback(node)[-1][1] for node in (1, 2)}
    assert (last[1]["AtLimit"], last[2]["AtLimit"]) == (0, 1)


def test_feedback_requested_over_can_is_sent_even_when_the_default_rate_is_zero(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), feedback_rate_hz=0.0))
    r.step_to(0.1)
    assert not r.feedback(1) and not r.feedback(2)
    assert _parameter(r, 2, Parameter.FEEDBACK_RATE_HZ, 100.0)["Result"] == ParameterResult.OK
    r.step_to(0.2)
    assert not r.feedback(1) and 9 <= len(r.feedback(2)) <= 11


@pytest.mark.parametrize(("controller_hz", "heartbeat_hz", "until_s", "expected"), [
    (1000.0, 1.0, 2.5, [0.0, 1.0, 2.0]), (100.0, 100.0, 0.05, [k / 100 for k in range(5)]), (1000.0, 0.0, 1.5, []),
])  # fmt: skip
def test_heartbeats_follow_the_heartbeat_rate(rig, controller_hz, heartbeat_hz, until_s, expected):
    config = EmulatorConfig(
        node_ids=(3,), controller_rate_hz=controller_hz, heartbeat_rate_hz=heartbeat_hz, feedback_rate_hz=0.0
    )
    r = rig(config)
    r.step_to(until_s - 1e-9)
    heartbeat_id = CODEC.frame_id(MessageKind.HEARTBEAT, 3)
    beats = [m for m in r.received if m.arbitration_id == heartbeat_id]
    assert [round(m.timestamp, 9) for m in beats] == expected
    for m in beats:
        values = CODEC.decode(heartbeat_id, m.data).values
        assert values["State"] == 1 and values["Uptime"] == int(m.timestamp)  # DISABLED


@pytest.mark.parametrize(
    ("parameter", "value", "where"),
    [
        (Parameter.KP_H, 123.0, ("kp", 0)),
        (Parameter.KP_V, 456.0, ("kp", 1)),
        (Parameter.KD_H, 1.5, ("kd", 0)),
        (Parameter.KD_V, 2.5, ("kd", 1)),
        (Parameter.LIMIT_H_DEG, 30.0, ("limits", 0)),
        (Parameter.LIMIT_V_DEG, 20.0, ("limits", 1)),
        (Parameter.WATCHDOG_PERIODS, 7.0, ("watchdog_periods", None)),
        (Parameter.REFERENCE_PERIOD_MS, 20.0, ("reference_period_s", None)),
        (Parameter.FEEDBACK_RATE_HZ, 50.0, ("feedback_rate_hz", None)),
    ],
)
def test_a_parameter_write_changes_exactly_its_own_entry_of_its_own_module(rig, parameter, value, where):
    """Writing node 2's parameter must leave node 1 and every other parameter alone, and read back as written."""
    r = rig(EmulatorConfig(node_ids=(1, 2)))
    e = r.emu

    def snapshot():
        return {
            "kp": e.controller.kp.copy(),
            "kd": e.controller.kd.copy(),
            "limits": np.degrees(e.limits_rad),
            "watchdog_periods": e.watchdog_periods.copy(),
            "reference_period_s": e.reference_period_s * 1e3,
            "feedback_rate_hz": e.feedback_rate_hz.copy(),
        }

    before = snapshot()
    reply = _parameter(r, 2, parameter, value)
    assert (reply["Index"], reply["Result"], reply["Value"]) == (parameter, ParameterResult.OK, pytest.approx(value))
    assert _parameter(r, 2, parameter)["Value"] == pytest.approx(value)
    after = snapshot()
    name, column = where
    expected = before[name].copy()
    if column is None:
        expected[1] = value
    else:
        expected[1, column] = value
    for key in before:
        np.testing.assert_allclose(after[key], expected if key == name else before[key], rtol=1e-12, err_msg=key)


def test_parameter_ranges_are_inclusive_and_bad_requests_count_against_their_own_module(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2)))  # reference period 0.1 s: the timeout caps the periods at 20
    for value in (1.0, 20.0):  # both ends: the field's floor, and 20 × 100 ms = the 2000 ms timeout ceiling
        assert _parameter(r, 2, Parameter.WATCHDOG_PERIODS, value)["Result"] == ParameterResult.OK
    assert _parameter(r, 2, Parameter.WATCHDOG_PERIODS, 20.5)["Result"] == ParameterResult.OUT_OF_RANGE
    unknown = _parameter(r, 2, 77)
    assert (unknown["Result"], unknown["Value"]) == (ParameterResult.UNKNOWN_INDEX, 0.0)
    r.send_raw(CODEC.frame_id(MessageKind.PARAMETER_REQUEST, 2), bytes(3))  # wrong DLC
    r.step_to(r.emu.time_s + r.emu.dt_s)
    rejected = r.emu.counters()["rejected"]
    assert rejected["out_of_range"] == [0, 1] and rejected["wrong_dlc"] == [0, 1]


def test_commands_act_on_their_target_only_and_disable_disables(rig):
    """A targeted ENABLE enables that module alone; a command for a node not emulated here is ignored; DISABLE
    takes an enabled module back to DISABLED (braked, no voltage); CLEAR_FAULTS after an e-stop leaves the module
    DISABLED until a new ENABLE and does not disable a healthy module; an unknown command counts against its target."""
    r = rig(EmulatorConfig(node_ids=(1, 2), reference_period_s=0.5))
    command = MessageKind.COMMAND
    r.send(command, 0, {"Command": int(Command.ENABLE), "TargetNode": 2})
    r.send(command, 0, {"Command": int(Command.ENABLE), "TargetNode": 9})  # not ours
    r.step_to(0.01)
    assert list(r.emu.state) == [ModuleState.DISABLED, ModuleState.ENABLED]
    r.send(command, 0, {"Command": int(Command.CLEAR_FAULTS), "TargetNode": 2})  # nothing to clear
    r.step_to(0.02)
    assert r.emu.state[1] == ModuleState.ENABLED
    r.reference_all(20.0)
    r.step_to(0.05)
    assert r.emu.drive.voltage_v[1].any()
    r.send(command, 0, {"Command": int(Command.DISABLE), "TargetNode": 2})
    r.step_to(0.06)
    assert list(r.emu.state) == [ModuleState.DISABLED, ModuleState.DISABLED]
    assert r.emu.drive.brake.all() and not r.emu.drive.voltage_v.any()
    r.send(command, 0, {"Command": 9, "TargetNode": 2})
    r.step_to(0.07)
    assert r.emu.counters()["rejected"]["unknown_command"] == [0, 1]
    r.send(MessageKind.EMERGENCY_STOP, 0, {"Key": 0xA5})
    r.step_to(0.08)
    assert list(r.emu.state) == [ModuleState.ESTOP, ModuleState.ESTOP]
    r.send(command, 0, {"Command": int(Command.CLEAR_FAULTS), "TargetNode": 0})
    r.step_to(0.09)
    assert list(r.emu.state) == [ModuleState.DISABLED, ModuleState.DISABLED]
    assert not (r.emu.estop.any() or r.emu.fault.any() or r.emu.watchdog.any())


@pytest.mark.parametrize("hold", ["zoh", "linear"])
def test_enabling_holds_the_joint_where_it_is(rig, hold):
    """ENABLE takes the current angle as the reference with zero rate and a fresh rate estimate: with no
    reference yet the module holds still (no jump, no drift) until the watchdog."""
    r = rig(
        EmulatorConfig(node_ids=(1,), reference_hold=hold),
        IndependentInertiaPlant(1, initial_angles_rad=np.radians([[12.0, -7.0]])),
    )
    r.step_to(0.05)
    r.emu.controller.rate_estimate_rad_s[...] = 0.5  # as left behind by an earlier motion
    r.enable()
    start = r.emu.drive.gear_angle_rad.copy()
    while r.emu.time_s < 0.29:
        r.step_to(r.emu.time_s + r.emu.dt_s)
        assert np.all(np.isfinite(r.emu.drive.voltage_v))
        assert np.abs(np.degrees(r.emu.drive.gear_angle_rad - start)).max() < 1e-3
    assert r.emu.state[0] == ModuleState.ENABLED


def test_sequence_numbers_up_to_the_window_ahead_are_accepted_further_jumps_and_older_ones_are_not(rig):
    """Serial-number arithmetic mod 256: 1..SEQUENCE_WINDOW (8) ahead, also across the wrap, is accepted; 9..127
    ahead is a jump (rejected, the last sequence unchanged); 128 and more ahead is stale."""
    r = rig(EmulatorConfig(node_ids=(1,)))
    r.enable()
    good = dict(AngleH=1.0, AngleV=0.0, RateH=0.0, RateV=0.0)
    steps = [
        (250, "accepted"),  # the first after Enable synchronises
        (2, "accepted"),  # 8 ahead across the wrap
        (11, "sequence_jump"),  # 9 ahead
        (3, "accepted"),  # the jump did not move the last sequence
        (131, "stale_sequence"),  # exactly 128 ahead
        (2, "stale_sequence"),  # behind
        (3, "duplicate_sequence"),
    ]
    for sequence, verdict in steps:
        before = r.emu.counters()
        r.send(MessageKind.REFERENCE, 1, {**good, "Sequence": sequence})
        r.step_to(r.emu.time_s + r.emu.dt_s)
        after = r.emu.counters()
        if verdict == "accepted":
            assert after["accepted_references"][0] == before["accepted_references"][0] + 1, sequence
        else:
            assert after["rejected"][verdict][0] == before["rejected"][verdict][0] + 1, sequence


def test_references_to_a_disabled_module_are_counted_once_each_and_clamped_when_accepted(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), limit_h_rad=math.radians(60.0), limit_v_rad=math.radians(30.0)))
    for _ in range(3):
        r.reference_all(10.0)
    r.step_to(0.01)
    assert r.emu.counters()["ignored_while_disabled"] == [3, 3]
    r.enable()
    r.reference_all(170.0, angle_v_deg=-170.0)
    r.step_to(0.02)
    np.testing.assert_allclose(np.degrees(r.emu.reference_rad), [[60.0, -30.0], [60.0, -30.0]])
    r.reference_all(-170.0, angle_v_deg=170.0)
    r.step_to(0.03)
    np.testing.assert_allclose(np.degrees(r.emu.reference_rad), [[-60.0, 30.0], [-60.0, 30.0]])


def test_reply_to_references_answers_each_accepted_reference_with_one_feedback(rig):
    r = rig(EmulatorConfig(node_ids=(1, 2), feedback_rate_hz=0.0, heartbeat_rate_hz=0.0, reply_to_references=True))
    r.enable()
    r.reference_all(5.0)
    r.reference_all(6.0)
    r.step_to(0.001)
    kinds = [CODEC.scheme.classify(m.arbitration_id) for m in r.received]
    assert sorted(kinds) == sorted([(MessageKind.FEEDBACK, 1)] * 2 + [(MessageKind.FEEDBACK, 2)] * 2)
    assert [v["RefSequence"] for _, v in r.feedback(2)] == [0, 1]


def test_every_handled_frame_is_counted_and_shown_to_the_hooks_and_remote_frames_are_not_ours(rig):
    r = rig(EmulatorConfig(node_ids=(1,)))
    seen = []
    r.emu.frame_hooks.append(seen.append)
    r.enable()
    reference_id = CODEC.frame_id(MessageKind.REFERENCE, 1)
    r.send_raw(reference_id, b"", is_remote_frame=True, dlc=8)  # an RTR frame carries no reference
    r.step_to(0.001)
    assert r.emu.frames_received == 2 and [m.arbitration_id for m in seen] == [0x010, reference_id]
    assert r.emu.unknown_id_frames == 1 and r.emu.counters()["rejected_total"] == 0


def test_the_modules_count_the_longest_gap_and_the_shortest_spacing_of_the_references(rig):
    """What the PC's stream looked like from the module (the outside probes report it): from Enable at 0.1 s,
    references at 0.2, 0.3, 0.55 and 0.58 s: the longest gap 0.25 s, the shortest spacing 0.03 s."""
    r = rig(EmulatorConfig(node_ids=(1,), watchdog_periods=10))
    r.step_to(0.1)
    r.enable()
    for t_s in (0.2, 0.3, 0.55, 0.58):
        r.step_to(t_s)
        r.reference_all(1.0)
    r.step_to(0.6)
    counters = r.emu.counters()
    assert counters["max_reference_gap_s"] == [pytest.approx(0.25, abs=2e-3)]
    assert counters["min_reference_spacing_s"] == [pytest.approx(0.03, abs=2e-3)]
    assert rig(EmulatorConfig(node_ids=(2,))).emu.counters()["min_reference_spacing_s"] == [None]  # none yet


def test_real_time_counters_place_module_time_on_the_monotonic_clock():
    # the safety probe puts a watchdog trip (module time) beside the pty's read times (monotonic): origin + t
    import time

    rig = Rig()
    try:
        before = time.monotonic()
        rig.emu.start()
        time.sleep(0.2)
        rig.emu.stop()
        counters = rig.emu.counters()
        now = time.monotonic()
        assert before - 0.01 <= counters["origin_monotonic_s"] <= now
        assert counters["origin_monotonic_s"] + rig.emu.time_s <= now + 0.01
        assert counters["largest_lag_s"] >= 0.0 and counters["resyncs"] == 0
    finally:
        rig.close()
