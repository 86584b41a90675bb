"""``aiko identify`` with a known truth: a 1.5 s snake3d run recorded with μ_T = 0.35 is fitted back from 0.5 by
replays on a local Dask cluster; a torque limit and free play injected into a HIL run are fitted back together
with two starts; bad flags are one line."""

import json
import tomllib

import numpy as np
import pytest

from aiko.cli import main
from aiko.core.errors import ConfigError
from aiko.sweep.identify import parse_bounds, parse_values, start_points
from tests.conftest import EXPERIMENTS

TRUTH = 0.35


@pytest.fixture(scope="module")
def truth_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("identify") / "truth.mcap"
    args = ["run", str(EXPERIMENTS / "lateral_undulation_orthotropic.toml"), "--duration", "1.5"]
    assert main([*args, "--set", f"sim.mu_transversal={TRUTH}", "--out", str(log), "--no-report", "--json"]) == 0
    return log


def test_a_friction_coefficient_is_identified_back_within_10_percent(truth_log, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "out"
    args = ["identify", str(truth_log), "--params", "sim.mu_transversal", "--bounds", "sim.mu_transversal=0.1:1.0"]
    assert main([*args, "--start", "sim.mu_transversal=0.5", "--workers", "1", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    fitted = summary["parameters"]["sim.mu_transversal"]
    assert fitted["start"] == 0.5 and abs(fitted["value"] - TRUTH) < 0.1 * TRUTH
    assert fitted["std"] > 0 and summary["at_bound"] == []
    before, after = summary["residual_before"], summary["residual_after"]
    assert after["cost"] < 0.2 * before["cost"] and after["position_rms_mm"] < before["position_rms_mm"]
    overlay = tomllib.loads((out / "identified.toml").read_text())
    assert overlay == {"sim": {"mu_transversal": pytest.approx(fitted["value"], rel=1e-5)}}
    assert json.loads((out / "identify.json").read_text())["replays"] >= summary["evaluations"]


def test_free_play_of_emulated_modules_is_identified_from_a_hil_log(tmp_path, capsys):
    """HIL on the inertia plant (the CAN driver, emulated joint modules with 2.0 deg of free play): no motion
    capture, so the joint angles alone; replays on the same HIL backend."""
    experiment = tmp_path / "hil.toml"
    experiment.write_text(
        f'robot = "{EXPERIMENTS / "robots/aiko.toml"}"\n[gait]\npreset = "sidewinding"\nsoft_start = true\n'
        '[run]\nduration_s = 1.5\n[backend]\ndefault = "hil"\n[hil]\nplant = "inertia"\nfree_play_deg = 2.0\n'
    )
    log = tmp_path / "hil.mcap"
    assert main(["run", str(experiment), "--out", str(log), "--no-report", "--json"]) == 0
    capsys.readouterr()
    args = ["identify", str(log), "--backend", "hil", "--params", "hil.free_play_deg"]
    args += ["--bounds", "hil.free_play_deg=0.0:5.0", "--start", "hil.free_play_deg=1.0"]
    assert main([*args, "--workers", "1", "--out", str(tmp_path / "out"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert abs(summary["parameters"]["hil.free_play_deg"]["value"] - 2.0) < 0.1 * 2.0
    before, after = summary["residual_before"], summary["residual_after"]
    assert before["position_rms_mm"] is None and after["joint_rms_deg"] < 0.5 * before["joint_rms_deg"]


def test_a_torque_limit_and_free_play_injected_into_hil_are_identified_together(tmp_path, capsys):
    """HIL on the inertia plant with the modules' torque limit set to 1.0 N m (the drives' current limit, binding
    in part of the run: the emulator counts it) and 2.0 deg of free play: both fitted back within 10 % from 2.2 N m
    and 1.0 deg, two least-squares starts (the given one and a Latin-hypercube one) sharing the cluster."""
    experiment = tmp_path / "hil.toml"
    experiment.write_text(
        f'robot = "{EXPERIMENTS / "robots/aiko.toml"}"\n[gait]\npreset = "sidewinding"\nsoft_start = true\n'
        '[run]\nduration_s = 1.5\n[backend]\ndefault = "hil"\n'
        '[hil]\nplant = "inertia"\nfree_play_deg = 2.0\ntorque_limit_nm = 1.0\n'
    )
    log = tmp_path / "hil.mcap"
    assert main(["run", str(experiment), "--out", str(log), "--no-report", "--json"]) == 0
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.05 < run["emulator"]["current_limited_fraction"] < 0.5  # the limit binds, part of the time
    args = ["identify", str(log), "--backend", "hil", "--params", "hil.torque_limit_nm,hil.free_play_deg"]
    args += ["--bounds", "hil.torque_limit_nm=0.3:3.0,hil.free_play_deg=0.0:5.0"]
    args += ["--start", "hil.torque_limit_nm=2.2,hil.free_play_deg=1.0", "--starts", "2", "--seed", "1"]
    assert main([*args, "--workers", "1", "--out", str(tmp_path / "out"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    fitted = summary["parameters"]
    assert abs(fitted["hil.torque_limit_nm"]["value"] - 1.0) < 0.1 * 1.0
    assert abs(fitted["hil.free_play_deg"]["value"] - 2.0) < 0.1 * 2.0
    assert len(summary["starts"]) == 2 and summary["starts"][0]["start"]["hil.torque_limit_nm"] == 2.2
    best = summary["starts"][summary["best_start"]]
    assert best["cost"] == min(s["cost"] for s in summary["starts"]) == pytest.approx(summary["residual_after"]["cost"])
    assert summary["evaluations"] == sum(s["evaluations"] for s in summary["starts"])


def test_bad_flags_are_one_line(truth_log, capsys):
    capsys.readouterr()
    base = ["identify", str(truth_log), "--params", "sim.mu_transversal"]
    assert main([*base, "--bounds", "sim.mu_rolling=0:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not one of --params" in err
    assert main(["identify", str(truth_log), "--params", "sim.mu_x", "--bounds", "sim.mu_x=0:1"]) == 2
    assert "sim.mu_x" in capsys.readouterr().err
    assert main(["identify", str(truth_log.parent / "none.mcap"), "--params", "a", "--bounds", "a=0:1"]) == 2
    assert "log not found" in capsys.readouterr().err


def test_bounds_and_values_parse():
    assert parse_bounds("a=-1:2.5, b=0:1", ["a", "b"]) == {"a": (-1.0, 2.5), "b": (0.0, 1.0)}
    assert parse_values("a=3", ["a", "b"], "--start") == {"a": 3.0}
    for text, match in (("a=1:0", "above"), ("a=x:1", "KEY=LOW:HIGH"), ("", "give the bounds of a")):
        with pytest.raises(ConfigError, match=match):
            parse_bounds(text, ["a"])


def test_start_points_are_the_given_start_then_a_seeded_latin_hypercube():
    low, high = np.array([0.0, 10.0]), np.array([1.0, 30.0])
    points = start_points(np.array([0.5, 50.0]), low, high, 5, seed=3)
    assert points.shape == (5, 2) and points[0].tolist() == [0.5, 30.0]  # the start, clipped into the bounds
    rest = (points[1:] - low) / (high - low)
    for column in rest.T:  # one start in each quarter of every range: a Latin hypercube
        assert sorted(np.floor(column * 4).astype(int).tolist()) == [0, 1, 2, 3]
    assert np.array_equal(points, start_points(np.array([0.5, 50.0]), low, high, 5, seed=3))
    assert not np.array_equal(points, start_points(np.array([0.5, 50.0]), low, high, 5, seed=4))
    assert start_points(np.array([0.2, 20.0]), low, high, 1, seed=0).tolist() == [[0.2, 20.0]]
    with pytest.raises(ConfigError, match="--starts must be at least 1"):
        start_points(np.array([0.2, 20.0]), low, high, 0, seed=0)


def test_multi_start_flags_are_checked(truth_log, capsys):
    base = ["identify", str(truth_log), "--params", "sim.mu_transversal", "--bounds", "sim.mu_transversal=0.1:1"]
    for flags, match in ((["--starts", "0"], "--starts must be in [1, 256]"), (["--step", "0.7"], "--step must be")):
        capsys.readouterr()
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and match in err
