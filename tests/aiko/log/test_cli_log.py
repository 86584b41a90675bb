"""`aiko log info --json`, `aiko log export --csv`, `aiko log recover`."""

import csv
import json

import numpy as np
import pytest

from aiko.core.mocap import MOCAP_CHANNEL
from aiko.log import McapRecorder
from aiko.robots.aiko.joints import REFERENCES_CHANNEL

from ._channels import COUNTER, OTHER_COUNTER
from ._cli import run_cli


def _write(path):
    with McapRecorder(path) as rec:
        rec.event("start", 1_000_000_000, duration_s=1.0)
        for k in range(21):  # 20 Hz for 1 s
            rec.record(MOCAP_CHANNEL, 1_000_000_000 + k * 50_000_000, {
                "capture_t_ns": 1_000_000_000 + k * 50_000_000, "latency_s": 0.0, "frame": k, "source": "test",
                "names": ["link6"], "position_m": [[0.01 * k, np.nan if k == 3 else 0.0, 0.05]],
                "quaternion_wxyz": [[1.0, 0.0, 0.0, 0.0]], "occluded": [k == 3],
            })  # fmt: skip
        for k in range(11):  # 10 Hz for 1 s
            angles = [0.1 * k, -0.1 * k]
            rec.record(REFERENCES_CHANNEL, 1_000_000_000 + k * 100_000_000, {
                "t_s": 0.1 * k, "angle_h_rad": angles, "angle_v_rad": angles, "rate_h_rad_s": angles,
                "rate_v_rad_s": angles,
            })  # fmt: skip


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
    header = rows[0]
    # one column per element, counted from 1 like joints: body 1's x, y, z
    x, y, occluded = (header.index(c) for c in ("position_m[1][1]", "position_m[1][2]", "occluded[1]"))
    assert header[x : x + 3] == ["position_m[1][1]", "position_m[1][2]", "position_m[1][3]"]
    assert len(rows) == 22
    assert rows[4][y] == "" and rows[4][occluded] == "True"  # occluded sample: empty cell, not 0
    assert float(rows[2][x]) == 0.01
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
            rec.record(COUNTER, 1_000 + k * 10_000_000, {"k": k})
            if k % 10 == 0:
                rec.record(OTHER_COUNTER, 1_000 + k * 10_000_000, {"k": k // 10})
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
        for topic in ("/test/counter", "/test/other"):
            if log.has(topic):
                k = log.channel(topic)["k"]
                np.testing.assert_array_equal(k, np.arange(len(k)))  # a prefix, in order, nothing invented
                n += len(k)
        counts.append(n)
    assert counts == sorted(counts) and counts[-1] > 300  # later cuts keep more; the last keeps nearly all
