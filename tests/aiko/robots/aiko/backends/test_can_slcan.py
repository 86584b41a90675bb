"""The `can` backend (the real-robot path) against the emulator process over slcan on a pseudo-terminal."""

from pathlib import Path

import pytest

from aiko.core.clock import WallClock
from aiko.core.errors import HardwareError
from aiko.core.recording import MemoryRecorder
from aiko.robots.aiko.backends.can import CanBackend
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.joints import JointStatus
from aiko.robots.aiko.run import RunOptions, run_experiment
from tests.emulator_process import start_emulator, stop_emulator

REPO = Path(__file__).resolve().parents[5]


def test_can_backend_streams_to_the_emulator_process_over_slcan(modules):
    proc, pty = start_emulator(modules=modules)
    try:
        # a 2 s watchdog: this test is about the path; a loaded CI machine may stall a process for > 300 ms
        experiment = load_experiment(
            REPO / "experiments" / "sidewinding.toml",
            {"can.watchdog_periods": 20, "can.interface": "slcan", "can.channel": pty, "can.enable_timeout_s": 5.0},
        )
        recorder = MemoryRecorder()
        _, summary = run_experiment(
            experiment,
            recorder,
            RunOptions(backend="can", duration_s=1.0),
            backend=CanBackend(),
            clock=WallClock(),
        )
    finally:
        counters = stop_emulator(proc)
    assert counters["accepted_references"] == [11] * 10, counters  # t = 0.0 .. 1.0 s at 10 Hz: nothing lost
    assert counters["rejected_total"] == 0 and counters["serial_garbage_lines"] == 0
    assert summary["can_bad_frames"] == 0 and summary["can_send_errors"] == 0
    statuses = [p["status"] for _, p in recorder.channels["/joint_feedback"]]
    assert all(s & JointStatus.ENABLED for s in statuses[-1])
    health = summary["module_health"]
    assert [m["node"] for m in health] == list(range(1, 11))
    assert not any(m["fault"] or m["watchdog"] or m["estop"] for m in health), health
    # 100 Hz for 1 s; the firmware's ten simulated ATmega128 may run slower than the wall clock on a loaded machine
    assert all(m["feedback_frames"] >= (10 if modules == "firmware" else 50) for m in health), health


def test_can_backend_fails_clearly_when_modules_are_missing(modules):
    proc, pty = start_emulator("--nodes", "1-4", modules=modules)  # six modules unpowered
    try:
        experiment = load_experiment(
            REPO / "experiments" / "sidewinding.toml",
            # 1 s for the four present modules to answer: a loaded machine answers late
            {
                "can.enable_timeout_s": 3.0 if modules == "firmware" else 1.0,
                "can.interface": "slcan",
                "can.channel": pty,
            },
        )
        with pytest.raises(HardwareError, match=r"joint modules \[5, 6, 7, 8, 9, 10\] did not answer"):
            run_experiment(
                experiment,
                MemoryRecorder(),
                RunOptions(backend="can", duration_s=1.0),
                backend=CanBackend(),
                clock=WallClock(),
            )
    finally:
        counters = stop_emulator(proc)
    assert counters["accepted_references"] == [0] * 4  # nothing was streamed


def test_a_latched_emergency_stop_is_not_cleared_by_the_next_run(modules):
    from aiko.cli import main

    proc, pty = start_emulator(modules=modules)
    try:
        estop = ["can", "estop", "--interface", "slcan", "--channel", pty, "--repeat", "1", "--timeout", "5"]
        assert main(estop) == 0
        bus = {"can.interface": "slcan", "can.channel": pty, "can.enable_timeout_s": 5.0}
        experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", bus)
        run = RunOptions(backend="can", duration_s=0.3)
        with pytest.raises(HardwareError, match=r"latched in EMERGENCY STOP.*can.clear_estop=true"):
            run_experiment(experiment, MemoryRecorder(), run, backend=CanBackend(), clock=WallClock())
        cleared = load_experiment(REPO / "experiments" / "sidewinding.toml", {**bus, "can.clear_estop": True})
        _, summary = run_experiment(cleared, MemoryRecorder(), run, backend=CanBackend(), clock=WallClock())
    finally:
        counters = stop_emulator(proc)
    # only the second run moved the robot: every module accepted exactly the references it sent (at most 4 in 0.3 s
    # at 10 Hz; a loaded machine may skip a deadline, so the count itself is not fixed)
    sent = summary["reference_updates"]
    assert 1 <= sent <= 4 and counters["accepted_references"] == [sent] * 10


def test_a_killed_pc_leaves_every_module_stopped_by_its_watchdog_and_stray_writes_change_nothing(tmp_path, modules):
    """The outside probe's case: while `aiko run` streams over slcan, another program writes stray
    ParameterRequests (WatchdogPeriods = 100) to the same line, then the run is SIGKILLed (no Disable is ever
    sent). Every module refuses the writes while enabled and stops on its own watchdog (here 20 periods) after the
    last reference it accepted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import serial

    from aiko.log import LogReader
    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import MessageKind, Parameter

    codec = default_codec()
    proc, pty = start_emulator(modules=modules)
    log = tmp_path / "run.mcap"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run_cmd = [sys.executable, "-m", "aiko.cli", "run", str(REPO / "experiments" / "sidewinding.toml")]
    run_cmd += ["--backend", "can", "--interface", "slcan", "--channel", pty, "--duration", "60", "--out", str(log)]
    # a 2 s module watchdog, and a run that does not stop itself before it is killed: a loaded machine may stall
    # the run for > 300 ms, or the firmware's simulated boards may run behind the clock
    run_cmd += ["--no-report", "--set", "can.enable_timeout_s=5", "--set", "can.watchdog_periods=20"]
    run_cmd += ["--set", "can.feedback_timeout_s=10", "--set", "run.allow_degraded=true"]
    run = subprocess.Popen(run_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the run streams
            assert run.poll() is None, run.communicate()[1]
            try:
                if log.exists() and len(LogReader(log).messages("/references")) >= 3:
                    break
            except Exception:  # noqa: BLE001 - not written yet
                pass
            time.sleep(0.2)
        stray = serial.Serial(pty, timeout=0)
        for node in range(1, 11):
            frame_id, data = codec.encode(
                MessageKind.PARAMETER_REQUEST,
                node,
                {"Index": int(Parameter.WATCHDOG_PERIODS), "Write": 1, "Value": 100},
            )
            stray.write(f"t{frame_id:03X}{len(data)}{data.hex().upper()}\r".encode())
        stray.flush()
        time.sleep(0.5)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        # the modules' watchdog: 20 x 100 ms of their own time, which the firmware's simulated boards may run behind
        # the wall clock: wait until their heartbeats (Uptime, whole seconds) have gone 3 s past the kill
        heartbeat_ids = {f"{0x700 + node:03X}" for node in range(1, 11)}
        first_uptime, uptime, buffer = None, None, b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (first_uptime is None or uptime < first_uptime + 3):
            buffer += stray.read(4096)
            *lines, buffer = buffer.split(b"\r")
            for line in lines:
                text = line.decode(errors="replace").strip("\x07\n")
                if text[:1] == "t" and text[1:4] in heartbeat_ids:
                    uptime = int.from_bytes(bytes.fromhex(text[9:13]), "little")  # t7NN4 State Version Uptime
                    first_uptime = uptime if first_uptime is None else first_uptime
            time.sleep(0.05)
        stray.close()
    finally:
        if run.poll() is None:
            run.kill()
        counters = stop_emulator(proc)
    assert counters["state"] == ["WATCHDOG"] * 10
    assert counters["rejected"]["parameter_while_enabled"] == [1] * 10
    for last, trip in zip(counters["last_valid_reference_s"], counters["watchdog_trip_s"], strict=True):
        assert 2.0 < trip - last <= 2.0 + 0.001 + 1e-6  # 20 periods and the next tick, on the module's own clock
