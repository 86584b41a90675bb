"""The paper's runs as the paper ran them: ``experiments/paper/*.toml`` are the runs of ``paper_runs`` (same gait,
same friction) with the continuous gait (``reference_hold = false``), while the robot's own experiments (and the HIL
bench) keep the 10 Hz hold."""

import numpy as np
import pytest

from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.gait import PRESETS
from aiko.robots.aiko.paper_runs import PAPER_EXPERIMENTS, RUNS, paper_model, run_as_paper, run_paper
from tests.conftest import EXPERIMENTS


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_paper_experiment_is_the_paper_run_with_the_continuous_gait(name):
    experiment = load_experiment(PAPER_EXPERIMENTS[name])
    sim = experiment.settings("sim").model_settings
    model, gait = paper_model(name)
    assert sim.reference_hold is False and experiment.default_backend == "sim"
    assert (sim.model.mu_longitudinal, sim.model.mu_transversal) == (model.mu_longitudinal, model.mu_transversal)
    assert experiment.gait.params == PRESETS[RUNS[name][0]]
    assert experiment.run.duration_s == 15.0 and experiment.tables["mocap"]["links"] == [6]


@pytest.mark.parametrize("file", ["lateral_undulation_orthotropic.toml", "lateral_undulation_isotropic.toml"])
def test_the_robots_own_experiments_keep_the_10_hz_hold(file):
    assert load_experiment(EXPERIMENTS / file).settings("sim").model_settings.reference_hold is True
    assert load_experiment(EXPERIMENTS / "sidewinding_hil.toml").run.reference_rate_hz == 10.0


def test_run_as_paper_follows_the_gait_between_the_10_hz_samples():
    held = run_paper("lateral_undulation_orthotropic", 0.15)
    continuous = run_as_paper("lateral_undulation_orthotropic", 0.15)
    gait = paper_model("lateral_undulation_orthotropic")[1]
    last = gait.references(0.15 - 0.00025)
    assert np.allclose(continuous.simulator.ref_angle[:, 0], last.angle_h_rad)  # the last step's sample
    assert np.allclose(held.simulator.ref_angle[:, 0], gait.references(0.1).angle_h_rad)  # held since t = 0.1 s
    assert not np.allclose(held.tracked_m[-1], continuous.tracked_m[-1], atol=1e-6)
