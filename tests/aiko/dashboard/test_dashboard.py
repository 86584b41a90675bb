"""Dashboard: a recorder that never blocks the loop, health from status flags, offscreen screenshots (scrubbed
log, CLI, and `aiko run --live` with the window in its own process)."""

import json
from pathlib import Path

import numpy as np
import pytest

import aiko.robots.aiko.mocap  # noqa: F401
from aiko.cli import main
from aiko.core.errors import AikoError
from aiko.dashboard.model import DashboardModel, LiveRecorder
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.joints import JointStatus
from aiko.robots.aiko.run import RunOptions, record_run
from tests.aiko.robots.aiko.chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("dash") / "run.mcap"
    overrides = {"run.duration_s": 3.0, "mocap.source": "simulated", "mocap.dropout_probability": 0.1}
    experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", overrides)
    record_run(experiment, path, RunOptions(backend="kinematic"), backend=ChainBackend())
    return path


def test_live_recorder_is_bounded_and_drops_oldest():
    live = LiveRecorder(max_pending=1000)
    for k in range(10_000):
        live.record("/x", k, {"k": k})
    assert live.dropped == 9000
    items = live.drain()
    assert len(items) == 1000 and items[0][1] == 9000 and items[-1][1] == 9999
    assert live.drain() == [] and live.dropped == 9000


def test_model_health_and_occlusion_gap():
    model = DashboardModel(n_joints=3)
    ok = int(JointStatus.ENABLED)
    status = [ok, ok | int(JointStatus.FAULT), ok | int(JointStatus.WATCHDOG)]
    zeros = [0.0, 0.0, 0.0]
    model.ingest("/events", 1_000, {"kind": "start"})
    model.ingest("/joint_feedback", 2_000, {"t_s": 0.0, "angle_h_rad": zeros, "angle_v_rad": zeros, "status": status})
    model.ingest("/mocap", 3_000, {"position_m": [[0.1, 0.2, 0.0]], "occluded": [False]})
    model.ingest("/mocap", 4_000, {"position_m": [[None, None, None]], "occluded": [True]})
    assert model.health() == ["ok", "FAULT", "WATCHDOG"]
    t, xy = model.path.view()
    assert len(t) == 1 and model.occluded_samples == 1
    np.testing.assert_array_equal(xy[0], [0.1, 0.2])


def test_offscreen_screenshot_of_a_scrubbed_log(log_path, tmp_path):
    from aiko.dashboard.window import build_window, dispose, log_messages, n_joints_of
    from aiko.log import LogReader

    reader = LogReader(log_path)
    window = build_window(DashboardModel(n_joints_of(reader)), None, messages=log_messages(reader))
    try:
        window.slider.setValue(500)  # half-way through the run
        t_half = window.model.last_t_s
        window.slider.setValue(1000)
        assert 1.2 < t_half < 1.8 and abs(window.model.last_t_s - 3.0) < 0.06
        x, y = window.joint_curves[0][1].getData()  # joint 1, measured horizontal angle
        assert len(x) >= 290 and np.nanmax(np.abs(y)) > 10  # degrees: the sidewinding wave is there
        assert len(window.xy_curve.getData()[0]) > 40
        shot = window.screenshot(tmp_path / "dash.png")
    finally:
        dispose(window)
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert image.width() >= 1000 and image.height() >= 600
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 20  # drawn, not a blank canvas


def test_cli_dashboard_screenshot(log_path, tmp_path, capsys):
    out = tmp_path / "cli.png"
    assert main(["dashboard", str(log_path), "--screenshot", str(out), "--at", "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["screenshot"] == str(out)
    assert out.stat().st_size > 20_000


def test_run_live_dashboard_in_its_own_process(tmp_path, capsys):
    out, shot = tmp_path / "live.mcap", tmp_path / "live.png"
    argv = [
        "run",
        str(REPO / "experiments" / "sidewinding.toml"),
        "--duration",
        "2",
        "--out",
        str(out),
        "--live-screenshot",
        str(shot),
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["live_dropped_records"] == 0 and summary["live_exit_code"] == 0, summary
    assert shot.stat().st_size > 20_000 and Path(summary["report_path"]).exists()


def test_pyside_612_on_python_311_is_refused_with_a_fix():
    from aiko.dashboard.window import check_pyside_version

    with pytest.raises(AikoError, match="PySide6-Essentials<6.12"):
        check_pyside_version("6.12.0", (3, 11))
    check_pyside_version("6.12.0", (3, 12))
    check_pyside_version("6.11.3", (3, 11))


def test_bus_health_feedback_age_and_alarms():
    model = DashboardModel(n_joints=2)
    model.ingest("/events", 0, {"kind": "start"})
    model.ingest("/joint_feedback", 10_000_000, {"t_s": 0.01, "angle_h_rad": [0, 0], "angle_v_rad": [0, 0]})
    model.ingest("/references", 510_000_000, {"t_s": 0.51, "angle_h_rad": [0, 0], "angle_v_rad": [0, 0]})
    model.ingest("/events", 520_000_000, {"kind": "module_watchdog", "node": 3})
    model.ingest("/events", 530_000_000, {"kind": "operator_note", "text": "ok"})
    assert model.feedback_age_s() == pytest.approx(0.5)
    assert model.alarms == 1


def test_queue_recorder_never_waits_for_a_stalled_display():
    import multiprocessing as mp

    from aiko.dashboard.live import QueueRecorder

    q = mp.get_context("spawn").Queue(maxsize=10)  # nobody reads it: the display has stalled
    recorder = QueueRecorder(q)
    for k in range(1000):
        recorder.record("/joint_feedback", k, {"k": k})
    recorder.event("stop", 1000)
    assert recorder.dropped == 991  # 10 queued, every other record dropped and counted, none waited for
    q.cancel_join_thread()
    q.close()


def test_a_driven_run_shows_its_steering_state():
    model = DashboardModel(10)
    assert model.drive_line() is None  # not a driven run: nothing to show
    status = {"t_s": 3.0, "gait": "sidewinding", "blending": True, "speed": 1.2, "frequency_deg_s": 96.0,
              "turn": -0.5, "turn_deg": -7.5, "paused": False, "input_ok": True}  # fmt: skip
    model.ingest("/drive/status", 3_000_000_000, status)
    assert model.drive_line() == "drive: RUN, sidewinding…, speed +1.20 (+96 deg/s), turn -0.50 (-7.5 deg)"
    model.ingest("/drive/status", 4_000_000_000, {**status, "input_ok": False})
    assert model.drive_line().startswith("drive: INPUT LOST")
