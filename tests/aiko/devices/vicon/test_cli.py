"""`aiko emulate vicon`: its two JSON lines, and one-line errors for bad settings."""

import json

import pytest

from aiko.cli import main

from .processes import REPO, free_port

HOST = "127.0.0.65"


def test_serves_for_a_duration_and_reports_counters(capsys):
    port = free_port(HOST)
    args = ["emulate", "vicon", "--host", HOST, "--port", str(port), "--synthetic", "2", "--rate-hz", "50"]
    assert main([*args, "--duration", "0.3", "--dropout-fraction", "0.5", "--seed", "3"]) == 0
    hello, counters = (json.loads(line) for line in capsys.readouterr().out.strip().splitlines())
    assert hello["vicon"] == f"{HOST}:{port}" and hello["rate_hz"] == 50.0
    assert hello["subjects"] == {"subject1": ["seg1", "seg2", "seg3"], "subject2": ["seg1", "seg2", "seg3"]}
    assert counters["frames_captured"] + counters["frames_dropped"] >= 10 and counters["frames_dropped"] > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--synthetic", "1", "--occlude", "link3@4-2"], "--occlude"),
        (["--synthetic", "1", "--dropout-fraction", "1.5"], "dropout fraction"),
        (["--synthetic", "1", "--rate-hz", "0"], "frame rate"),
        (["--synthetic", "1", "--port", "70000"], "--port"),
        (["--experiment", str(REPO / "experiments" / "sidewinding_hil.toml"), "--backend", "nope"], "unknown backend"),
        (["--log", "missing.mcap"], "missing.mcap"),
    ],
)
def test_bad_settings_are_one_line_errors(capsys, extra, message):
    assert main(["emulate", "vicon", "--host", HOST, *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
