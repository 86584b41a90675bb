"""The run report `aiko run` writes: a self-contained HTML page (or a PNG)."""

import base64
import re
from pathlib import Path

import pytest

import aiko.robots.aiko.mocap  # noqa: F401
from aiko.analysis.report import write_report
from aiko.cli import main
from aiko.core.errors import AikoError
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.run import RunOptions, record_run
from tests.aiko.robots.aiko.chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "run.mcap"
    experiment = load_experiment(
        REPO / "experiments" / "sidewinding.toml", {"run.duration_s": 2.0, "mocap.source": "simulated"}
    )
    record_run(experiment, path, RunOptions(backend="kinematic"), backend=ChainBackend())
    return path


def test_html_report_is_self_contained(log_path, tmp_path):
    out = write_report(log_path, tmp_path / "r.html")
    text = out.read_text()
    for section in ("<h2>Run</h2>", "<h2>Summary</h2>", "<h2>Channels</h2>", "<h2>Events</h2>"):
        assert section in text
    assert "/mocap" in text and "reference_updates" in text and "start" in text
    png = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)'", text).group(1))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert not (tmp_path / "r.png").exists()  # nothing written beside it


def test_png_report_and_bad_suffix(log_path, tmp_path, capsys):
    assert main(["report", str(log_path), "--out", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(AikoError, match=".html or .png"):
        write_report(log_path, tmp_path / "r.pdf")


def test_report_has_every_joint_the_gait_status_counts_and_tables_not_raw_json(log_path, tmp_path):
    text = write_report(log_path, tmp_path / "r.html").read_text()
    for section in ("<h2>Gait</h2>", "<h2>Joints</h2>", "<h2>Replay against the simulation</h2>"):
        assert section in text
    assert "amplitude_h [deg]</th><td>30</td>" in text  # the preset's parameters, in degrees
    for header in ("RMS error horizontal [deg]", "RMS error vertical [deg]", "SATURATED samples", "FAULT samples",
                   "WATCHDOG samples", "AT_LIMIT samples"):  # fmt: skip
        assert header in text
    for joint in range(1, 11):  # every joint, numbered from 1
        assert f"<tr><td>{joint}</td>" in text
    assert "None" not in text and '{"' not in text  # no Python None, no raw JSON
    assert "No replay" in text
    pngs = re.findall(r"base64,([A-Za-z0-9+/=]+)'", text)
    assert len(pngs) == 3  # the run, every joint (horizontal and vertical), the body at a few instants


def test_report_says_what_the_replay_found(log_path, tmp_path):
    comparison = {
        "b": "run-replay.mcap", "tracked_point": "link6", "rms_position_error_m": 0.198,
        "max_position_error_m": 0.38, "run_a": {"distance_m": 1.16}, "run_b": {"distance_m": 0.81},
        "distance_ratio": 0.70, "time_offset_s": -0.015,
        "joint_angle_rms_between_runs_rad": {"h_rad": [0.02] * 10, "v_rad": [0.01] * 9 + [0.04]},
    }  # fmt: skip
    text = write_report(log_path, tmp_path / "r.html", comparison).read_text()
    assert "does not reproduce this run" in text
    assert "The RMS gap (198 mm)" in text and "distance ratio (0.70)" in text and "When it is expected" in text
    assert "(joint 10)" in text  # the joint that moved most differently
    comparison.update(rms_position_error_m=0.002, distance_ratio=1.01)
    assert "reproduces this run" in write_report(log_path, tmp_path / "r.html", comparison).read_text()
