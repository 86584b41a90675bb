"""`aiko dashboard LOG` on a rod-bench log opens the bench view: rod side view, flange force, arm state."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyqtgraph")

from aiko.cli import main  # noqa: E402
from aiko.log import LogReader  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench_log(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "stick.mcap"
    argv = ["bench", "run", str(REPO / "experiments/rod/bench_stick.toml"), "--backend", "sim", "--duration", "1.2"]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    return out


def test_the_bench_view_reads_the_rod_the_force_and_the_arm(bench_log):
    from aiko.dashboard.bench_window import BenchSeries, _at, is_bench_log

    reader = LogReader(bench_log)
    assert is_bench_log(reader)
    series = BenchSeries(reader)
    assert series.duration_s == pytest.approx(1.2, abs=0.05)
    assert series.force_label == "rod base reaction" and series.force_n.shape[1] == 3
    assert np.all(np.isfinite(series.force_n)) and np.abs(series.force_n).max() > 0.1  # the rod's weight at least
    first, last = _at(series.rods, 0.0), _at(series.rods, series.duration_s)
    assert first is not None and last is not None and first.shape == last.shape and first.shape[1] == 3


def test_a_screenshot_of_the_bench_view(bench_log, tmp_path, capsys):
    shot = tmp_path / "bench.png"
    assert main(["dashboard", str(bench_log), "--screenshot", str(shot), "--at", "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["screenshot"] == str(shot)
    assert shot.stat().st_size > 10_000
