"""`aiko run … --replay`: record, report, replay on the simulator, compare — the lab's whole daily loop in one
command (the `make run` story), here on the deterministic chain plant."""

import json
from pathlib import Path

import pytest

from aiko.cli import main
from aiko.core.registry import register_backend, unregister_backend
from tests.aiko.robots.aiko.chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module", autouse=True)
def chain_backend():
    register_backend("test_chain", ChainBackend, "deterministic chain plant with link poses (tests only)")
    yield
    unregister_backend("test_chain")


def test_run_report_replay_compare_in_one_command(tmp_path, capsys):
    out = tmp_path / "sw.mcap"
    argv = [
        "run",
        str(REPO / "experiments" / "sidewinding.toml"),
        "--backend",
        "test_chain",
        "--duration",
        "3",
        "--set",
        "mocap.source=simulated",
        "--set",
        "mocap.noise_std_m=0",
        "--set",
        "mocap.latency_s=0",
        "--out",
        str(out),
        "--replay",
        "test_chain",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert Path(summary["report_path"]).exists() and Path(summary["comparison_plot"]).exists()
    assert Path(summary["replay_log_path"]) == tmp_path / "sw-replay.mcap"
    c = summary["comparison"]
    assert c["rms_position_error_m"] < 1e-3 and abs(c["time_offset_s"]) < 0.05 and c["samples_compared"] > 50
    assert c["distance_ratio"] == pytest.approx(1.0, abs=1e-9)


def test_replay_cli_with_override(tmp_path, capsys):
    out = tmp_path / "a.mcap"
    assert (
        main(
            [
                "run",
                str(REPO / "experiments" / "sidewinding.toml"),
                "--backend",
                "test_chain",
                "--duration",
                "2",
                "--set",
                "mocap.source=simulated",
                "--out",
                str(out),
                "--no-report",
            ]
        )
        == 0
    )
    capsys.readouterr()
    replayed = tmp_path / "b.mcap"
    argv = [
        "replay",
        str(out),
        "--out",
        str(replayed),
        "--backend",
        "test_chain",
        "--set",
        "backend.kinematic.time_constant_s=0.3",
        "--json",
    ]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["time_constant_s"] == 0.3
    assert main(["compare", str(out), str(replayed), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rms_position_error_m"] > 1e-4  # slower joints: a different run
