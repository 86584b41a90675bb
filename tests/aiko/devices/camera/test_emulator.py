"""``aiko emulate camera`` in its own process films the simulated stick test; the video read back through
FrameSource, tracked and observed, matches the truth it wrote."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aiko.devices.camera.calibration import PlaneCalibration
from aiko.devices.camera.pipeline import StrainPipeline, observer_model
from aiko.devices.camera.plane import MarkerPlane
from aiko.devices.camera.red_markers import PixelsToWorld, RedMarkerSettings, RedMarkerTracker
from aiko.devices.camera.source import FrameSource
from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat.observer import observe_strains

REPO = Path(__file__).resolve().parents[4]
EXPERIMENT = REPO / "experiments/rod/bench_stick.toml"


def emulate(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "camera", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


@pytest.fixture(scope="module")
def filmed(tmp_path_factory):
    d = tmp_path_factory.mktemp("camera")
    done = emulate(
        str(EXPERIMENT),
        "--duration",
        "0.1",
        "--out",
        str(d / "bench.avi"),
        "--truth-out",
        str(d / "truth.json"),
        "--calibration-out",
        str(d / "camera.json"),
    )
    assert done.returncode == 0, done.stderr
    assert "11 frames at 100 fps, 8 beads" in done.stdout
    return d


def test_filmed_video_tracks_to_the_truth_and_the_observer_recovers_the_strains(filmed):
    truth = json.loads((filmed / "truth.json").read_text())
    cam = json.loads((filmed / "camera.json").read_text())
    plane = MarkerPlane(*(np.array(cam["plane"][k]) for k in ("origin_m", "u_axis", "v_axis")))
    to_world = PixelsToWorld(PlaneCalibration.from_dict(cam["calibration"]), plane)
    arc = np.array(truth["marker_arc_m"])
    tracker = RedMarkerTracker(RedMarkerSettings(len(arc)), marker_arc_m=arc, to_world=to_world)
    rod = load_rod_experiment(EXPERIMENT).model
    pipeline = StrainPipeline(
        tracker,
        observer_model(rod.rod, rod.n_sections, arc),
        arc,
        lambda t: truth["base_alpha"][round(t * 100)],
        marker_compliance_m_per_n=1e-3,
    )
    with FrameSource(str(filmed / "bench.avi")) as source:
        estimates = [pipeline.process(f) for f in source if f.index in (0, 10)]
    assert [e.t_ns for e in estimates] == [0, 100_000_000]  # the file's frame times
    for e, j in zip(estimates, (0, 10), strict=True):
        assert e.markers.visible.all()
        error_mm = 1e3 * np.linalg.norm(e.markers.world_m - np.array(truth["markers_m"][j]), axis=1)
        assert error_mm.max() < 0.15
        # the camera's share: the observer on the tracked beads against the observer on the true beads
        exact = observe_strains(
            pipeline.model, np.array(truth["base_alpha"][j]), arc, np.array(truth["markers_m"][j]), None, 1e-3
        )
        assert np.abs(e.strain_nodes[:, 1:3] - exact.strain_nodes[:, 1:3]).max() < 0.1  # 1/m
        # against the simulator: the rod bends up to 0.8 1/m here; the last two control points (X ≥ 0.183 m) are
        # left out — the quasi-static observer does not see the tip's impact on the table at t = 0.1 s
        true_kappa = np.array(truth["strain_nodes"][j])[:, 1]
        assert np.abs(e.strain_nodes[:-2, 1] - true_kappa[:-2]).max() < 0.15


def test_bad_arguments_are_one_line_errors(tmp_path):
    done = emulate(str(EXPERIMENT), "--out", str(tmp_path / "x.mp4"))
    assert done.returncode == 2 and "use .avi or .mkv" in done.stderr
    done = emulate(str(EXPERIMENT), "--out", str(tmp_path / "x.avi"), "--fps", "70")
    assert done.returncode == 2 and "must divide the simulator rate 200 Hz" in done.stderr
