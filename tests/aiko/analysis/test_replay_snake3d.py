"""Replay of a snake3d run reproduces its trajectory (RMS < 1 mm). The snake3d simulator is part of the
repository, so a broken registration fails (never skips)."""

from pathlib import Path

import numpy as np
import pytest

import aiko.robots.aiko.mocap  # noqa: F401
from aiko.analysis.compare import compare_logs
from aiko.analysis.replay import replay
from aiko.log import LogReader
from aiko.robots.aiko.backends.sim import sim_model_names
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.plugins import backend_names, create_backend
from aiko.robots.aiko.run import RunOptions, record_run

REPO = Path(__file__).resolve().parents[3]

backend_names()  # loads the backend modules, which register their simulator models
pytestmark = pytest.mark.slow


def test_the_sim_backend_has_the_snake3d_model():
    """The replay below needs it; a registration lost by a broken import fails here instead of skipping."""
    assert "snake3d" in sim_model_names()


def test_replay_of_a_snake3d_sidewinding_run_reproduces_it(tmp_path):
    original, replayed = tmp_path / "sw.mcap", tmp_path / "sw-replay.mcap"
    experiment = load_experiment(
        REPO / "experiments" / "sidewinding.toml", {"run.duration_s": 3.0, "mocap.source": "simulated"}
    )
    record_run(experiment, original, RunOptions(backend="sim"), backend=create_backend("sim"))
    replay(original, replayed)
    a, b = LogReader(original), LogReader(replayed)
    pa, pb = a.channel("/mocap")["position_m"][:, 0], b.channel("/mocap")["position_m"][:, 0]
    rms = float(np.sqrt(np.mean(np.sum((pa - pb) ** 2, axis=1))))
    assert rms < 1e-3
    assert np.linalg.norm(pa[-1, :2] - pa[0, :2]) > 0.02  # the snake did move
    r = compare_logs(original, replayed).result
    assert abs(r["time_offset_s"]) < 0.05 and r["rms_position_error_m"] < 1e-3
