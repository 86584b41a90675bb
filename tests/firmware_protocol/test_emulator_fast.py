"""The compiled module ticks (firmware_protocol/emulator/fast.py) against the readable numpy path, bit for bit."""

import itertools

import can
import numpy as np
import pytest

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import ESTOP_KEY, Command, MessageKind, Parameter
from firmware_protocol.emulator import EmulatorConfig, IndependentInertiaPlant, JointControllerEmulator
from firmware_protocol.emulator.modules import compiled_runner

CODEC = default_codec()
_channels = itertools.count()

STATE = (
    "state", "watchdog", "watchdog_trip_s", "watchdog_trips", "reference_rad", "effort", "at_limit", "saturated",
    "accepted_references", "last_sequence", "current_limited_ticks", "enabled_axis_ticks",
)  # fmt: skip


def _scenario(config: EmulatorConfig, use_reference: bool) -> tuple[JointControllerEmulator, list]:
    """Enable, stream references with rates (one to a limit), write a feedback rate and gains, let the watchdog
    trip, enable again, e-stop: every event the compiled batches must stop at or carry through."""
    channel = f"test-emulator-fast-{next(_channels)}"
    pc = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
    emu_bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
    n = config.n_modules
    initial = np.column_stack([np.linspace(-0.3, 0.3, n), np.linspace(0.1, -0.1, n)])
    emu = JointControllerEmulator(
        emu_bus, config, IndependentInertiaPlant(n, None, initial), use_reference=use_reference
    )
    frames = []
    seen = {"saturated": False, "at_limit": False}

    def send(kind, node, values):
        frame_id, data = CODEC.encode(kind, node, values)
        pc.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))

    def step_to(t_s):
        emu.step_to(t_s)
        seen["saturated"] |= bool(emu.saturated.any())
        seen["at_limit"] |= bool(emu.at_limit.any())
        while (msg := pc.recv(timeout=0)) is not None:
            frames.append((msg.arbitration_id, bytes(msg.data), msg.timestamp))

    send(MessageKind.PARAMETER_REQUEST, 2, {"Index": int(Parameter.FEEDBACK_RATE_HZ), "Write": 1, "Value": 250.0})
    send(MessageKind.PARAMETER_REQUEST, 3, {"Index": int(Parameter.KP_H), "Write": 1, "Value": 900.0})
    send(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
    step_to(0.0123)
    for k in range(12):
        for i, node in enumerate(config.node_ids):
            angle_h = 40.0 * np.sin(0.7 * k + i) + (95.0 if i == 0 else 0.0)  # module 1 pushed past its limit
            values = {"AngleH": angle_h, "AngleV": 5.0 * np.cos(k + i), "RateH": 60.0 * np.cos(0.7 * k + i)}
            send(MessageKind.REFERENCE, node, {**values, "RateV": -20.0, "Sequence": k + 1})
        step_to(0.0123 + 0.0317 * (k + 1))
    step_to(0.9)  # silence: every watchdog trips (3 x 0.1 s)
    send(MessageKind.COMMAND, 0, {"Command": int(Command.CLEAR_FAULTS), "TargetNode": 0})
    send(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
    step_to(0.95)
    send(MessageKind.EMERGENCY_STOP, 0, {"Key": ESTOP_KEY})
    step_to(1.0)
    pc.shutdown()
    emu_bus.shutdown()
    assert seen["saturated"] and (seen["at_limit"] or config.sensor == "joint"), seen  # it reached the limits
    return emu, frames


@pytest.mark.parametrize(
    "overrides",
    [{}, {"reference_hold": "linear", "sensor": "joint"}, {"node_ids": (4, 9), "feedback_rate_hz": 0.0}],
    ids=["gear-zoh", "joint-linear", "two-modules-no-feedback"],
)
def test_compiled_ticks_equal_the_reference_path_bit_for_bit(overrides):
    config = EmulatorConfig(**overrides)
    fast, fast_frames = _scenario(config, use_reference=False)
    reference, reference_frames = _scenario(config, use_reference=True)
    assert fast.tick == reference.tick == 1000
    assert fast_frames == reference_frames and len(fast_frames) > (20 if config.feedback_rate_hz else 1)
    assert fast.watchdog_trips.sum() == config.n_modules  # the scenario reached its events
    for name in STATE:
        np.testing.assert_array_equal(getattr(fast, name), getattr(reference, name), err_msg=name)
    for name in ("gear_angle_rad", "gear_rate_rad_s", "voltage_v", "brake", "current_limited"):
        np.testing.assert_array_equal(getattr(fast.drive, name), getattr(reference.drive, name), err_msg=name)
    np.testing.assert_array_equal(fast.controller.rate_estimate_rad_s, reference.controller.rate_estimate_rad_s)
    np.testing.assert_array_equal(fast.plant.joint_state()[0], reference.plant.joint_state()[0])
    np.testing.assert_array_equal(fast.plant.joint_state()[1], reference.plant.joint_state()[1])


class _RecordingPlant(IndependentInertiaPlant):
    def advance(self, torques_nm, dt_s):
        super().advance(torques_nm, dt_s)


class _ReadingPlant(IndependentInertiaPlant):
    def joint_state(self):
        return super().joint_state()


def test_a_plant_that_overrides_its_substeps_is_stepped_through_them():
    assert compiled_runner(IndependentInertiaPlant(2)) is not None
    assert compiled_runner(_RecordingPlant(2)) is None
    assert compiled_runner(_ReadingPlant(2)) is None
