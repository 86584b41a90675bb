"""Rod experiment files: the solver's settings in `[run]` reach the scenario, with defaults and ranges."""

import pytest

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.experiment import scenario_from_dict
from sim.cosserat.newton import NewtonSettings

BASE = {
    "rod": {"length_m": 1.0, "radius_base_m": 0.01, "young_modulus_pa": 1e7, "density_kg_m3": 1000.0},
    "model": {"n_sections": 4},
}


def test_the_newton_settings_of_run_reach_the_scenario():
    default = scenario_from_dict(BASE, "x.toml").newton
    assert (default.tolerance, default.refresh_ratio) == (NewtonSettings().tolerance, NewtonSettings().refresh_ratio)
    chosen = scenario_from_dict({**BASE, "run": {"newton_tolerance": 1e-6, "newton_refresh_ratio": 0.2}}, "x.toml")
    assert (chosen.newton.tolerance, chosen.newton.refresh_ratio) == (1e-6, 0.2)


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.5])
def test_a_refresh_ratio_outside_0_to_1_is_refused_by_name(ratio):
    with pytest.raises(ConfigError, match="newton_refresh_ratio"):
        scenario_from_dict({**BASE, "run": {"newton_refresh_ratio": ratio}}, "x.toml")
