"""`[[constraint]]` tables in rod experiment files: parsed into the model, validated strictly."""

import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.experiment import scenario_from_dict
from sim.cosserat.scenario import simulate

BASE = {
    "rod": {"length_m": 1.0, "radius_base_m": 0.01, "young_modulus_pa": 1e7, "density_kg_m3": 1000.0},
    "model": {"n_sections": 4},
}


def _with(*constraints):
    return {**BASE, "constraint": list(constraints)}


def test_constraints_reach_the_model():
    sc = scenario_from_dict(
        _with(
            {"type": "position", "x_m": 1.0, "position_m": [1.0, 0.0, 0.0]},
            {"type": "fixed", "x_m": 0.5, "position_m": [0.5, 0.0, 0.0], "rotation_deg": [0.0, 0.0, 90.0]},
        )
    )
    pin, clamp = sc.model.constraints
    assert (pin.kind, pin.x_m, clamp.kind) == ("position", 1.0, "fixed")
    np.testing.assert_allclose(clamp.rotation, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    np.testing.assert_allclose(sc.model.grid.x_points[sc.model.constraint_index], [1.0, 0.5])


@pytest.mark.parametrize(
    "table, match",
    [
        ({"type": "hinge", "x_m": 1.0, "position_m": [1, 0, 0]}, "type"),
        ({"type": "position", "x_m": 1.0, "position_m": [1, 0, 0], "axis": [0, 0, 1]}, "axis"),
        ({"type": "position", "x_m": 1.0, "position_m": [1, 0, 0], "rotation_deg": [0, 0, 5]}, "rotation_deg"),
        ({"type": "position", "x_m": 0.0, "position_m": [0, 0, 0]}, "x_m"),
        ({"type": "position", "x_m": 1.0, "position_m": [1, 0]}, "position_m"),
    ],
)
def test_bad_constraint_tables_are_rejected(table, match):
    with pytest.raises(ConfigError, match=match):
        scenario_from_dict(_with(table), "x.toml")


def test_release_drops_the_constraints_and_max_halvings_reaches_the_scenario(monkeypatch):
    """A pinned rod released at 0.02 s: pinned before, free after; the release needs a clamped base or a
    constraint, and max_halvings is read, range-checked and handed to every step."""
    import sim.cosserat.scenario as scenario_module

    real_step, halvings = scenario_module.step, []

    def recording_step(model, state, dt_s, settings, alpha_next, max_halvings, on_newton_iterate):
        halvings.append(max_halvings)
        return real_step(model, state, dt_s, settings, alpha_next, max_halvings, on_newton_iterate)

    monkeypatch.setattr(scenario_module, "step", recording_step)
    pinned = {
        **_with({"type": "position", "x_m": 1.0, "position_m": [1.0, 0.0, 0.0]}),
        "model": {"n_sections": 4, "base": "free"},
        "run": {"dt_s": 0.01, "duration_s": 0.05, "release_at_s": 0.02, "max_halvings": 7},
    }
    sc = scenario_from_dict(pinned, "x.toml")
    assert sc.max_halvings == 7 and sc.release_at_s == 0.02
    seen = []
    simulate(sc, lambda s: seen.append((s.t_s, len(s.model.constraints), s.model.base)))
    assert [c for t, c, _ in seen if t < 0.02 - 1e-9] == [1, 1]  # t = 0 and 0.01
    assert all(c == 0 and base == "free" for t, c, base in seen if t > 0.02 + 1e-9)
    assert halvings == [7] * 5
    with pytest.raises(ConfigError, match="release_at_s"):
        scenario_from_dict({**BASE, "model": {"n_sections": 4, "base": "free"}, "run": {"release_at_s": 0.1}})
    with pytest.raises(ConfigError, match="max_halvings"):
        scenario_from_dict({**BASE, "run": {"max_halvings": 13}}, "x.toml")
