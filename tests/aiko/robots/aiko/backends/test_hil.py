"""The CAN driver against emulated joint modules: frame logs, watchdog, e-stop, bad traffic, exit paths."""

import math
import time
from pathlib import Path

import can
import cantools
import numpy as np
import pytest

import sim.snake3d.plant  # noqa: F401  (the hil backend's "snake3d" plant; a broken import must fail, not skip)
from aiko.core.clock import SimulatedClock, WallClock
from aiko.core.errors import ConfigError, HardwareError
from aiko.core.recording import MemoryRecorder
from aiko.devices.can.shaping import ReferenceShaper
from aiko.robots.aiko.backends.hil import HilBackend
from aiko.robots.aiko.control_loop import ControlLoop
from aiko.robots.aiko.experiment import load_experiment, run_context
from aiko.robots.aiko.joints import JointStatus
from aiko.robots.aiko.run import RunOptions, run_experiment
from firmware_protocol.dbc import DBC_PATH, ModuleState

REPO = Path(__file__).resolve().parents[5]
SIDEWINDING = REPO / "experiments" / "sidewinding.toml"


@pytest.fixture(scope="module")
def experiment():
    return load_experiment(SIDEWINDING)


def _configured_hil(experiment, clock=None, *, overrides=None, realtime=False, duration_s=None, modules="python"):
    """A configured HIL backend; ``overrides`` (dotted keys, as ``--set``) reload the experiment with them;
    ``modules``: the `modules` fixture's kind (hil.modules)."""
    if modules != "python":
        overrides = {**(overrides or {}), "hil.modules": modules}
    if overrides:
        experiment = load_experiment(experiment.path, {**experiment.overrides, **overrides})
    backend = HilBackend()
    recorder = MemoryRecorder()
    clock = clock or SimulatedClock()
    ctx = run_context(experiment, recorder, clock, duration_s=duration_s, realtime=realtime)
    backend.configure(ctx)
    return backend, recorder, clock


# ------------------------------------------------------------------------------------- shaping
def test_shaper_clamps_to_limits_and_limits_slew():
    shaper = ReferenceShaper(math.radians(45), math.radians(30), slew_limit_rad_s=math.radians(100))
    shaper.reset(np.zeros((2, 2)), 0.0)
    angle = np.radians([[60.0, -5.0], [3.0, 2.0]])
    out = shaper.shape(0.1, angle, np.ones((2, 2)))
    np.testing.assert_allclose(np.degrees(out.angle_rad), [[10.0, -5.0], [3.0, 2.0]])  # 100 deg/s * 0.1 s
    assert out.clamped.tolist() == [[True, False], [False, False]]
    assert out.slew_limited.tolist() == [[True, False], [False, False]]
    assert out.rate_rad_s[0, 0] == 0.0 and out.rate_rad_s[1, 1] == 1.0  # no feed-forward while shaped
    for k in range(2, 8):
        out = shaper.shape(0.1 * k, angle, np.zeros((2, 2)))
    assert math.degrees(out.angle_rad[0, 0]) == pytest.approx(45.0)  # reaches the limit, never beyond


# ------------------------------------------------------------------------------------- frame logs
@pytest.mark.parametrize("suffix", [".asc", ".blf", ".log"])
def test_can_log_of_a_hil_run_holds_the_gaits_references_at_the_rate(tmp_path, experiment, suffix):
    path = tmp_path / f"run{suffix}"
    duration_s, rate_hz = 2.0, experiment.run.reference_rate_hz
    _, summary = run_experiment(
        load_experiment(SIDEWINDING, {"can.log": str(path)}),
        MemoryRecorder(),
        RunOptions(backend="hil", duration_s=duration_s),
    )
    assert summary["can_log_path"] == str(path) and summary["hil_mode"] == "lockstep"
    db = cantools.database.load_file(str(DBC_PATH))
    references: dict[int, list[tuple[float, dict]]] = {}
    other_frames = 0
    for msg in can.LogReader(str(path)):
        if msg.is_error_frame:
            continue
        message = db.get_message_by_frame_id(msg.arbitration_id)
        if message.name.startswith("JointReference_"):
            node = int(message.name[-2:])
            references.setdefault(node, []).append((msg.timestamp, message.decode(bytes(msg.data))))
        else:
            other_frames += 1
    assert sorted(references) == list(range(1, 11))
    assert other_frames > 1000  # feedback, rates, heartbeats, commands, parameters: every frame is logged
    expected_count = int(duration_s * rate_hz) + 1
    gait = experiment.gait
    for node, frames in references.items():
        assert len(frames) == expected_count
        stamps = np.array([t for t, _ in frames])
        np.testing.assert_allclose(np.diff(stamps), 1.0 / rate_hz, atol=2e-6)  # lockstep: exact k / rate
        for k, (_, values) in enumerate(frames):
            refs = gait.references(k / rate_hz)
            assert values["AngleH"] == pytest.approx(math.degrees(refs.angle_h_rad[node - 1]), abs=0.005)
            assert values["AngleV"] == pytest.approx(math.degrees(refs.angle_v_rad[node - 1]), abs=0.005)
            assert values["RateH"] == pytest.approx(math.degrees(refs.rate_h_rad_s[node - 1]), abs=0.125)
            assert values["Sequence"] == (k + 1) % 256  # the driver starts at 1


def test_unsupported_can_log_extension_is_a_config_error(tmp_path, experiment):
    with pytest.raises(ConfigError, match=r"unsupported extension .txt; use one of .asc, .blf"):
        _configured_hil(experiment, overrides={"can.log": str(tmp_path / "x.txt")})


# ------------------------------------------------------------------------------------- lockstep run
def test_hil_run_tracks_the_gait_and_leaves_modules_disabled(experiment, modules):
    experiment = load_experiment(experiment.path, {"hil.modules": modules})
    recorder = MemoryRecorder()
    backend = HilBackend()
    result, summary = run_experiment(experiment, recorder, RunOptions(duration_s=3.0), backend=backend)
    assert summary["hil_modules"] == modules
    assert summary["emulator"]["rejected_total"] == 0 and summary["can_bad_frames"] == 0
    assert summary["emulator"]["accepted_references"] == [31] * 10
    feedback = recorder.channels["/joint_feedback"]
    last = feedback[-1][1]
    assert all(s & JointStatus.ENABLED for s in last["status"])
    refs = experiment.gait.references(3.0)
    # one reference period of ZOH lag (<= 56 deg/s * 0.1 s) plus free play (2 deg): within 8 deg
    error = np.degrees(np.abs(np.array(last["angle_h_rad"]) - refs.angle_h_rad))
    assert error.max() < 8.0
    assert backend.emulator.counters()["state"] == ["DISABLED"] * 10  # deactivate reached every module


def test_lockstep_hil_is_deterministic(experiment, modules):
    experiment = load_experiment(experiment.path, {"hil.modules": modules})
    runs = []
    for _ in range(2):
        recorder = MemoryRecorder()
        run_experiment(experiment, recorder, RunOptions(backend="hil", duration_s=1.0))
        runs.append([p["angle_h_rad"] for _, p in recorder.channels["/joint_feedback"]])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_exception_or_ctrl_c_in_the_loop_disables_the_modules(experiment, error):
    class FailingGait:
        def __init__(self, gait):
            self.gait = gait

        def references(self, t_s, feedback=None):
            if t_s >= 0.5:
                raise error("gait blew up")
            return self.gait.references(t_s, feedback)

        def initial_posture(self):
            return self.gait.initial_posture()

    backend, recorder, clock = _configured_hil(experiment)
    loop = ControlLoop(
        FailingGait(experiment.gait), backend, recorder, clock, reference_rate_hz=10.0, feedback_rate_hz=100.0
    )
    if error is KeyboardInterrupt:
        assert loop.run(2.0).interrupted  # the loop turns Ctrl-C into an orderly stop
    else:
        with pytest.raises(RuntimeError, match="gait blew up"):
            loop.run(2.0)
    try:
        assert (backend.emulator.state == ModuleState.DISABLED).all()
        backend.deactivate()  # twice is fine
    finally:
        backend.close()
    backend.close()  # and closing twice too


def test_watchdog_when_the_pc_goes_silent_is_reported_and_the_driver_keeps_running(experiment, modules):
    backend, recorder, clock = _configured_hil(experiment, modules=modules)
    try:
        backend.activate()
        for k in range(11):
            t = k / 10
            clock.sleep_until(t)
            backend.advance_to(t)
            backend.write(experiment.gait.references(t))
        for k in range(1, 60):  # PC keeps reading but stops writing
            t = 1.0 + k / 100
            clock.sleep_until(t)
            backend.advance_to(t)
            feedback = backend.read()
        assert all(s & JointStatus.WATCHDOG and not s & JointStatus.ENABLED for s in feedback.status)
        kinds = [(kind, fields["node"]) for _, kind, fields in recorder.events if kind == "module_watchdog"]
        assert sorted(node for _, node in kinds) == list(range(1, 11))
        counters = backend.emulator.counters()  # on each module's own clock (the firmware's runs from power-up)
        for last, trip in zip(counters["last_valid_reference_s"], counters["watchdog_trip_s"], strict=True):
            assert 0.3 < trip - last <= 0.3 + backend.emulator.dt_s + 1e-9
    finally:
        backend.close()


def test_emergency_stop_through_the_backend(experiment, modules):
    backend, recorder, clock = _configured_hil(experiment, modules=modules)
    try:
        backend.activate()
        clock.sleep_until(0.2)
        backend.advance_to(0.2)
        backend.write(experiment.gait.references(0.2))
        backend.emergency_stop()  # the firmware hears it from its bus: the backend lets it act before it returns
        assert backend.emulator.counters()["state"] == ["ESTOP"] * 10
        assert not backend.emulator.modules.drive.voltage_v.any()
        # the next feedback: within a feedback period (10 ms) and the bus's queue of 20 frames (2.6 ms; the
        # firmware's feedback has its own phase and waits for the bus, the Python modules' comes at 0.21 s)
        clock.sleep_until(0.215)
        backend.advance_to(0.215)
        assert all(s & JointStatus.FAULT and not s & JointStatus.ENABLED for s in backend.read().status)
    finally:
        backend.close()


def test_driver_warns_on_bad_traffic_and_keeps_running(experiment, caplog, modules):
    backend, recorder, clock = _configured_hil(experiment, modules=modules)
    try:
        backend.activate()
        intruder = can.Bus(interface="virtual", channel=backend.bus.channel_id)
        try:
            intruder.send(can.Message(arbitration_id=0x7F0, data=bytes(8), is_extended_id=False))  # unknown id
            intruder.send(can.Message(arbitration_id=0x203, data=bytes(3), is_extended_id=False))  # short feedback
            for k in range(1, 6):
                clock.sleep_until(k / 10)
                backend.advance_to(k / 10)
                backend.write(experiment.gait.references(k / 10))
        finally:
            intruder.shutdown()
        assert backend.driver.bad_frames == 2
        assert "ignoring bad frame" in caplog.text and "0x7F0" in caplog.text
        assert all(s & JointStatus.ENABLED for s in backend.read().status)  # still streaming, still healthy
        # the Python modules saw and rejected it too; the firmware's CAN controller filters it out before it counts
        assert backend.emulator.counters()["unknown_id_frames"] == (1 if modules == "python" else 0)
    finally:
        backend.close()


# ------------------------------------------------------------------------------------- real time
def test_realtime_hil_streams_without_losing_frames():
    """On the wall clock, every reference the loop writes reaches every module once and in order: none is lost,
    duplicated or rejected.

    What the code guarantees, and so what is asserted, on any machine: the loop runs every deadline of 0.0 … 1.0 s
    once, late if it must, except those a stall superseded (a newer one ran instead; each counted in the run's
    task timing); the driver sends each as one frame per module with a sequence number one higher; the virtual bus
    is a FIFO that never drops. So once the emulator has handled every frame the driver sent, each module has
    counted each reference sent exactly once, as accepted or, if its watchdog tripped, as ignored while disabled;
    with a 2 s watchdog (20 periods) a trip needs the PC starved for 2 s, which a loaded 2-core machine can do, so
    a trip is allowed but must account for every reference it made the module ignore. Not asserted: how soon the
    emulator thread handles the frames (the wait below only ends a hung run)."""
    experiment = load_experiment(SIDEWINDING, {"can.watchdog_periods": 20, "can.feedback_timeout_s": 10.0})
    backend, recorder, clock = _configured_hil(experiment, WallClock(), duration_s=1.0, realtime=True)
    try:
        loop = ControlLoop(experiment.gait, backend, recorder, clock, reference_rate_hz=10.0, feedback_rate_hz=100.0)
        result = loop.run(1.0)  # deactivates (DISABLE) on the way out
        emulator, driver = backend.emulator, backend.driver
        give_up = time.monotonic() + 60.0  # liveness only
        while emulator.frames_received < driver.frames_sent and time.monotonic() < give_up:
            time.sleep(0.01)
        assert emulator.frames_received >= driver.frames_sent, "the emulator never handled the frames sent"
        summary = backend.summary()
    finally:
        backend.close()
    assert summary["hil_mode"] == "realtime"
    sent = result.reference_updates
    assert sent + result.task_timing["references"]["missed"] == 11  # t = 0.0, 0.1, …, 1.0 s: each ran or counted
    counters = summary["emulator"]
    assert summary["can_send_errors"] == 0 and counters["rejected_total"] == 0  # no stale, duplicate or bad frame
    for node in range(10):
        handled = counters["accepted_references"][node] + counters["ignored_while_disabled"][node]
        assert handled == sent, f"module {node + 1}: {handled} of {sent} references handled"
        if counters["watchdog_trips"][node] == 0:
            assert counters["accepted_references"][node] == sent
            assert recorder.channels["/joint_feedback"][-1][1]["status"][node] & JointStatus.ENABLED


# ------------------------------------------------------------------------------------- validation
def test_can_and_hil_tables_are_validated(tmp_path):
    text = SIDEWINDING.read_text().replace(
        'robot = "robots/aiko.toml"', f'robot = "{REPO}/experiments/robots/aiko.toml"'
    )
    bad_key = tmp_path / "bad_can.toml"
    bad_key.write_text(text + "\n[can]\nchanel = 'can0'\n")
    with pytest.raises(ConfigError, match=r"can.chanel: unknown key; allowed keys here: .*channel"):
        load_experiment(bad_key)
    bad_plant = tmp_path / "bad_hil.toml"
    bad_plant.write_text(text + "\n[hil]\nplant = 'mujoco'\n")
    with pytest.raises(ConfigError, match=r"hil.plant: 'mujoco' is not one of: inertia"):
        load_experiment(bad_plant)
    for bad in (0.0, 25.0, "2"):
        with pytest.raises(ConfigError, match=r"hil.torque_limit_nm"):
            load_experiment(SIDEWINDING, {"hil.torque_limit_nm": bad})


def test_the_torque_limit_is_the_drives_current_limit_through_the_gear(experiment):
    """hil.torque_limit_nm sets the emulated H-bridge's current limit so that the joint-side limit is the one
    asked for; the modules report it (parameter TORQUE_LIMIT_*) and their motors saturate there."""
    from aiko.robots.aiko.backends.hil import drive_params
    from firmware_protocol.emulator import DriveParams

    default = drive_params(3.0, None)
    assert default == DriveParams(free_play_rad=math.radians(3.0))
    limited = drive_params(3.0, 1.5)
    assert limited.torque_limit_nm == pytest.approx(1.5, rel=1e-12)
    assert limited.current_limit_a == pytest.approx(default.current_limit_a * 1.5 / default.torque_limit_nm)
    backend, _, _ = _configured_hil(experiment, overrides={"hil.torque_limit_nm": 1.5})
    try:
        assert backend.emulator.config.drive.torque_limit_nm == pytest.approx(1.5, rel=1e-12)
    finally:
        backend.close()


def test_can_backend_reports_an_unopenable_bus(experiment):
    from aiko.core.errors import HardwareError
    from aiko.robots.aiko.backends.can import CanBackend

    backend = CanBackend()
    bus = load_experiment(SIDEWINDING, {"can.interface": "slcan", "can.channel": "/nonexistent/tty"})
    ctx = run_context(bus, MemoryRecorder(), WallClock())
    with pytest.raises(HardwareError, match=r"cannot open CAN bus interface='slcan' channel='/nonexistent/tty'"):
        backend.configure(ctx)
    backend.deactivate()
    backend.close()


def test_health_monitor_reports_each_transition_once():
    from aiko.devices.can.health import HealthMonitor

    events = []
    monitor = HealthMonitor((1, 2), stale_after_s=0.5, on_transition=lambda kind, node, f: events.append((kind, node)))
    ok = {"Enabled": 1, "Fault": 0, "Watchdog": 0, "EStop": 0, "AtLimit": 0, "Saturated": 0}
    monitor.on_feedback(1, 0.0, ok)
    monitor.on_feedback(2, 0.0, ok)
    monitor.check(0.4)
    assert events == []
    monitor.on_feedback(2, 0.45, {**ok, "Watchdog": 1, "Enabled": 0})
    monitor.on_feedback(2, 0.46, {**ok, "Watchdog": 1, "Enabled": 0})
    monitor.check(0.6)
    monitor.check(0.7)
    monitor.on_feedback(1, 0.8, ok)
    assert events == [("module_watchdog", 2), ("module_feedback_stale", 1), ("module_feedback_recovered", 1)]
    assert monitor.snapshot(0.8)[1]["watchdog"] is True


def test_hil_drives_the_3d_simulator_through_the_emulated_modules(modules):
    experiment = load_experiment(SIDEWINDING, {"hil.plant": "snake3d", "hil.modules": modules})
    recorder = MemoryRecorder()
    _, summary = run_experiment(experiment, recorder, RunOptions(backend="hil", duration_s=1.0))
    # one sim step per sub-step; the firmware runs 2 ms more to hear the final DISABLE from its bus
    settle_steps = 8 if modules == "firmware" else 0
    assert summary["hil_plant"] == "snake3d" and summary["physics_steps"] == 4000 + settle_steps
    assert summary["emulator"]["accepted_references"] == [11] * 10
    start, end = np.array(summary["tracked_point_start_m"]), np.array(summary["tracked_point_end_m"])
    assert np.all(np.isfinite(end)) and 0.0 < np.linalg.norm(end[:2] - start[:2]) < 0.5  # it moved, plausibly
    last = recorder.channels["/joint_feedback"][-1][1]
    refs = experiment.gait.references(1.0)
    # ZOH lag of one period + free play + compliance on the real multibody load: within 10 deg
    assert np.degrees(np.abs(np.array(last["angle_h_rad"]) - refs.angle_h_rad)).max() < 10.0


def test_hil_with_the_3d_simulator_survives_200_hz_references():
    """Regression: this run stopped at t = 0.096 s (contact iteration did not converge) when the tail, let go by the
    gear free play, landed with free joints. Every accepted step must still meet the contact laws to 1e-5 m/s."""
    experiment = load_experiment(REPO / "experiments" / "sidewinding_hil.toml", {"run.reference_rate_hz": 200.0})
    _, summary = run_experiment(experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=1.0))
    assert summary["hil_plant"] == "snake3d" and summary["physics_steps"] == 4000
    assert summary["emulator"]["accepted_references"] == [201] * 10
    solver = summary["plant_solver"]
    assert solver["sim_steps"] == 4000
    assert 0.0 < solver["contact_residual_max_m_s"] <= 1e-5
    assert np.all(np.isfinite(summary["tracked_point_end_m"]))


def test_hil_rejects_a_physics_step_that_differs_from_the_simulators(tmp_path):
    experiment = load_experiment(SIDEWINDING, {"hil.plant": "snake3d", "hil.controller_rate_hz": 500.0})
    with pytest.raises(ConfigError, match=r"sim.dt_s = 0.00025; use controller_rate_hz = 1000"):
        _configured_hil(experiment)


def test_hil_streams_at_200_hz(modules):
    experiment = load_experiment(SIDEWINDING, {"run.reference_rate_hz": 200.0, "hil.modules": modules})
    _, summary = run_experiment(experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=0.5))
    assert summary["emulator"]["accepted_references"] == [101] * 10  # t = 0 .. 0.5 s every 5 ms
    assert summary["emulator"]["watchdog_trips"] == [0] * 10  # the modules were told the 5 ms period


def test_a_module_that_goes_silent_is_reported_stale(experiment):
    backend, recorder, clock = _configured_hil(experiment)
    try:
        backend.activate()
        backend.emulator.feedback_rate_hz[6] = 0.0  # module 7's transmitter dies once the run is under way
        for k in range(1, 11):
            t = k / 10
            clock.sleep_until(t)
            backend.advance_to(t)
            backend.write(experiment.gait.references(t))
            backend.read()
        stale = [fields["node"] for _, kind, fields in recorder.events if kind == "module_feedback_stale"]
        assert stale == [7]  # after feedback_timeout_s = 0.5 s; the other nine stay healthy
        health = {m["node"]: m for m in backend.driver.health.snapshot(clock.now_s())}
        assert health[7]["stale"] and health[7]["feedback_age_s"] > 0.5
        assert not any(health[n]["stale"] for n in health if n != 7)
    finally:
        backend.close()


def test_a_module_silent_before_enable_fails_activation_in_lockstep_as_on_hardware(experiment, modules):
    """Lockstep HIL runs the CAN backend's own activation: a module that sends no status (here: module 7 answers
    its parameters but its feedback never goes out) is named, and nothing is enabled. Its feedback frames are
    dropped where the modules hand them to the bus, so that the same cut works for the Python model and the
    firmware (a parameter write of FeedbackRateHz = 0 no longer silences it: the run writes every parameter)."""
    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import MessageKind

    backend, _, _ = _configured_hil(experiment, modules=modules)
    try:
        scheme, modules_set = default_codec().scheme, backend.emulator.modules
        emit = modules_set.emit

        def emit_but_module_7s_feedback(frame_id: int, data: bytes, time_s: float) -> None:
            if scheme.classify(frame_id) != (MessageKind.FEEDBACK, 7):
                emit(frame_id, data, time_s)

        modules_set.emit = emit_but_module_7s_feedback
        with pytest.raises(
            HardwareError, match=r"joint modules \[7\] sent no status within 1.0 s; nothing was enabled"
        ):
            backend.activate()
        assert backend.emulator.counters()["state"] == ["DISABLED"] * 10
    finally:
        backend.close()


def test_streaming_asks_for_realtime_priority_on_the_wall_clock_only(experiment):
    """SCHED_FIFO is what keeps the 10 Hz jitter under 1 ms on a loaded PC; a lockstep run computes flat out, and a
    FIFO thread doing that would starve the machine, so it must never ask for it."""
    from aiko.robots.aiko.backends.can_priority import WALL_CLOCK_REALTIME_PRIORITY

    cases = [
        ({}, None, 0),
        ({}, WallClock(), WALL_CLOCK_REALTIME_PRIORITY),
        ({"can.realtime_priority": 0}, WallClock(), 0),
    ]
    for options, clock, expected in cases:
        backend, _, _ = _configured_hil(experiment, clock, overrides=options)
        try:
            assert backend.realtime_priority == expected, (options, clock)
        finally:
            backend.deactivate()
            backend.close()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"can.slew_limit_deg_s": 10.0}, "the gait moves its joints at up to 41.89 deg/s"),
        ({"can.watchdog_periods": 100.0}, "is a 10000 ms watchdog; the modules accept 10..2000 ms"),
    ],
)
def test_can_settings_the_modules_cannot_honour_are_config_errors(overrides, message):
    experiment = load_experiment(SIDEWINDING, overrides)
    with pytest.raises(ConfigError, match=message):
        _configured_hil(experiment)


def test_a_reference_rate_that_saturates_the_bus_is_a_config_error():
    experiment = load_experiment(SIDEWINDING, {"run.reference_rate_hz": 600.0, "can.watchdog_periods": 10})
    with pytest.raises(ConfigError, match=r"loads the 1000000 bit/s bus to 1\d\d % .*aiko can bus-load"):
        _configured_hil(experiment)


def _fifo_granted() -> bool:
    import threading

    from aiko.core import realtime

    granted = []
    probe = threading.Thread(target=lambda: granted.append(realtime.set_fifo(1)))
    probe.start()
    probe.join()
    return granted == [True]


@pytest.mark.skipif(not _fifo_granted(), reason="SCHED_FIFO is not granted to this user (no CAP_SYS_NICE/rtprio)")
def test_every_python_thread_of_a_realtime_run_runs_at_the_runs_priority(tmp_path, modules):
    """Priority inversion (issue 26): a sender at SCHED_FIFO waits for the GIL held by any thread of its process, so
    the MCAP writer (started before the run raises its priority), the Notifier and the emulator thread run at the
    run's priority while it streams, the sender one above; all are back to normal scheduling afterwards. With the
    firmware, the AVR simulator's process (which does the modules' work) runs at SCHED_FIFO too."""
    import os
    import threading
    from pathlib import Path

    from aiko.core.loop import PeriodicTask
    from aiko.core.realtime import thread_policy
    from aiko.robots.aiko.backends.can_priority import WALL_CLOCK_REALTIME_PRIORITY
    from aiko.robots.aiko.run import record_run

    seen: dict[str, tuple[int, int]] = {}

    children: dict[int, tuple[int, int]] = {}  # the AVR simulator's process, with the firmware

    def child_pids() -> set[int]:
        return {
            int(child)
            for task in Path(f"/proc/{os.getpid()}/task").iterdir()
            for child in (task / "children").read_text().split()
        }

    # the test process's children from before the run (other tests' servers, in a full suite) are not the run's
    before = child_pids()

    def snapshot(t_s: float) -> None:
        for thread in threading.enumerate():
            seen[thread.name] = thread_policy(thread.native_id)
        for child in child_pids() - before:
            children[child] = thread_policy(child)

    settings = {"can.watchdog_periods": 20, "can.feedback_timeout_s": 10.0, "hil.modules": modules}
    experiment = load_experiment(SIDEWINDING, settings)
    spy = PeriodicTask("spy", 10.0, snapshot, priority=95)
    record_run(
        experiment,
        tmp_path / "rt.mcap",
        RunOptions(backend="hil", realtime=True, duration_s=0.3),
        extra_tasks=[spy],
    )
    fifo, p = os.SCHED_FIFO, WALL_CLOCK_REALTIME_PRIORITY
    assert seen.pop(threading.main_thread().name) == (fifo, p + 1)
    assert seen.pop("mcap-writer") == (fifo, p)
    assert seen and all(policy == (fifo, p) for policy in seen.values()), seen  # Notifier, emulator thread, ...
    assert len(children) == (1 if modules == "firmware" else 0), children
    assert all(policy[0] == fifo for policy in children.values()), children
    assert thread_policy(0) == (os.SCHED_OTHER, 0)
