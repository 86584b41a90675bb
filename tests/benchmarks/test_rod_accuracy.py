"""benchmarks/peers/rod_accuracy.py: the tip errors against each simulator's own reference, the cheapest run per
accuracy level and the report's shape (no times are asserted)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks.peers import rod_accuracy as ra


def _line(times_s: np.ndarray, speed_m_s: float) -> np.ndarray:
    """A tip moving along x at a constant speed, sampled at times_s."""
    return np.stack([speed_m_s * times_s, np.zeros_like(times_s), np.zeros_like(times_s)], axis=1)


def test_errors_are_taken_at_the_reference_steps_that_end_at_the_same_time():
    """Reference every 1 ms, run every 4 ms on the same straight path but 3 mm ahead, and 10 mm ahead at its second
    step: the errors are 3, 10, 3 mm. Comparing with the wrong reference sample (off by one) would see the path's
    1 mm per step."""
    ref_t = np.arange(1, 13) * 1e-3
    run_t = np.arange(1, 4) * 4e-3
    reference = _line(ref_t, 1.0)
    run = _line(run_t, 1.0) + [3e-3, 0.0, 0.0]
    run[1, 0] += 7e-3
    errors = ra.tip_errors_m(run, reference, stride=4)
    np.testing.assert_allclose(errors, [3e-3, 10e-3, 3e-3], atol=1e-15)
    summary = ra.error_summary(errors, 4e-3)
    assert summary["max_tip_error_mm"] == pytest.approx(10.0)
    assert summary["max_at_t_s"] == pytest.approx(8e-3)
    assert summary["final_tip_error_mm"] == pytest.approx(3.0)
    assert summary["rms_tip_error_mm"] == pytest.approx(math.sqrt((9 + 100 + 9) / 3))


def test_a_run_longer_than_its_reference_and_a_run_that_blew_up_are_refused():
    with pytest.raises(ValueError, match="outlasts"):
        ra.tip_errors_m(np.zeros((4, 3)), np.zeros((12, 3)), stride=4)
    summary = ra.error_summary(np.array([1e-3, np.nan]), 1e-3)
    assert all(value is None for value in summary.values())


def test_whole_multiple():
    assert ra.whole_multiple(0.005, 0.00025) == 20
    assert ra.whole_multiple(0.0025, 0.0025) == 1
    assert ra.whole_multiple(0.004, 0.0025) is None
    assert ra.whole_multiple(0.001, 0.0025) is None


OURS = [
    {"dt_s": 5e-4, "cpu_s": 1.6, "max_tip_error_mm": 4.0, "final_tip_error_mm": 0.8},
    {"dt_s": 1e-3, "cpu_s": 0.7, "max_tip_error_mm": 9.0, "final_tip_error_mm": 1.5},
    {"dt_s": 5e-3, "cpu_s": 0.2, "max_tip_error_mm": 16.0, "final_tip_error_mm": 10.0},
    {"dt_s": 2e-2, "cpu_s": None, "error": "ConvergenceError"},  # never qualifies
]
PEER = [
    {"dt_s": 2.3e-4, "cpu_s": 0.09, "max_tip_error_mm": 7.0, "final_tip_error_mm": 3.7},
    {"dt_s": 1.2e-4, "cpu_s": 0.18, "max_tip_error_mm": 10.0, "final_tip_error_mm": 1.2},
    {"dt_s": 2.9e-5, "cpu_s": 0.70, "max_tip_error_mm": 4.4, "final_tip_error_mm": 4.0},
    {"dt_s": 1e-4, "cpu_s": 0.01, "max_tip_error_mm": None, "final_tip_error_mm": None},  # blew up
]


def test_cost_at_a_level_is_each_sides_cheapest_run_within_it():
    levels = {row["level_mm"]: row for row in ra.cost_at_levels(OURS, PEER, [1.0, 2.0, 5.0, 10.0, 20.0])}
    five = levels[5.0]["max"]
    assert five["ours"] == {"dt_s": 5e-4, "cpu_s": 1.6, "max_tip_error_mm": 4.0}
    assert five["peer"]["dt_s"] == 2.9e-5  # the only one within 5 mm, although the dearest
    assert five["ratio"] == pytest.approx(0.70 / 1.6) and five["reason"] is None
    ten = levels[10.0]["max"]
    assert (ten["ours"]["dt_s"], ten["peer"]["dt_s"]) == (1e-3, 2.3e-4)
    assert ten["ratio"] == pytest.approx(0.09 / 0.7)
    assert levels[20.0]["max"]["ratio"] == pytest.approx(0.09 / 0.2)
    two_final = levels[2.0]["final"]  # separately from max: ours' 1 ms, PyElastica's base / 2
    assert (two_final["ours"]["dt_s"], two_final["peer"]["dt_s"]) == (1e-3, 1.2e-4)
    assert two_final["ratio"] == pytest.approx(0.18 / 0.7)


def test_a_level_met_by_one_side_or_neither_has_no_ratio_and_says_why():
    levels = {row["level_mm"]: row for row in ra.cost_at_levels(OURS, PEER, [1.0, 2.0])}
    one_max = levels[1.0]["max"]
    assert one_max["ours"] is None and one_max["peer"] is None and one_max["ratio"] is None
    assert one_max["reason"].startswith("met by neither") and "ours 4 mm, PyElastica 4.4 mm" in one_max["reason"]
    one_final = levels[1.0]["final"]  # ours 0.8 mm at 0.5 ms, PyElastica's best 1.2 mm
    assert one_final["ours"]["dt_s"] == 5e-4 and one_final["peer"] is None and one_final["ratio"] is None
    assert "no PyElastica run within 1 mm" in one_final["reason"]
    notes = ra.neither_notes(list(levels.values()))
    assert notes == [
        "the 1 mm level (max tip error) is met by neither simulator",
        "the 2 mm level (max tip error) is met by neither simulator",
    ]
    alone = ra.cost_at_levels(OURS, None, [5.0])[0]["max"]
    assert alone["ours"]["dt_s"] == 5e-4 and alone["peer"] is None and alone["reason"] == "PyElastica not run"


SHORT = ["--duration", "0.05", "--ours-dt", "0.005", "0.01", "--ours-reference-dt", "0.0025", "--json"]


def _check_rows(rows: list[dict], steps: list[int]) -> None:
    assert [r["steps"] for r in rows] == steps
    for r in rows:
        for key in ("max_tip_error_mm", "final_tip_error_mm", "rms_tip_error_mm", "cpu_s"):
            assert math.isfinite(r[key]) and r[key] >= 0, (key, r)
        assert r["reproducible"] is True and len(r["final_tip_m"]) == 3


def test_ours_only_end_to_end(capsys):
    """0.05 s of the drop at 5 and 10 ms against 2.5 ms: finite errors, the coarser step further off."""
    assert ra.main([*SHORT, "--no-peer", "--levels", "0.001", "100", "--check-references"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["duration_s"] == 0.05 and out["overrides"] == {"run.duration_s": 0.05} and out["peer"] is None
    assert out["ours"]["reference"]["steps"] == 20 and out["ours"]["reference"]["dt_s"] == 0.0025
    rows = out["ours"]["runs"]
    _check_rows(rows, [10, 5])
    assert rows[1]["max_tip_error_mm"] > rows[0]["max_tip_error_mm"] > 0
    assert all(r["iterations"] >= r["steps"] and r["substeps"] >= r["steps"] for r in rows)
    assert [row["level_mm"] for row in out["levels"]] == [0.001, 100.0]
    assert out["levels"][1]["max"]["ours"]["dt_s"] == 0.01  # the cheaper step is within 100 mm
    assert out["levels"][1]["max"]["reason"] == "PyElastica not run"
    assert any("--no-peer" in note for note in out["notes"])
    check = out["ours"]["reference_check"]  # the 2.5 ms reference against 1.25 ms: not converged to 1 µm
    assert check["dt_s"] == 0.0025 and check["half_step_dt_s"] == 0.00125
    assert 0 < check["max_tip_error_mm"] < rows[0]["max_tip_error_mm"]
    assert any("when its step is halved" in note for note in out["notes"])


def test_pyelastica_end_to_end(capsys):
    pytest.importorskip("elastica")
    args = [*SHORT[:2], "--ours-dt", "0.01", "--ours-reference-dt", "0.005", "--json"]
    assert ra.main([*args, "--peer-divisors", "1", "2", "--peer-reference-divisor", "4", "--check-references"]) == 0
    out = json.loads(capsys.readouterr().out)
    peer = out["peer"]
    n_base = round(0.05 / peer["base_dt_s"])  # whole base steps: 213
    assert peer["reference"]["steps"] == 4 * n_base and peer["sim_time_s"] == pytest.approx(n_base * peer["base_dt_s"])
    _check_rows(peer["runs"], [n_base, 2 * n_base])
    assert [r["divisor"] for r in peer["runs"]] == [1, 2]
    assert peer["runs"][0]["final_tip_error_mm"] > 0
    assert peer["reference_check"]["half_step_dt_s"] == pytest.approx(peer["base_dt_s"] / 8)
    assert math.isfinite(peer["reference_check"]["final_tip_error_mm"])
    assert math.isfinite(out["references_final_tip_distance_mm"])
    assert all(row["max"]["reason"] != "PyElastica not run" for row in out["levels"])


@pytest.mark.parametrize(
    "bad",
    [
        ["--ours-dt", "0.004"],  # not a multiple of 2.5 ms
        ["--ours-dt", "0.0075", "--ours-reference-dt", "0.0025"],  # 0.05 s is not a multiple of 7.5 ms
        ["--peer-divisors", "3", "--peer-reference-divisor", "16"],
        ["--set", "rod.no_such_key=1"],
        ["--set", "no_equals_sign"],
    ],
)
def test_bad_arguments_are_refused(bad):
    with pytest.raises(SystemExit):
        ra.main([*SHORT, "--no-peer", *bad])


def test_without_pyelastica_ours_is_reported_alone_with_a_note(capsys, monkeypatch):
    real = ra.importlib.util.find_spec
    monkeypatch.setattr(ra.importlib.util, "find_spec", lambda name, *a: None if name == "elastica" else real(name, *a))
    assert ra.main([*SHORT[:-1], "--ours-dt", "0.01"]) == 0  # the table, not JSON
    text = capsys.readouterr().out
    assert "PyElastica not installed" in text and "| ours | 10 |" in text and "PyElastica 1" not in text
