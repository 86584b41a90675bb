"""`aiko dashboard LOG` on a rod-bench log opens the bench view: rod side view, flange force, arm state."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyqtgraph")

from aiko.cli import main  # noqa: E402
from aiko.core.messages import find_channel  # noqa: E402
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


def test_the_bench_view_shows_the_camera_markers_and_the_observers_rod_as_the_camera_logs_them(bench_log, tmp_path):
    """The writer (aiko.robots.rod_bench.camera.observe_frames) and the reader (BenchSeries) agree on the channels'
    fields: markers from ``world_m`` (an unseen one is NaN, not a crash), the observer's rod from ``centreline_m``."""
    from types import SimpleNamespace

    from aiko.core.clock import SimulatedClock
    from aiko.dashboard.bench_window import BENCH_TOPIC, BenchSeries, _at
    from aiko.devices.camera.pipeline import StrainEstimate
    from aiko.devices.camera.red_markers import MarkerObservation
    from aiko.log import McapRecorder
    from aiko.robots.rod_bench.camera import observe_frames

    source = LogReader(bench_log)
    t0 = min(t for t, _ in source.messages(BENCH_TOPIC))
    world = np.array([[0.05, 0.0, 0.10], [np.nan, np.nan, np.nan], [0.15, 0.0, 0.08]])
    rod = np.column_stack([np.linspace(0.0, 0.3, 5), np.zeros(5), np.linspace(0.1, 0.0, 5)])

    class Pipeline:
        tracker = SimpleNamespace(settings=SimpleNamespace(n_markers=3))

        def track(self, frame):
            seen = np.isfinite(world[:, 0])
            return MarkerObservation(frame.t_ns, np.zeros((3, 2)), seen, world, 3), np.zeros(6)

        def observe(self, obs, alpha):
            return StrainEstimate(obs.t_ns, obs, np.linspace(0, 0.3, 5), np.zeros((5, 6)), None, 4, centreline_m=rod)

    clock = SimulatedClock()
    clock.start_ns = t0
    out = tmp_path / "with_camera.mcap"
    with McapRecorder(out) as recorder:
        schemas = {topic: info.schema_name for topic, info in source.channel_info().items()}
        for topic in source.topics:
            for t, payload in source.messages(topic):
                if topic == "/events":
                    payload = dict(payload)
                    recorder.event(payload.pop("kind"), t, **payload)
                else:
                    recorder.record(find_channel(topic, schemas[topic]), t, payload)
        frames = [(SimpleNamespace(t_ns=int(t_s * 1e9)), None) for t_s in (0.2, 0.4)]
        stats = observe_frames(frames, Pipeline(), recorder, clock)
    assert stats["frames"] == 2 and stats["observer_failed"] == 0
    series = BenchSeries(LogReader(out))
    markers, observed = _at(series.markers, 0.5), _at(series.observed, 0.5)
    assert markers is not None and observed is not None
    np.testing.assert_array_equal(np.isnan(markers[:, 0]), [False, True, False])
    np.testing.assert_allclose(markers[[0, 2]], world[[0, 2]])
    np.testing.assert_allclose(observed, rod)


def test_the_live_view_sees_what_the_log_holds(tmp_path):
    """``record_bench_run(live=...)`` hands every record to the live view too; BenchRecords built from them give the
    same series as the log (side records that arrive after the run included, in time order)."""
    from aiko.core.recording import MemoryRecorder
    from aiko.dashboard.bench_window import BenchRecords, BenchSeries
    from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
    from aiko.robots.rod_bench.bench_run import record_bench_run

    live, out = MemoryRecorder(), tmp_path / "run.mcap"
    record_bench_run(
        load_bench_experiment(REPO / "experiments/rod/bench_stick.toml"), out, "sim", duration_s=0.3, live=live
    )
    records = BenchRecords()
    assert records.series() is None  # nothing to show yet: no arm observation
    for channel, messages in live.channels.items():
        for t_ns, payload in messages:
            records.ingest(channel, t_ns, payload)
    assert "/bench/command" not in records.topics  # only what the view shows is kept
    from_live, from_log = records.series(), BenchSeries(LogReader(out))
    assert from_live is not None and len(from_live.t_s) > 5 and from_live.force_label == from_log.force_label
    for name in ("t_s", "flange_pose", "flange_speed", "force_t_s", "force_n"):
        np.testing.assert_allclose(getattr(from_live, name), getattr(from_log, name), err_msg=name)
    assert len(from_live.rods) == len(from_log.rods) > 0


def test_bench_run_live_dashboard_in_its_own_process(tmp_path, capsys):
    out, shot = tmp_path / "live.mcap", tmp_path / "live.png"
    argv = ["bench", "run", str(REPO / "experiments/rod/bench_stick.toml"), "--duration", "0.6", "--out", str(out)]
    assert main([*argv, "--live-screenshot", str(shot), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["live_dropped_records"] == 0 and summary["live_exit_code"] == 0, summary
    assert shot.stat().st_size > 10_000
