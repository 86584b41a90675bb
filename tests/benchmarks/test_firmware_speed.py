"""benchmarks/firmware_speed.py: the firmware's speed and cycle budget, with the harness's CPU time counted."""

from __future__ import annotations

import json

from tests.firmware_build import require_firmware


def test_a_short_lockstep_measurement_counts_both_processes(capsys):
    """0.5 s of one module: the simulated time is exact in lockstep, the harness process's CPU time is counted (a
    running child is not in RUSAGE_CHILDREN, so it was left out before) and the module followed its references."""
    require_firmware()
    from benchmarks import firmware_speed

    assert firmware_speed.main(["--modules", "1", "--duration", "0.5", "--mode", "lockstep"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simulated_s"] == 0.5 and out["state"] == ["ENABLED"]
    assert out["cpu_s_harness"] > 0.0 and abs(out["cpu_s"] - out["cpu_s_python"] - out["cpu_s_harness"]) <= 0.002
    assert out["accepted_references"] == [5] and out["tick_overruns"] == 0
    assert 0.0 < out["awake_fraction_mean"] < 1.0 and 0 < out["max_awake_cycles_per_ms"] <= 16_000
