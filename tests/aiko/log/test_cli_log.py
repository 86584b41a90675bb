"""`aiko log info --json`, `aiko log export --csv`, `aiko log recover`."""

import csv
import json

import numpy as np
import pytest

from aiko.log import McapRecorder

from ._cli import run_cli


def _write(path):
    with McapRecorder(path) as rec:
        rec.event("start", 1_000_000_000)
        for k in range(21):  # 20 Hz for 1 s
            rec.record(
                "/mocap",
                1_000_000_000 + k * 50_000_000,
                {"position_m": [0.01 * k, np.nan if k == 3 else 0.0, 0.05], "occluded": k == 3},
            )
        for k in range(11):  # 10 Hz for 1 s
            rec.record("/references", 1_000_000_000 + k * 100_000_000, {"angle_h_rad": [0.1 * k, -0.1 * k]})


def test_info_json_reports_channels_counts_duration_rates(tmp_path, capsys):
    path = tmp_path / "a.mcap"
    _write(path)
    assert run_cli(["log", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["channels"]["/mocap"]["messages"] == 21
    assert abs(info["channels"]["/mocap"]["rate_hz"] - 20.0) < 1e-9
    assert abs(info["channels"]["/references"]["rate_hz"] - 10.0) < 1e-9
    assert info["duration_s"] == 1.0 and info["truncated"] is False
    assert info["events"][0]["kind"] == "start"


def test_export_csv_one_file_per_channel(tmp_path, capsys):
    path = tmp_path / "a.mcap"
    _write(path)
    assert run_cli(["log", "export", str(path), "--csv", str(tmp_path / "csv")]) == 0
    with open(tmp_path / "csv" / "mocap.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["t_ns", "position_m[1]", "position_m[2]", "position_m[3]", "occluded"]  # from 1, like joints
    assert len(rows) == 22
    assert rows[4][2] == "" and rows[4][4] == "True"  # occluded sample: empty cell, not 0
    assert float(rows[2][1]) == 0.01
    assert (tmp_path / "csv" / "references.csv").exists() and (tmp_path / "csv" / "events.csv").exists()


def test_missing_log_is_one_line_error(tmp_path, capsys):
    assert run_cli(["log", "info", str(tmp_path / "nope.mcap")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiko: ") and "does not exist" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["info", "recover"])
@pytest.mark.parametrize("kind, message", [("empty", "is empty (0 bytes)"), ("directory", "is a directory")])
def test_an_empty_file_or_a_directory_is_named_as_such(tmp_path, capsys, command, kind, message):
    path = tmp_path / "x.mcap"
    path.mkdir() if kind == "directory" else path.write_bytes(b"")
    assert run_cli(["log", command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiko: ") and message in err and err.count("\n") == 1, err


def test_recover_complete_file_is_identity(tmp_path, capsys):
    path = tmp_path / "a.mcap"
    _write(path)
    assert run_cli(["log", "recover", str(path), "--out", str(tmp_path / "b.mcap"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["was_truncated"] is False and out["messages"] == 33


def test_recover_any_truncation_gives_a_prefix(tmp_path, capsys):
    """Cut a log at many byte offsets (mid-chunk, mid-record): recovery keeps exactly a prefix of every channel."""
    from mcap.reader import make_reader

    from aiko.log import LogReader

    path = tmp_path / "full.mcap"
    with McapRecorder(path, chunk_size_bytes=2048) as rec:
        for k in range(400):
            rec.record("/joint_feedback", 1_000 + k * 10_000_000, {"k": k, "angle_h_rad": [0.001 * k] * 10})
            if k % 10 == 0:
                rec.record("/references", 1_000 + k * 10_000_000, {"k": k // 10})
    full = path.read_bytes()
    counts = []
    for cut in np.linspace(2000, len(full) - 100, 9).astype(int):
        cut_path = tmp_path / f"cut{cut}.mcap"
        cut_path.write_bytes(full[:cut])
        fixed = tmp_path / f"fixed{cut}.mcap"
        assert run_cli(["log", "recover", str(cut_path), "--out", str(fixed), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["was_truncated"] is True
        with open(fixed, "rb") as fh:
            assert make_reader(fh).get_summary().statistics.message_count == report["messages"]
        log = LogReader(fixed)
        assert not log.truncated
        n = 0
        for topic in ("/joint_feedback", "/references"):
            if log.has(topic):
                k = log.channel(topic)["k"]
                np.testing.assert_array_equal(k, np.arange(len(k)))  # a prefix, in order, nothing invented
                n += len(k)
        counts.append(n)
    assert counts == sorted(counts) and counts[-1] > 300  # later cuts keep more; the last keeps nearly all
