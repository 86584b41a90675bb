"""Logs written before channels declared their schemas keep reading, in every tool that reads a log.

``logs_before_declared_schemas/`` holds logs written by the code of commit e69c4ee (its README says how): schemas
inferred from a first message, NaN as null under ``["number", "null"]``, vectors as arrays of arrays, ``/events``
with only ``kind``. The reader, ``aiko log info`` / ``export``, ``replay``, ``compare``, the dashboard and the bench
tools read them as they did, and a log written today next to them gives the same arrays.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from aiko.cli import main
from aiko.log import LogReader

OLD = Path(__file__).with_name("logs_before_declared_schemas")
KINDS = ("hil", "sim", "planar", "rod", "bench_hil")


@pytest.mark.parametrize("kind", KINDS)
def test_log_info_and_export_read_every_old_log(kind, tmp_path, capsys):
    path = OLD / f"{kind}.mcap"
    assert main(["log", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    reader = LogReader(path)
    assert not reader.truncated
    assert {t: c["messages"] for t, c in info["channels"].items()} == {
        t: i.count for t, i in reader.channel_info().items()
    }
    assert info["events"] and info["events"][0]["kind"] in ("start", "run_started", "planar_snake_obstacles")
    assert main(["log", "export", str(path), "--csv", str(tmp_path / "csv")]) == 0
    capsys.readouterr()
    for topic in reader.topics:
        with open(tmp_path / "csv" / (topic.strip("/").replace("/", "_") + ".csv")) as fh:
            assert len(list(csv.reader(fh))) == len(reader.messages(topic)) + 1, topic


def test_old_arrays_have_the_shapes_of_todays():
    hil = LogReader(OLD / "hil.mcap")
    mocap = hil.channel("/mocap")
    assert mocap["position_m"].shape == (len(mocap), 1, 3) and mocap["quaternion_wxyz"].shape == (len(mocap), 1, 4)
    occluded = mocap["occluded"][:, 0]
    assert occluded.any() and np.isnan(mocap["position_m"][occluded]).all()  # null read back as NaN
    assert hil.channel("/joint_feedback")["angle_h_rad"].shape[1] == 10
    sim = LogReader(OLD / "sim.mcap")
    assert sim.channel("/sim/link_poses")["position_m"].shape[1:] == (11, 3)
    planar = LogReader(OLD / "planar.mcap")
    centres = np.asarray(planar.events("planar_snake_obstacles")[0].fields["centres_m"], dtype=float)
    assert centres.ndim == 2 and centres.shape[1] == 2
    rod = LogReader(OLD / "rod.mcap")
    assert rod.channel("/sim/rod/contacts")["force_n"].shape[2] == 3
    bench = LogReader(OLD / "bench_hil.mcap")
    assert bench.channel("/bench/observation")["arm.robot_mode"][0] == 7
    assert bench.channel("/bench/markers")["world_m"].shape[2] == 3


def test_the_dashboard_opens_old_logs(tmp_path, capsys):
    for kind in ("hil", "bench_hil"):
        shot = tmp_path / f"{kind}.png"
        assert main(["dashboard", str(OLD / f"{kind}.mcap"), "--screenshot", str(shot), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["screenshot"] == str(shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_compare_reads_an_old_bench_log(capsys):
    path = str(OLD / "bench_hil.mcap")
    assert main(["bench", "compare", path, path, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["strain_error_percent"] == 0.0


@pytest.mark.slow
def test_an_old_hil_log_replays_and_compares_with_its_replay(tmp_path, capsys):
    """The HIL log of `make run`'s experiment, replayed today on the simulator, compared with its replay (a log
    of today's format): both readers meet in `aiko compare`."""
    old = OLD / "hil.mcap"
    replay = tmp_path / "replay.mcap"
    assert main(["replay", str(old), "--out", str(replay), "--json"]) == 0
    capsys.readouterr()
    assert main(["compare", str(old), str(replay), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["joint_tracking_rms_rad"]["a"]["h_rad"] and result["joint_tracking_rms_rad"]["b"]["h_rad"]
    new = LogReader(replay)
    assert new.channel_info()["/sim/link_poses"].schema_name == "aiko.snake3d.LinkPoses"
    np.testing.assert_array_equal(  # the replay drove exactly the logged references
        new.channel("/references")["angle_h_rad"][: len(LogReader(old).channel("/references"))],
        LogReader(old).channel("/references")["angle_h_rad"],
    )
