"""Activation writes every parameter of the run and reads each back (issue 26): a stray write to a disabled module
never drives the next run; a module that refuses, keeps another value or stays silent is named and not enabled.
And the names a person types for ``aiko can params``."""

from __future__ import annotations

from pathlib import Path

import can
import pytest

from aiko.core.clock import SimulatedClock
from aiko.core.errors import HardwareError
from aiko.core.loop import PeriodicTask
from aiko.core.recording import MemoryRecorder
from aiko.devices.can.parameters import (
    ATTEMPTS,
    BusParameterLink,
    exchange,
    parse_parameter,
    read_parameters,
    same_value,
    write_parameters,
)
from aiko.robots.aiko.backends.hil import HilBackend
from aiko.robots.aiko.experiment import load_experiment, run_context
from aiko.robots.aiko.run import RunOptions, run_experiment
from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import Command, MessageKind, ModuleState, Parameter, ParameterResult

REPO = Path(__file__).resolve().parents[4]
SIDEWINDING = REPO / "experiments" / "sidewinding.toml"
CODEC = default_codec()


def _hil(overrides=None) -> HilBackend:
    experiment = load_experiment(SIDEWINDING, overrides or {})
    backend = HilBackend()
    backend.configure(run_context(experiment, MemoryRecorder(), SimulatedClock()))
    return backend


def _third_party_writes(backend: HilBackend, node: int, parameter: Parameter, value: float) -> None:
    """Someone else on the bus (a script, a stray frame) writes a parameter; the module is disabled, so it takes it."""
    intruder = can.Bus(interface="virtual", channel=backend.bus.channel_id)
    try:
        frame_id, data = CODEC.encode(
            MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": 1, "Value": value}
        )
        intruder.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
    finally:
        intruder.shutdown()
    backend.emulator.step_to(backend.emulator.time_s + 0.01)


class StrayWritesBeforeTheRun(HilBackend):
    """The run's own backend; between its configuration and its activation, someone else writes KdH = 500 to
    module 3 and KpV = 5000 to module 7, which are disabled and so take them."""

    def activate(self) -> None:
        _third_party_writes(self, 3, Parameter.KD_H, 500.0)
        _third_party_writes(self, 7, Parameter.KP_V, 5000.0)
        self.stray_taken = (self.emulator.controller.kd[2, 0], self.emulator.controller.kp[6, 1])
        super().activate()


def test_a_stray_gain_written_to_a_disabled_module_never_drives_the_next_run():
    backend = StrayWritesBeforeTheRun()
    seen = []

    def gains_while_running(t_s: float) -> None:
        emulator = backend.emulator
        seen.append((emulator.controller.kd[2, 0], emulator.controller.kp[6, 1], emulator.state[2]))

    run_experiment(
        load_experiment(SIDEWINDING),
        MemoryRecorder(),
        RunOptions(backend="hil", duration_s=0.5),
        backend=backend,
        extra_tasks=[PeriodicTask("spy", 10.0, gains_while_running)],
    )
    assert backend.stray_taken == (500.0, 5000.0)
    assert len(seen) == 6 and all(kd == 6.0 and kp == 400.0 and st == ModuleState.ENABLED for kd, kp, st in seen)
    writes = backend.emulator.counters()["parameter_writes_accepted"]
    assert writes == [9, 9, 10, 9, 9, 9, 10, 9, 9, 9]  # the run's nine each (after the stray one on 3 and 7)


def test_a_module_that_does_not_keep_a_written_value_is_named_and_nothing_is_enabled():
    """A module that answers the write Ok but keeps another value (the read-back is a request of its own)."""
    backend = _hil()
    emulator = backend.emulator
    _third_party_writes(backend, 4, Parameter.KD_H, 500.0)
    # patched on the modules (the Python model behind the bus transport), where the modules' own code calls it
    write = emulator.modules._write_parameter

    def keeps_kd_h_on_module_4(row: int, parameter: Parameter, value: float) -> None:
        if not (row == 3 and parameter is Parameter.KD_H):
            write(row, parameter, value)

    emulator.modules._write_parameter = keeps_kd_h_on_module_4
    try:
        with pytest.raises(HardwareError, match=r"joint module 4 holds KdH = 500 after 6 was written.*nothing was"):
            backend.activate()
        assert list(emulator.state) == [ModuleState.DISABLED] * 10
    finally:
        backend.close()


def test_a_refused_write_is_named_with_what_the_module_said():
    backend = _hil()
    emulator = backend.emulator
    on_parameter = emulator.modules._on_parameter  # patched on the modules, where their own code calls it

    def module_9_refuses_kp_v(row: int, msg: can.Message) -> None:
        values = CODEC.decode(msg.arbitration_id, bytes(msg.data)).values
        if row == 8 and int(values["Index"]) == Parameter.KP_V and values["Write"]:
            emulator._reply_parameter(row, int(Parameter.KP_V), ParameterResult.OUT_OF_RANGE, 1.0)
            return
        on_parameter(row, msg)

    emulator.modules._on_parameter = module_9_refuses_kp_v
    try:
        with pytest.raises(HardwareError, match=r"joint module 9 refused KpV = 400: OutOfRange"):
            backend.activate()
        assert list(emulator.state) == [ModuleState.DISABLED] * 10
    finally:
        backend.close()


def test_the_watchdog_pair_is_rewritten_whatever_order_a_stray_pair_needs():
    """WatchdogPeriods x ReferencePeriodMs is checked against the partner's current value: after a stray
    (1 period, 1000 ms), writing 3 periods first is refused (3000 ms), so it is written again after 100 ms."""
    backend = _hil()
    _third_party_writes(backend, 1, Parameter.WATCHDOG_PERIODS, 1.0)
    _third_party_writes(backend, 1, Parameter.REFERENCE_PERIOD_MS, 1000.0)
    try:
        backend.activate()
        emulator = backend.emulator
        assert emulator.watchdog_periods[0] == 3.0 and emulator.reference_period_s[0] == pytest.approx(0.1)
        assert emulator.counters()["rejected"]["out_of_range"][0] == 1  # the first try, refused
    finally:
        backend.close()


def test_the_modules_get_the_robot_descriptions_gains_and_feedback_rate(tmp_path):
    robot = (REPO / "experiments" / "robots" / "aiko.toml").read_text()
    robot = robot.replace("kd_v_v_s_per_rad = 6.0", "kd_v_v_s_per_rad = 7.25").replace(
        "feedback_rate_hz = 100.0", "feedback_rate_hz = 50.0"
    )
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / "aiko.toml").write_text(robot)
    (tmp_path / "run.toml").write_text(SIDEWINDING.read_text())
    backend = HilBackend()
    backend.configure(run_context(load_experiment(tmp_path / "run.toml"), MemoryRecorder(), SimulatedClock()))
    try:
        backend.activate()
        assert (backend.emulator.controller.kd[:, 1] == 7.25).all()
        assert (backend.emulator.feedback_rate_hz == 50.0).all()
    finally:
        backend.close()


class LockstepLink(BusParameterLink):
    """``aiko can params``' link, its waiting stepping an in-process emulator instead of the wall clock."""

    def __init__(self, bus, nodes, emulator) -> None:
        super().__init__(bus, nodes)
        self.emulator = emulator

    def wait(self, dt_s: float) -> None:
        self.emulator.step_to(self.emulator.time_s + dt_s)
        super().wait(0.0)


def test_a_write_to_an_enabled_module_is_refused_locked_and_nothing_changes():
    from firmware_protocol.emulator import EmulatorConfig, JointControllerEmulator

    channel = "test-params-locked"
    tool = can.Bus(interface="virtual", channel=channel)
    config = EmulatorConfig(node_ids=(1, 2), watchdog_periods=20)  # enabled for 2 s without references
    emulator = JointControllerEmulator(can.Bus(interface="virtual", channel=channel), config)
    try:
        frame_id, data = CODEC.encode(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 1})
        tool.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
        emulator.step_to(0.01)
        link = LockstepLink(tool, (1, 2), emulator)
        outcomes = write_parameters(link, [1, 2], {Parameter.KD_H: 9.0}, timeout_s=0.2)
        read = read_parameters(link, [1], [Parameter.KD_H, Parameter.FREE_PLAY_DEG], timeout_s=0.2)
    finally:
        tool.shutdown()
        emulator.bus.shutdown()
    locked, taken = outcomes
    assert locked.result == ParameterResult.LOCKED and not locked.ok
    assert locked.describe() == (
        "joint module 1 refused KdH = 9: Locked (it is enabled: parameters change only while a module is disabled)"
    )
    assert taken.ok and taken.value == 9.0 and emulator.controller.kd[:, 0].tolist() == [6.0, 9.0]
    assert [(o.parameter, o.value) for o in read] == [(Parameter.KD_H, 6.0), (Parameter.FREE_PLAY_DEG, 4.0)]


@pytest.mark.parametrize(
    "text, parameter",
    [("KdH", Parameter.KD_H), ("kdh", Parameter.KD_H), ("KD_H", Parameter.KD_H), ("2", Parameter.KD_H),
     ("WatchdogPeriods", Parameter.WATCHDOG_PERIODS), ("reference_period_ms", Parameter.REFERENCE_PERIOD_MS),
     ("12", Parameter.FREE_PLAY_DEG)],
)  # fmt: skip
def test_parameters_by_the_names_a_person_types(text, parameter):
    assert parse_parameter(text) is parameter


@pytest.mark.parametrize("text", ["Ki", "13", "0", ""])
def test_an_unknown_parameter_name_says_which_exist(text):
    with pytest.raises(ValueError, match="the modules have KpH, KdH"):
        parse_parameter(text)


def test_a_value_read_back_matches_within_the_wires_precision():
    assert same_value(45.00000000000001, 45.0) and same_value(6.0, 6.004) and same_value(0.0, 0.0)
    assert not same_value(6.0, 500.0) and not same_value(400.0, 5000.0) and not same_value(6.0, 6.1)


class LossyLink:
    """A ParameterLink whose modules answer a request only from its ``answer_from``-th sending on (earlier
    replies lost on the way, or held up past the timeout); node 9 never answers."""

    def __init__(self, answer_from: int) -> None:
        self.answer_from = answer_from
        self.sent: dict[tuple[int, Parameter], int] = {}
        self.replies: dict[tuple[int, Parameter], tuple[int, float]] = {}

    def request_parameter(self, node, parameter, value=None):
        key = (node, parameter)
        self.sent[key] = self.sent.get(key, 0) + 1
        self.replies.pop(key, None)
        if node != 9 and self.sent[key] >= self.answer_from:
            self.replies[key] = (int(ParameterResult.OK), 6.0 if value is None else value)

    def parameter_reply(self, node, parameter):
        return self.replies.get((node, parameter))


def test_a_reply_lost_or_late_is_asked_for_again_before_a_module_is_called_silent():
    link = LossyLink(answer_from=ATTEMPTS)
    waits: list[float] = []
    replies, silent = exchange(link, [(1, Parameter.KD_H, None), (2, Parameter.KD_H, 7.0)], waits.append, 0.05)
    assert silent == [] and replies[(2, Parameter.KD_H)] == (int(ParameterResult.OK), 7.0)
    assert link.sent == {(1, Parameter.KD_H): ATTEMPTS, (2, Parameter.KD_H): ATTEMPTS}


def test_a_module_silent_through_every_attempt_is_named_and_the_others_are_not_asked_again():
    link = LossyLink(answer_from=1)
    waits: list[float] = []
    replies, silent = exchange(link, [(1, Parameter.KD_H, None), (9, Parameter.KD_H, None)], waits.append, 0.05)
    assert silent == [9] and (1, Parameter.KD_H) in replies
    assert link.sent == {(1, Parameter.KD_H): 1, (9, Parameter.KD_H): ATTEMPTS}
    assert sum(waits) >= ATTEMPTS * 0.05 - 1e-9  # each attempt waited its whole timeout
