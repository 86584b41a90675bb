"""`--backend real` with a real camera, tested as the stack tests hardware: the UR3 emulator (`aiko emulate ur3`) and
the F/T emulator (`aiko emulate ft-sensor`) in their own processes, the camera a video file that `aiko emulate
camera` rendered beforehand from the simulated experiment (so its truth is known). The bench grabs the video in
the background during the run, stamps the frames on the run's clock, and after the run the same tracker and
observer as HIL's turn the recorded video into /bench/markers and /bench/observed_strain."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from aiko.cli import main
from aiko.core.errors import AikoError
from aiko.devices.camera.calibration import CalibrationError
from aiko.devices.camera.source import CameraSourceError
from aiko.log.reader import read_log
from aiko.robots.rod_bench.bench_experiment import load_bench_experiment
from aiko.robots.rod_bench.bench_run import record_bench_run
from aiko.robots.rod_bench.camera import MARKERS, OBSERVED_STRAIN
from aiko.robots.rod_bench.ft_sensor import WRENCH
from aiko.robots.rod_bench.sensors import bench_sensors
from tests.aiko.devices.force_sensor._emulator import start_ft_emulator, stop_ft_emulator

from .bench_files import REPO, write_experiment

FPS = 50


@pytest.fixture(scope="module")
def filmed(tmp_path_factory):
    """The test experiment filmed by `aiko emulate camera` (6 beads, 50 fps, 0.2 s: 11 frames) with its truth."""
    d = tmp_path_factory.mktemp("film")
    experiment = write_experiment(d)
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "camera", str(experiment), "--fps", str(FPS)]
    cmd += ["--markers", "6", "--out", str(d / "film.avi"), "--truth-out", str(d / "truth.json")]
    cmd += ["--calibration-out", str(d / "camera.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return d


def camera_table(d, **extra) -> str:
    lines = [f'source = "{d / "film.avi"}"', f'calibration = "{d / "camera.json"}"', "markers = 6", "rate_hz = 50.0"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    return "\n[camera]\n" + "\n".join(lines) + "\n"


def test_an_unopenable_source_or_calibration_is_one_line_before_the_arm_moves(filmed, tmp_path, capsys):
    extra = camera_table(filmed).replace(str(filmed / "film.avi"), str(tmp_path / "missing.avi"))
    experiment = load_bench_experiment(write_experiment(tmp_path, extra))
    with pytest.raises(CameraSourceError, match=r"cannot open video file .*missing\.avi: no such file"):
        bench_sensors(experiment, "real", None, log_path=tmp_path / "x.mcap")
    # the command: one line on stderr, before any connection (no emulator runs at this host)
    path = write_experiment(tmp_path, extra, "cli.toml")
    assert main(
        ["bench", "run", str(path), "--backend", "real", "--host", "127.0.0.97", "--out", str(tmp_path / "x.mcap")]
    )
    err = capsys.readouterr().err.strip()
    assert "cannot open video file" in err and len(err.splitlines()) == 1
    # the calibration: missing, not one, or a file with its own plane and a plane in the table
    for extra, error, match in (
        (camera_table(filmed).replace("camera.json", "nope.json"), CalibrationError, "calibration file not found"),
        (
            camera_table(filmed).replace(str(filmed / "camera.json"), str(filmed / "truth.json")),
            CalibrationError,
            "not a plane calibration",
        ),
        (camera_table(filmed, plane="table"), Exception, "carries its own plane"),
    ):
        with pytest.raises(error, match=match):
            bench_sensors(
                load_bench_experiment(write_experiment(tmp_path, extra)), "real", None, log_path=tmp_path / "x.mcap"
            )


class SteppingClock:
    """A controller clock that advances in 4 ms RTDE periods: 5.000 s for three readings, then 5.004 s."""

    def __init__(self) -> None:
        self.calls = 0

    def now_s(self) -> float:
        self.calls += 1
        return 5.0 if self.calls <= 3 else 5.004


def test_the_run_clock_is_anchored_at_an_edge_and_live_stamps_map_through_it_less_the_latency(tmp_path):
    import cv2

    from aiko.devices.camera.calibration import CameraIntrinsics, PlaneCalibration
    from aiko.robots.rod_bench.real_camera import RealCamera

    video = tmp_path / "still.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"FFV1"), 50.0, (32, 24))
    writer.write(np.zeros((24, 32, 3), np.uint8))
    writer.release()
    intrinsics = CameraIntrinsics(np.array([[100.0, 0, 16], [0, 100, 12], [0, 0, 1]]), np.zeros(5), (32, 24))
    PlaneCalibration(intrinsics, np.diag([0.001, 0.001, 1.0])).save(tmp_path / "bare.json")  # no plane in it
    extra = '\n[camera]\nsource = "still.avi"\ncalibration = "bare.json"\nlatency_s = 0.012\nplane_offset_m = 0.1\n'
    camera = RealCamera(load_bench_experiment(write_experiment(tmp_path, extra)), tmp_path / "run.mcap")
    # relative paths from the experiment's folder; a bare calibration's plane: vertical x–z at y = plane_offset_m
    np.testing.assert_allclose(camera.to_world(np.array([[1000.0, 2000.0]])), [[1.0, 0.1, 2.0]])
    clock = SteppingClock()
    camera.open_with_clock(clock)
    try:
        run0_s, mono0_ns = camera._anchor
        assert run0_s == 5.004 and clock.calls == 4  # taken at the controller time's edge, not mid-period
        assert camera.stamp_ns(mono0_ns + 250_000_000) == round((5.004 - 0.012 + 0.25) * 1e9)
    finally:
        camera.close()
    assert camera.video == tmp_path / "run.camera.avi"


pytest.importorskip("rtde_control")


def test_real_backend_films_the_run_and_observes_the_strains_the_video_was_rendered_from(filmed, tmp_path):
    from tests.aiko.devices.ur import ur3_emulator_process as ur3

    host = "127.0.0.94"
    extra = camera_table(filmed) + f'\n[ft_sensor]\naddress = "{host}:49152"\nrate_hz = 500.0\n'
    experiment = load_bench_experiment(write_experiment(tmp_path, extra))
    out = tmp_path / "real.mcap"
    ft, _ = start_ft_emulator("--udp", f"{host}:49152", "--wrench", "0.1,0.2,1.5,0,0,0.01", "--rate", "500")
    try:
        with ur3.running(host, "--rate-hz", "200", "--unlock-delay", "0"):
            summary = record_bench_run(experiment, out, "real", host=host)
    finally:
        stop_ft_emulator(ft)
    cam = summary["sensors"]["camera"]
    assert cam["video"] == str(tmp_path / "real.camera.avi") and (tmp_path / "real.camera.avi").exists()
    capture = cam["capture"]
    assert capture["grabbed"] == capture["written"] == cam["frames"] + cam["frames_outside_run"]
    assert cam["frames"] >= 10  # 0 … 0.2 s at 50 fps, paced by the run
    assert capture["dropped"] == 0 and capture["gaps"] == 0 and capture["error"] is None
    assert cam["observer_failed"] == 0
    assert summary["sensors"]["ft_sensor"]["lost"] == 0

    truth = json.loads((filmed / "truth.json").read_text())
    reader = read_log(out)
    assert reader.has(WRENCH) and np.asarray(reader.channel(WRENCH)["force_mean_n"])[-1] == pytest.approx(
        [0.1, 0.2, 1.5], abs=1e-3
    )
    markers = reader.channel(MARKERS)
    t_s = np.asarray(markers["t_s"], dtype=float)
    frame = np.round(t_s * FPS).astype(int)
    np.testing.assert_allclose(t_s, frame / FPS, atol=1e-9)  # each frame stamped with its time in the film
    assert np.all(np.asarray(markers["visible"]))
    world = np.asarray(markers["world_m"], dtype=float)
    true_m = np.asarray(truth["markers_m"])[frame]
    assert np.max(np.linalg.norm(world - true_m, axis=2)) < 1.5e-4  # beads to 0.15 mm, as the camera's own test

    strain = reader.channel(OBSERVED_STRAIN)
    observed = np.asarray(strain["strain"], dtype=float)[:, :, 1]
    true = np.asarray(truth["strain_nodes"])[np.round(np.asarray(strain["t_s"]) * FPS).astype(int)][:, :, 1]
    assert np.max(np.abs(true)) > 4.0  # the 2 mm press bends the rod
    # against the simulator's strains the video was rendered from, at the control points 0 … n−1: the tip node is
    # left out (the quasi-static observer does not see the tip's table contact; docs/bench.md); measured 0.47 1/m,
    # which the observer on the exact beads and base pose has too (0.465): the camera path adds < 0.04 1/m
    assert np.max(np.abs(observed[:, :-1] - true[:, :-1])) < 0.6
    assert np.mean(np.abs(observed[:, :-1] - true[:, :-1])) < 0.05 * np.max(np.abs(true))
    # the camera path's own share: the same observer on the true beads of each frame and the base pose the bench
    # clamped the rod at for it (the arm's, logged with the estimate). Not the film's own base pose: on a loaded
    # machine the emulated arm trails the pre-rendered film, and that moved the strains by 0.10-0.12 1/m.
    from aiko.devices.camera.pipeline import observer_model
    from sim.cosserat.observer import observe_strains

    model = experiment.scenario.model
    arc = np.asarray(truth["marker_arc_m"])
    observer = observer_model(model.rod, model.n_sections, arc, model.gravity_m_s2)
    used_alpha = np.asarray(strain["base_alpha"], dtype=float)
    frames = np.round(np.asarray(strain["t_s"]) * FPS).astype(int)
    for j, est, alpha in zip(frames, observed, used_alpha, strict=True):
        exact = observe_strains(observer, alpha, arc, np.asarray(truth["markers_m"][j]), None, 1e-3)
        assert np.max(np.abs(est - exact.strain_nodes[:, 1])) < 0.1, j  # measured at most 0.04 1/m, quiet
    # what the lab then does with a real run: replay it on the simulator and compare as a real bench measures
    # (camera strains and the camera's tip slide, the F/T sensor's force); the slide is the last marker's, on both
    from aiko.robots.rod_bench.compare import compare_logs
    from aiko.robots.rod_bench.replay import replay_bench_log

    with pytest.raises(AikoError, match="a real run has its rod only from the camera"):
        compare_logs(out, out)  # a real log has no simulated rod: the plant sources are refused, saying why
    replay = tmp_path / "real-replay.mcap"
    replay_bench_log(out, replay)
    result = compare_logs(out, replay, force_a="ft", strain_a="camera", slide_a="camera")
    assert result.summary["sources"]["slide"] == ["camera", "plant"]
    assert result.summary["slide_arc_m"] == pytest.approx(arc[-1])
    last = np.asarray(truth["markers_m"])[frame][:, -1, :2]  # the film's last bead, at the frames of the log
    np.testing.assert_allclose(result.a.tip_slide_m, np.linalg.norm(last - last[0], axis=1), atol=2e-4)
    assert result.summary["strain_error_percent"] is not None and result.summary["tip_slide_end_m"][1] >= 0.0
