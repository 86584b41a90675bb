"""benchmarks/cosserat_accuracy.py: the tip error against the fine-step run is measured at matching times."""

from __future__ import annotations

import json

import pytest

from benchmarks import cosserat_accuracy


def test_accuracy_report_compares_the_tip_at_matching_times(capsys):
    """0.05 s of the drop (the rod still falls freely): the reference's own dt has zero error, a coarser dt a
    positive one, and each row counts its steps."""
    assert (
        cosserat_accuracy.main(["--duration", "0.05", "--reference-dt", "0.005", "--dt", "0.005", "0.01", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    same, coarse = out["rows"]
    assert same["max_tip_error_mm"] == 0.0 and same["steps"] == 10
    assert coarse["max_tip_error_mm"] > 0.0 and coarse["steps"] == 5


def test_a_dt_that_is_not_a_multiple_of_the_reference_is_rejected():
    with pytest.raises(SystemExit):
        cosserat_accuracy.main(["--duration", "0.05", "--reference-dt", "0.004", "--dt", "0.005"])
