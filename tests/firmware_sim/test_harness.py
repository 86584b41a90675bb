"""The AVR simulator harness (firmware_sim/) under the firmware: its plant is the emulator's, its bus behaves as CAN
does, the AVR's own watchdog resets a stuck module, and a module that boots sends what the protocol says."""

import itertools
import math

import can
import numpy as np
import pytest

from firmware_protocol.bus_load import exact_frame_bits
from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import Command, MessageKind, ModuleState
from firmware_protocol.emulator import EmulatorConfig, IndependentInertiaPlant
from firmware_protocol.emulator.drive import drive_substep
from firmware_protocol.emulator.transport import BusTransport
from tests.firmware_build import require_firmware

CODEC = default_codec()
_channels = itertools.count()
R_TCCR0 = 0x53  # ATmega128 Timer0 control register (data space): 0 stops the 1 kHz tick


@pytest.fixture
def firmware():
    require_firmware()
    from firmware_protocol.emulator.firmware import FirmwareModules

    made = []

    def make(config, plant=None, **kw):
        channel = f"test-harness-{next(_channels)}"
        pc = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        transport = BusTransport(bus, FirmwareModules(config, plant, **kw))
        made.append((transport, pc, bus))
        return transport, pc

    yield make
    for transport, pc, bus in made:
        transport.close()
        pc.shutdown()
        bus.shutdown()


def _send(pc, kind, node, values):
    frame_id, data = CODEC.encode(kind, node, values)
    pc.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))


def test_the_harness_plant_is_the_emulators_drive_and_inertia(firmware):
    """Braked modules (never enabled): the drives short-brake a gear spinning into the free play's contact and the
    joints bounce off their stops; the harness's plant (plant.c) against drive.drive_substep + plant.advance."""
    n = 2
    initial = np.array([[0.3, -0.2], [1.5, 0.1]])
    spin = np.array([[2.0, -3.0], [5.0, 0.5]])  # rad/s: the joints swing against the braked gears and the stops
    config = EmulatorConfig(node_ids=(1, 2))
    plant = IndependentInertiaPlant(n, None, initial)
    plant.rates_rad_s[...] = spin
    transport, _ = firmware(config, plant)
    modules = transport.modules
    assert modules.plant_in_harness
    reference = IndependentInertiaPlant(n, None, initial)  # the same start (the harness gets it after power-up)
    reference.rates_rad_s[...] = spin
    drive = modules.drive
    from firmware_protocol.emulator.drive import new_drive_state

    python_drive = new_drive_state(n)
    python_drive.gear_angle_rad[...] = drive.gear_angle_rad
    python_drive.brake[...] = True
    transport.step_to(0.5)
    for _ in range(2000):  # 0.5 s of 0.25 ms sub-steps
        torques = drive_substep(config.drive, python_drive, reference.angles_rad, reference.rates_rad_s, 0.25e-3)
        reference.advance(torques, 0.25e-3)
    np.testing.assert_allclose(drive.gear_angle_rad, python_drive.gear_angle_rad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(plant.angles_rad, reference.angles_rad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(plant.rates_rad_s, reference.rates_rad_s, rtol=1e-9, atol=1e-12)


def test_the_harness_plant_and_the_pipe_give_the_same_closed_loop(firmware):
    """The firmware tracking a step with the plant in the harness and with the plant stepped through the pipe: the
    encoder sees the same motion (predicted per sub-step there, per period here), so the joints agree within a
    few encoder counts along the way and to one count at rest."""
    runs = []
    for in_harness in (True, False):
        transport, pc = firmware(EmulatorConfig(node_ids=(1,)), plant_in_harness=in_harness)
        _send(pc, MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
        angles = []
        for k in range(8):
            _send(pc, MessageKind.REFERENCE, 1, dict(AngleH=12.0, AngleV=-6.0, RateH=0.0, RateV=0.0, Sequence=k))
            for _ in range(10):
                transport.step_to(transport.time_s + 0.01)
                angles.append(np.degrees(transport.modules.drive.gear_angle_rad[0]).copy())
        runs.append(np.array(angles))
    count_deg = 0.036
    assert np.abs(runs[0] - runs[1]).max() < 5 * count_deg
    np.testing.assert_allclose(runs[0][-1], runs[1][-1], atol=1.5 * count_deg)
    np.testing.assert_allclose(runs[0][-1], [12.0, -6.0], atol=0.08)


def test_frames_arbitrate_by_identifier_and_take_their_length_on_the_wire(firmware):
    """Ten modules send their feedback in the same tick: the bus delivers them one at a time, lowest id first,
    each frame ending its length in bits (with stuffing, and the interframe space) after the one before."""
    transport, pc = firmware(EmulatorConfig())
    transport.step_to(0.05)
    frames = []
    while (msg := pc.recv(timeout=0)) is not None:
        frames.append(msg)
    feedback = [m for m in frames if 0x200 < m.arbitration_id <= 0x20A or 0x280 < m.arbitration_id <= 0x28A]
    burst = feedback[:20]  # the first feedback tick: 10 JointFeedback and 10 JointRates
    assert [m.arbitration_id for m in burst] == sorted(m.arbitration_id for m in burst)
    for before, after in itertools.pairwise(burst):
        bits = exact_frame_bits(after.arbitration_id, bytes(after.data))  # incl. the 3-bit interframe space
        assert after.timestamp - before.timestamp == pytest.approx(bits * 1e-6, abs=1e-9)


def test_the_avrs_own_watchdog_resets_a_module_whose_tick_stopped(firmware):
    """Fault injection: module 2's tick timer is stopped (as a corrupted register would). Its main loop then never
    resets the hardware watchdog: ~30 ms later the AVR resets, the drive brakes, and the module boots again with
    its stored settings, DISABLED; module 1 is unaffected."""
    transport, pc = firmware(EmulatorConfig(node_ids=(1, 2)))
    modules = transport.modules
    _send(pc, MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
    _send(pc, MessageKind.REFERENCE, 2, dict(AngleH=5.0, AngleV=0.0, RateH=0.0, RateV=0.0, Sequence=0))
    transport.step_to(0.02)
    assert modules.state.tolist() == [ModuleState.ENABLED] * 2
    modules.harness.poke(1, R_TCCR0, 0)
    transport.step_to(0.1)
    boards = modules.read_boards()
    assert modules.resets.tolist() == [0, 1]
    assert boards[1]["reset_cause"] & 0x08 and not boards[0]["reset_cause"] & 0x08  # WDRF: the watchdog did it
    assert modules.state.tolist() == [ModuleState.ENABLED, ModuleState.DISABLED]
    assert modules.brake[1].all()
    heartbeats = []
    transport.step_to(1.2)
    while (msg := pc.recv(timeout=0)) is not None:
        if msg.arbitration_id == CODEC.frame_id(MessageKind.HEARTBEAT, 2):
            heartbeats.append(CODEC.decode(msg.arbitration_id, msg.data).values)
    assert heartbeats and heartbeats[-1]["Uptime"] <= 1  # it counts from the reset again


def test_a_module_with_a_blank_eeprom_stays_off_the_bus():
    """A module that has no identity (no valid EEPROM) never joins the bus: the harness reports it, one line."""
    require_firmware()
    from firmware_protocol.emulator import firmware as firmware_module
    from firmware_protocol.emulator.config import EmulatorConfigError

    original = firmware_module.eeprom_image
    firmware_module.eeprom_image = lambda node, config: b"\xff" * 53  # an erased EEPROM
    try:
        with pytest.raises(EmulatorConfigError, match=r"module\(s\) \[1\] did not start"):
            firmware_module.FirmwareModules(EmulatorConfig(node_ids=(1,)))
    finally:
        firmware_module.eeprom_image = original


def test_the_stepping_interface_refuses_what_it_cannot_do(firmware):
    from firmware_protocol.emulator.harness_client import HarnessError

    transport, _ = firmware(EmulatorConfig(node_ids=(1,)))
    harness = transport.modules.harness
    with pytest.raises(HarnessError, match="only I/O registers"):
        harness.poke(0, 0x200, 1)
    with pytest.raises(HarnessError, match="time must go forward"):
        harness.run(harness.cycle, [])
    assert math.isfinite(transport.modules.time_s)  # the session stays usable
    transport.step_to(0.01)


def test_the_harness_runs_apart_and_takes_the_callers_real_time_priority(firmware):
    """The harness is its own session (a terminal's Ctrl-C reaches only the Python side, which ends it after
    reading the modules' last state) and takes SCHED_FIFO when the caller has it (`--rt-priority`, a real-time HIL
    run): the ten simulated cores must not wait behind other processes."""
    import os

    transport, _ = firmware(EmulatorConfig(node_ids=(1,)))
    harness = transport.modules.harness
    pid = harness._process.pid
    assert os.getsid(pid) == pid != os.getsid(0)
    try:
        harness.set_realtime_priority(1)
    except PermissionError as exc:
        pytest.skip(f"SCHED_FIFO not allowed here: {exc}")
    assert os.sched_getscheduler(pid) == os.SCHED_FIFO and os.sched_getparam(pid).sched_priority == 1
    transport.step_to(0.01)  # still serving
    os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
