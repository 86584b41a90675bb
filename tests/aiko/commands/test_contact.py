"""`aiko contact example` and `aiko rhex flip`, in-process through aiko.cli.main."""

import json

import numpy as np
import pytest

from aiko.cli import main
from sim.planar_contact.examples import painleve_critical_mu


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_two_link_reports_rank8_two_ambiguities(capsys):
    out = run_json(capsys, ["contact", "example", "two_link", "--json"])
    fff = next(m for m in out["modes"] if m["mode"] == "FFF")
    assert fff["rank_A"] == 8 and fff["ambiguity_dimension"] == 2 and fff["consistent"]
    assert np.allclose(fff["qdd"], 0.0, atol=1e-9)
    assert out["consistent_modes"] >= 1
    assert all(m["mode"] != "LFF" for m in out["modes"])  # kinematically infeasible


@pytest.mark.parametrize("factor,expected", [(1.05, 0), (0.2, 1)])
def test_painleve_consistent_mode_count(capsys, factor, expected):
    mu = painleve_critical_mu(np.radians(50.0)) * factor
    out = run_json(capsys, ["contact", "example", "painleve", "--mu", str(mu), "--theta-deg", "50", "--json"])
    assert out["consistent_modes"] == expected


def test_block_threshold_via_tau(capsys):
    below = run_json(capsys, ["contact", "example", "block", "--mu", "0.5", "--tau", "4.0", "--json"])
    above = run_json(capsys, ["contact", "example", "block", "--mu", "0.5", "--tau", "6.0", "--json"])
    assert [m["mode"] for m in below["modes"] if m["consistent"]] == ["F"]
    (r,) = [m for m in above["modes"] if m["consistent"]]
    assert r["mode"] == "R" and r["qdd"][0] == pytest.approx(6.0 - 0.5 * 9.81)


def test_text_output_lists_modes(capsys):
    assert main(["contact", "example", "table"]) == 0
    text = capsys.readouterr().out
    assert "FF" in text and "consistent modes:" in text


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["contact", "example", "block", "--mu", "-1"], "--mu"),
        (["contact", "example", "block", "--theta-deg", "30"], "painleve"),
        (["contact", "example", "painleve", "--theta-deg", "95"], "theta_deg"),
        (["rhex", "flip", "--controller", "blind", "--mu-toe", "-0.1"], "--mu-toe"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiko: ") and needle in err and err.count("\n") == 1


def test_rhex_flip_json_and_plot(capsys, tmp_path):
    png = tmp_path / "flip.png"
    out = run_json(
        capsys, ["rhex", "flip", "--controller", "maximal_thrust", "--mu-toe", "0.6", "--plot", str(png), "--json"]
    )
    for key in ("completed", "flip_time_s", "pitch_accel_rmse", "controller_step_ms_p95"):
        assert key in out
    assert out["completed"] and out["paper_pitch_accel_rmse"] == 6.68
    assert png.stat().st_size > 1000


def test_block_torque_domains_are_the_friction_intervals(capsys):
    out = run_json(capsys, ["contact", "example", "block", "--mu", "0.5", "--json"])
    limit = 0.5 * 9.81
    by_mode = {m["mode"]: m for m in out["modes"]}
    assert by_mode["F"]["torque_domain"]["interval"] == pytest.approx([-limit, limit])
    assert by_mode["R"]["torque_domain"]["interval"][0] == pytest.approx(limit)
    assert by_mode["R"]["torque_domain"]["interval"][1] is None
    assert "torque_domain" not in by_mode["S"]  # separating is consistent for no push at all
    assert out["ambiguous_mode_pairs"] == []  # F and R only share the boundary point


def test_two_link_unambiguous_domain_excludes_the_overlap(capsys):
    out = run_json(capsys, ["contact", "example", "two_link", "--json"])
    fff = next(m for m in out["modes"] if m["mode"] == "FFF")
    full = fff["torque_domain"]["interval"]
    pieces = [p["interval"] for p in fff["unambiguous_torque_domain"]]
    assert ["FFF", "FSL"] in out["ambiguous_mode_pairs"]
    assert len(pieces) == 1 and pieces[0][0] > full[0] and pieces[0][1] == pytest.approx(full[1])
