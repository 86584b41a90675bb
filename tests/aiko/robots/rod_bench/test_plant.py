"""The rod plant's tick timing (aiko.robots.rod_bench.plant.PlantTiming): wall and CPU time kept apart."""

from __future__ import annotations

import pytest

from aiko.robots.rod_bench.plant import PlantTiming


def test_summary_gives_wall_and_cpu_distributions_in_ms() -> None:
    timing = PlantTiming()
    for k in range(100):
        timing.add(duration_s=1e-3 * (k + 1), cpu_duration_s=0.5e-3 * (k + 1))
    s = timing.summary()
    assert s["calls"] == 100
    assert s["median_ms"] == pytest.approx(50.5)
    assert s["max_ms"] == pytest.approx(100.0)
    assert s["mean_ms"] == pytest.approx(50.5)
    assert s["p99_ms"] == pytest.approx(99.01)
    assert s["cpu_median_ms"] == pytest.approx(25.25)
    assert s["cpu_max_ms"] == pytest.approx(50.0)
    assert s["cpu_p99_ms"] == pytest.approx(49.505)


def test_without_cpu_times_the_summary_has_no_cpu_keys_and_an_empty_one_says_zero_calls() -> None:
    assert PlantTiming().summary() == {"calls": 0}
    timing = PlantTiming()
    timing.add(2e-3)
    assert timing.summary()["median_ms"] == pytest.approx(2.0)
    assert not any(key.startswith("cpu_") for key in timing.summary())


def test_a_summary_is_due_once_every_second_of_ticks() -> None:
    timing = PlantTiming()
    due = [timing.add(1e-3, 1e-3) for _ in range(3 * PlantTiming.SUMMARY_EVERY)]
    assert [i + 1 for i, d in enumerate(due) if d] == [200, 400, 600]
