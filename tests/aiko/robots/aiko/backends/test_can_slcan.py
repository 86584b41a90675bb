"""The `can` backend (the real-robot path) against the emulator process over slcan on a pseudo-terminal.

Load-proof: the emulator process runs at normal priority and a loaded machine can starve it (or the pty's kernel
worker) for longer than a module's watchdog or the run's feedback timeout. Those limits are the subject of other
tests (lockstep HIL, where time is simulated); here they are set far beyond any stall (``TOLERANT``), and counts are
compared with what the run says it sent, not with a rate of wall time."""

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
# far beyond any stall of a loaded machine: a 2 s module watchdog, 10 s to hear every module and to enable them
TOLERANT = {"can.watchdog_periods": 20, "can.feedback_timeout_s": 10.0, "can.enable_timeout_s": 10.0}


def test_can_backend_streams_to_the_emulator_process_over_slcan():
    proc, pty = start_emulator()
    try:
        experiment = load_experiment(
            REPO / "experiments" / "sidewinding.toml",
            {**TOLERANT, "can.interface": "slcan", "can.channel": pty},
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
    # every reference the run sent reached every module (a stall may have superseded deadlines: then fewer went out,
    # each counted in a deadline_missed event)
    sent = summary["reference_updates"]
    assert counters["accepted_references"] == [sent] * 10
    assert sent + summary["task_timing"]["references"]["missed"] == 11  # t = 0.0 .. 1.0 s at 10 Hz
    assert counters["rejected_total"] == 0 and counters["serial_garbage_lines"] == 0
    assert summary["can_bad_frames"] == 0 and summary["can_send_errors"] == 0
    statuses = [p["status"] for _, p in recorder.channels["/joint_feedback"]]
    assert all(s & JointStatus.ENABLED for s in statuses[-1])
    health = summary["module_health"]
    assert [m["node"] for m in health] == list(range(1, 11))
    assert not any(m["fault"] or m["watchdog"] or m["estop"] for m in health), health
    assert all(m["feedback_frames"] >= 1 for m in health), health  # every module was heard (how often: load)


def test_can_backend_fails_clearly_when_modules_are_missing():
    proc, pty = start_emulator("--nodes", "1-4")  # six modules unpowered
    try:
        experiment = load_experiment(
            REPO / "experiments" / "sidewinding.toml",
            {"can.enable_timeout_s": 1.0, "can.interface": "slcan", "can.channel": pty},
        )
        with pytest.raises(HardwareError, match=r"joint modules \[[0-9, ]+\] did not answer") as refused:
            run_experiment(
                experiment,
                MemoryRecorder(),
                RunOptions(backend="can", duration_s=1.0),
                backend=CanBackend(),
                clock=WallClock(),
            )
    finally:
        counters = stop_emulator(proc)
    named = {int(n) for n in str(refused.value).split("[", 1)[1].split("]", 1)[0].split(",")}
    # the six unpowered ones always; a loaded machine may delay the four present ones past 1 s too
    assert {5, 6, 7, 8, 9, 10} <= named <= set(range(1, 11))
    assert counters["accepted_references"] == [0] * 4  # nothing was streamed


def test_a_latched_emergency_stop_is_not_cleared_by_the_next_run():
    from aiko.cli import main

    proc, pty = start_emulator()
    try:
        assert main(["can", "estop", "--interface", "slcan", "--channel", pty, "--repeat", "1"]) == 0
        bus = {**TOLERANT, "can.interface": "slcan", "can.channel": pty}
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


def test_a_run_sharing_its_pty_with_aiko_can_estop_stops_with_reason_estop():
    """Issue 26: `aiko can estop` on the run's own pty, from another process. Both read the pty while the stop is
    confirmed, so each gets part of the byte stream: the run's reads may fail ("device reports readiness to read
    but returned no data") and lose half lines. The run must hear the modules' ESTOP and stop with that reason:
    never die deaf, never stop as `feedback_stale`. Asserted: the reason, no traceback in either process. Not
    asserted: how soon (a loaded machine starts the e-stop late; the run's 60 s is only a liveness bound). The
    failed read itself is reproduced deterministically in tests/aiko/devices/can/test_slcan_bus.py."""
    import os
    import subprocess
    import sys

    from aiko.core.errors import RunStopped
    from aiko.core.loop import PeriodicTask

    proc, pty = start_emulator()
    helpers: list[subprocess.Popen] = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def estop_at_half_a_second(t_s: float) -> None:
        if abs(t_s - 0.5) < 1e-9:
            estop = [sys.executable, "-m", "aiko.cli", "can", "estop", "--interface", "slcan", "--channel", pty]
            helpers.append(subprocess.Popen(estop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO))

    recorder = MemoryRecorder()
    try:
        experiment = load_experiment(
            REPO / "experiments" / "sidewinding.toml",
            {**TOLERANT, "can.interface": "slcan", "can.channel": pty},
        )
        with pytest.raises(RunStopped, match="ESTOP"):
            run_experiment(
                experiment,
                recorder,
                RunOptions(backend="can", duration_s=60.0),
                backend=CanBackend(),
                clock=WallClock(),
                extra_tasks=[PeriodicTask("estop", 10.0, estop_at_half_a_second, priority=90)],
            )
    finally:
        outputs = [helper.communicate(timeout=60) for helper in helpers]
        stop_emulator(proc)
    stopped = next(fields for _, kind, fields in recorder.events if kind == "run_stopped")
    assert stopped["reasons"] == ["estop_or_fault"], stopped
    assert len(outputs) == 1 and not any("Traceback" in (err or "") for _, err in outputs), outputs


def test_a_stray_gain_written_over_the_line_is_rewritten_by_the_next_run(capsys):
    """Issue 26, across processes: `aiko can params 3 --write KdH=500` (a person, a script) to a disabled module
    over the pty, then a run: it writes every parameter and reads each back before it enables; afterwards the
    module holds the robot description's KdH = 6, and the run never drove with 500."""
    import json

    from aiko.cli import main

    proc, pty = start_emulator()
    line = ["--interface", "slcan", "--channel", pty]
    try:
        assert main(["can", "params", "3", *line, "--write", "KdH=500", "--timeout", "5"]) == 0
        assert capsys.readouterr().out == "joint module 3: KdH = 500 (written, read back)\n"
        bus = {**TOLERANT, "can.interface": "slcan", "can.channel": pty}
        experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", bus)
        run_experiment(
            experiment, MemoryRecorder(), RunOptions(backend="can", duration_s=0.3), backend=CanBackend(),
            clock=WallClock(),
        )  # fmt: skip
        assert main(["can", "params", "1-10", *line, "--json", "--timeout", "5"]) == 0
        held = json.loads(capsys.readouterr().out)["modules"]
    finally:
        counters = stop_emulator(proc)
    assert {n: held[n]["KdH"]["value"] for n in held} == {str(n): 6.0 for n in range(1, 11)}
    assert held["3"]["KpH"]["value"] == 400.0 and held["3"]["WatchdogPeriods"]["value"] == 20.0  # TOLERANT's
    assert counters["parameter_writes_accepted"][2] == 1 + 9  # the stray one, then the run's nine


def test_aiko_can_params_reads_a_table_and_names_a_silent_module(capsys):
    from aiko.cli import main

    proc, pty = start_emulator("--nodes", "1-2")
    try:
        status = main(["can", "params", "1-3", "--interface", "slcan", "--channel", pty, "--timeout", "10"])
    finally:
        stop_emulator(proc)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["parameter", "module", "1", "module", "2", "module", "3"]
    assert lines[2].split() == ["KdH", "6", "6", "-"] and lines[12].split() == ["FreePlayDeg", "4", "4", "-"]
    assert status == 1 and err == "aiko: joint module 3: no reply (check its power, the wiring, the node id)\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["3", "--write", "Ki=3"], "unknown parameter 'Ki'"),
        (["3", "--write", "KdH"], "expected K=V"),
        (["3", "--write", "KdH=fast"], "'fast' is not a number"),
        (["3", "--write", "KdH=nan"], "finite"),
        (["11"], "the protocol defines nodes 1..10"),
        (["3", "--read", "--write", "KdH=1"], "not allowed with argument"),
    ],
)
def test_aiko_can_params_bad_input_is_one_line_exit_2(argv, message, capsys):
    from aiko.cli import main

    assert main(["can", "params", *argv, "--interface", "slcan", "--channel", "/dev/null-not-a-port"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
