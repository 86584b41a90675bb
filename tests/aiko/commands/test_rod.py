"""`aiko rod cantilever|incline|run|modes` in-process, the rod experiment files, and one-line errors."""

import json
from pathlib import Path

import pytest

from aiko.cli import main
from aiko.robots.rod_bench.experiment import load_rod_experiment

ROOT = Path(__file__).resolve().parents[3]
ROD_EXPERIMENTS = sorted((ROOT / "experiments" / "rod").glob("*.toml"))


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("load, deflection, shortening", [(1.0, 0.3017, 0.0564), (5.0, 0.7138, 0.3876)])
def test_cantilever_prints_the_elastica(capsys, load, deflection, shortening):
    assert main(["rod", "cantilever", "--pl2-ei", str(load), "--sections", "8", "--json"]) == 0
    out = _json(capsys)
    assert out["tip_deflection_over_L"] == pytest.approx(deflection, rel=5e-3)
    assert out["shortening_over_L"] == pytest.approx(shortening, rel=5e-3)
    if load == 1.0:
        assert out["tip_angle_rad"] == pytest.approx(0.4614, rel=5e-3)


def test_incline_reports_stick_and_slide(capsys):
    assert main(["rod", "incline", "--mu", "0.5", "--angle-deg", "20", "--json"]) == 0
    assert _json(capsys)["sticks"] is True
    assert main(["rod", "incline", "--mu", "0.2", "--angle-deg", "30", "--json"]) == 0
    out = _json(capsys)
    assert out["sticks"] is False
    assert out["acceleration_m_s2"] == pytest.approx(out["coulomb_acceleration_m_s2"], rel=0.03)


@pytest.mark.parametrize("path", ROD_EXPERIMENTS, ids=lambda p: p.stem)
def test_every_rod_experiment_file_loads(path):
    scenario = load_rod_experiment(path)
    assert scenario.duration_s > 0 and scenario.model.n_sections >= 1


def test_rod_run_writes_the_log_and_a_summary(tmp_path, capsys):
    out = tmp_path / "plane.mcap"
    code = main(
        [
            "rod",
            "run",
            str(ROOT / "experiments/rod/rod_on_plane.toml"),
            "--duration",
            "0.05",
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "plane.png"),
            "--json",
        ]
    )
    assert code == 0
    summary = _json(capsys)
    assert summary["steps"] == 10
    assert Path(summary["log_path"]).exists() and Path(summary["log_path"]).stat().st_size > 0
    assert (tmp_path / "plane.png").exists()
    from aiko.log import LogReader

    log = LogReader(summary["log_path"])
    assert {"/sim/rod/centreline", "/sim/rod/contacts", "/sim/rod/base_wrench"} <= set(log.topics)
    centreline = log.channel("/sim/rod/centreline").fields["centreline_m"]
    assert centreline.shape == (4, 21, 3)  # t = 0, 20 and 40 ms (50 Hz) and the last step; 21 strain nodes
    assert [e.kind for e in log.events()] == ["run_started", "run_finished"]


def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    assert main(["rod", "cantilever", "--pl2-ei", "-1"]) == 2
    assert "--pl2-ei must be in [0, 50]" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "experiments/rod/rod_on_plane.toml").read_text().replace("poisson_ratio", "poisson"))
    assert main(["rod", "run", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "rod.poisson: unknown key" in err and len(err.splitlines()) == 1
    assert main(["rod", "run", str(tmp_path / "missing.toml")]) == 2
    assert "rod experiment file not found" in capsys.readouterr().err  # the words every config file uses
    bad.write_text((ROOT / "experiments/rod/rod_on_plane.toml").read_text().replace("= 0.5", "= -0.5"))
    assert main(["rod", "run", str(bad)]) == 2
    assert "friction_coefficient" in capsys.readouterr().err


def test_modes_say_which_steps_keep_what_the_physics_keeps(capsys):
    plane = str(ROOT / "experiments/rod/rod_on_plane.toml")
    assert main(["rod", "modes", plane, "--dt", "0.00025", "0.005", "--json"]) == 0
    undamped = _json(capsys)
    assert undamped["rigid_modes"] == 6 and len(undamped["frequencies_hz"]) == 6 * 21  # free rod, n = 20
    assert undamped["physics_keeps"] == 126  # nothing damps an undamped rod
    erased = [s["kept_by_physics_erased_by_step"] for s in undamped["steps"]]
    assert 0 < erased[0] < erased[1]  # a coarser step erases more
    assert main(["rod", "modes", plane, "--set", "rod.damping_time_s=0.001", "--dt", "0.00025", "0.005", "--json"]) == 0
    damped = _json(capsys)
    assert damped["physics_keeps"] < 126 and damped["needed_dt_s"] > undamped["needed_dt_s"]
    assert damped["steps"][0]["kept_by_physics_erased_by_step"] == 0
    assert main(["rod", "modes", plane, "--dt", "0.005"]) == 0  # the table
    assert "implicit Euler keeps them all at dt <=" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dt", "0"], "every --dt must be in (0, --window]"),
        (["--window", "-1"], "--window must be > 0"),
        (["--set", "rod.damping_time_s=-1"], "damping_time_s"),
        (["--set", "rod.radius=1"], "unknown key"),
    ],
)
def test_modes_bad_inputs_are_one_line_errors(capsys, argv, message):
    assert main(["rod", "modes", str(ROOT / "experiments/rod/rod_on_plane.toml"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_plot_views_the_plane_the_rod_moves_in():
    """A rod bending in the horizontal plane (the tube) is drawn in x–y, a rod dropped on a plane in x–z."""
    import numpy as np

    from aiko.commands.rod import _view_axes

    s = np.linspace(0.0, 1.0, 11)
    straight = np.stack([s, 0 * s, 0 * s], axis=1)
    bent_in_xy = np.stack([s, s**2, 1e-6 * s], axis=1)
    dropped_in_xz = np.stack([s, 1e-6 * s, 0.5 - 0.4 * s], axis=1)
    assert _view_axes([straight, bent_in_xy]) == (0, 1)
    assert _view_axes([straight, dropped_in_xz]) == (0, 2)


@pytest.mark.parametrize(
    "key, value",
    [("gap_scale_m", 1e300), ("gap_scale_m", 0.0), ("slip_scale_m_s", 1e3), ("force_scale_n", 1e9)],
)
def test_slack_scales_outside_a_physical_range_are_rejected(key, value):
    """A scale so wide that contact would silently stop acting is a config error naming the key and its range."""
    from aiko.core.errors import ConfigError
    from aiko.robots.rod_bench.experiment import scenario_from_dict

    table = {
        "rod": {"length_m": 1.0, "radius_base_m": 0.01, "young_modulus_pa": 1e7, "density_kg_m3": 1000.0},
        "model": {"n_sections": 4},
        "contact": {key: value},
        "obstacle": [{"type": "plane"}],
    }
    with pytest.raises(ConfigError, match=key):
        scenario_from_dict(table, "x.toml")
    table["contact"][key] = 1e-3
    scenario_from_dict(table, "x.toml")  # a sane value passes
