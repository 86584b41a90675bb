"""`aiko run --backend hil` through the CLI (in-process), as `make run` will do."""

import json
import math
from pathlib import Path

import pytest

import aiko.log  # noqa: F401  (the MCAP recorder `aiko run` writes with; a broken import must fail here)
from aiko.cli import main

REPO = Path(__file__).resolve().parents[3]


def test_aiko_run_backend_hil_prints_a_json_summary(tmp_path, capsys):
    frames = tmp_path / "frames.asc"
    argv = ["run", str(REPO / "experiments" / "sidewinding.toml"), "--backend", "hil", "--duration", "1"]
    argv += ["--out", str(tmp_path / "run.mcap"), "--set", f"can.log={frames}", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["backend"] == "hil" and summary["hil_mode"] == "lockstep"
    assert summary["emulator"]["accepted_references"] == [11] * 10
    assert frames.stat().st_size > 0


def test_bad_can_setting_is_one_line_exit_2(capsys):
    argv = ["run", str(REPO / "experiments" / "sidewinding.toml"), "--backend", "hil", "--set", "can.bitrate=5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiko: ") and "can.bitrate" in err and "out of range" in err and len(err.splitlines()) == 1


def test_aiko_can_decode_reads_a_hil_frame_log(tmp_path, capsys):
    from aiko.core.recording import MemoryRecorder
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.run import RunOptions, run_experiment

    log = tmp_path / "frames.blf"
    experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", {"can.log": str(log)})
    run_experiment(experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=0.5))
    assert main(["can", "decode", str(log), "--kind", "JointReference", "--node", "3", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 6 and {r["node"] for r in records} == {3}
    for k, record in enumerate(records):
        expected = experiment.gait.references(k / 10).angle_h_rad[2]
        assert record["values"]["AngleH"] == pytest.approx(math.degrees(expected), abs=0.005)


def test_aiko_can_estop_refuses_a_process_local_virtual_bus(capsys):
    import can

    listener = can.Bus(interface="virtual", channel="test-cli-estop")
    try:
        assert main(["can", "estop", "--interface", "virtual", "--channel", "test-cli-estop", "--repeat", "2"]) == 2
        assert listener.recv(timeout=0.05) is None  # nothing was sent: no process could have heard it
    finally:
        listener.shutdown()
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "refused" in err and "inside one process" in err


def test_aiko_can_bus_load(capsys):
    assert main(["can", "bus-load", "--reference-rate", "100", "--feedback-rate", "100", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["frames_per_s"] == 3010 and result["load_percent"] == pytest.approx(40.595)
    assert main(["can", "decode", "/nonexistent.asc"]) == 2
    assert "CAN log not found" in capsys.readouterr().err


@pytest.mark.parametrize("bitrate", ["0", "-5", "2000000"])
def test_aiko_can_bus_load_rejects_a_bitrate_outside_classic_can(capsys, bitrate):
    assert main(["can", "bus-load", "--bitrate", bitrate]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--bitrate must be" in err, err


@pytest.mark.parametrize("node", ["0", "-5", "11"])
def test_aiko_can_decode_rejects_a_node_the_protocol_does_not_have(tmp_path, capsys, node):
    log = tmp_path / "frames.asc"
    log.write_text("")
    assert main(["can", "decode", str(log), "--node", node]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "defines nodes 1..10" in err, err


@pytest.mark.parametrize("backend", ["sim", "kinematic"])
def test_can_log_without_a_can_bus_is_refused(tmp_path, capsys, backend):
    argv = ["run", str(REPO / "experiments" / "sidewinding.toml"), "--backend", backend, "--duration", "0.5"]
    argv += ["--out", str(tmp_path / "run.mcap"), "--can-log", str(tmp_path / "y.asc")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--can-log" in err and f"--backend {backend} has no CAN bus" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run.mcap").exists() and not (tmp_path / "y.asc").exists()


def test_frame_log_marks_the_pcs_frames_tx_and_decode_names_dbc_values(tmp_path, capsys):
    from aiko.core.recording import MemoryRecorder
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.run import RunOptions, run_experiment

    log = tmp_path / "frames.asc"
    experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", {"can.log": str(log)})
    run_experiment(experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=0.3))
    import can

    frames = list(can.LogReader(str(log)))
    sent = [f for f in frames if not f.is_rx]
    received = [f for f in frames if f.is_rx]
    assert sent and received
    assert {f.arbitration_id for f in sent}.isdisjoint({f.arbitration_id for f in received})  # PC vs modules
    assert main(["can", "decode", str(log), "--kind", "Command"]) == 0
    out = capsys.readouterr().out
    assert "Command=ClearFaults" in out and "Command=Enable" in out and "Command=3" not in out
