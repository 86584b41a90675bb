"""Qualitative outcomes of the paper's scenarios (long physics runs, marked slow)."""

from pathlib import Path

import numpy as np
import pytest

from aiko.rod_experiment import load_rod_experiment
from sim.cosserat import kinematics
from sim.cosserat.scenario import simulate

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "rod"


@pytest.mark.slow
@pytest.mark.parametrize("mu, stays", [(0.1, False), (0.2, True)])
def test_rod_thrown_on_bar_slides_off_at_low_friction_and_stays_at_mu_0_2(mu, stays):
    scenario = load_rod_experiment(
        EXPERIMENTS / "rod_on_bar.toml", {"contact.friction_coefficient": mu, "run.duration_s": 1.5}
    )
    result = simulate(scenario)
    z = kinematics(scenario.model, result.final_state.q).p[scenario.model.grid.node_index, 2]
    bar_top = 0.01
    assert (z.max() > bar_top - 0.03) == stays, z.max()


@pytest.mark.slow
def test_dropped_tapered_rod_comes_to_rest_lying_on_the_plane():
    scenario = load_rod_experiment(EXPERIMENTS / "rod_on_plane.toml", {"run.duration_s": 1.0})
    result = simulate(scenario)
    model, state = scenario.model, result.final_state
    p = kinematics(model, state.q).p[model.grid.contact_index]
    np.testing.assert_allclose(p[:, 2], model.contact_radius_m, atol=2e-4)  # every node lies on the plane
    assert np.max(np.abs(state.v)) < 0.05
    assert np.sum(result.final_info.contact_force_n[:, 2]) == pytest.approx(model.rod.mass_kg() * 9.81, rel=1e-3)
