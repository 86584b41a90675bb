"""`aiko chain validate` through aiko.cli.main: JSON fields, and one-line errors with exit status 2."""

import json

import pytest

from aiko.cli import main


def test_validate_json_reports_errors_energy_and_parameters(capsys):
    rc = main(["chain", "validate", "--motion", "accordion", "--bodies", "8", "--duration", "0.05", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["motion"] == "accordion" and out["bodies"] == 8 and out["axes"] == "z" * 8
    assert out["link_length_m"] == 0.122 and out["dt_s"] == 1e-3
    # accordion (horizontal plane) replays to round-off; the passive run conserves energy
    assert out["max_abs_angle_error_rad"] < 1e-10
    assert out["sum_abs_angle_error_rad"] <= out["sum_abs_angle_error_all_samples_rad"]
    assert out["max_round_trip_accel_error_rad_s2"] < 1e-9
    assert out["energy_drift_j"] < 1e-6 * max(out["energy_scale_j"], 1e-9) + 1e-12
    assert out["paper_sum_abs_angle_error_rad"] == 3.1434e-05
    assert out["integration_success"] is True
    assert out["meaningful_horizon_s"] is None  # never above 1e-6 rad


def test_validate_reports_the_horizon_and_plots(capsys, tmp_path):
    png = tmp_path / "err.png"
    argv = ["chain", "validate", "--motion", "cobra", "--bodies", "20", "--duration", "0.3", "--no-energy"]
    assert main([*argv, "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # under gravity the open-loop replay leaves 1e-6 rad between 0.1 s and 0.3 s (docs/chain.md)
    assert 0.1 <= out["meaningful_horizon_s"] < 0.3
    assert out["max_abs_angle_error_rad"] > 1e-6
    assert png.stat().st_size > 10_000


def test_validate_with_solve_ivp_and_axes_override(capsys):
    argv = ["chain", "validate", "--motion", "cobra", "--bodies", "4", "--duration", "0.02", "--dt", "0.01"]
    assert main([*argv, "--method", "DOP853", "--axes", "zzzz", "--no-energy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["axes"] == "zzzz" and out["energy_drift_j"] is None and out["method"] == "DOP853"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--bodies", "0"], "--bodies must be in 1..500"),
        (["--duration", "0.1", "--dt", "0.03"], "whole number of --dt"),
        (["--dt", "-1"], "--dt must be a positive number"),
        (["--link-mass", "0"], "--link-mass must be > 0"),
        (["--horizon-tolerance", "0"], "--horizon-tolerance must be a positive angle"),
        (["--bodies", "3", "--axes", "zq"], "axes must name one generator per body: 3 characters"),
        (["--bodies", "3", "--duration", "0.01", "--method", "euler"], "method must be 'rk4' or one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    assert main(["chain", "validate", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("aiko: ")
