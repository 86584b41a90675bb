"""Small bench experiment files for the tests (the Table II rod on a coarse grid, a short press)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
STICK = REPO / "experiments" / "rod" / "bench_stick.toml"


def write_experiment(tmp_path: Path, extra: str = "", name: str = "bench_test.toml") -> Path:
    """bench_stick.toml on 4 sections with a 0.2 s press starting at once (fast enough for a unit test)."""
    text = STICK.read_text().split("# The bench around the rod")[0]  # the tests add their own [bench] / [ur3]
    text = text.replace("n_sections = 12", "n_sections = 4").replace("m_sections = 12", "m_sections = 4")
    text = text.replace(
        "times_s = [0.0, 1.0, 4.0]\npositions_m = [[0.0, 0.0, 0.1929], [0.0, 0.0, 0.1929], [0.0, 0.0, 0.1629]]\n"
        "rotations_deg = [[0.0, 70.0, 0.0], [0.0, 70.0, 0.0], [0.0, 70.0, 0.0]]",
        "times_s = [0.0, 0.04, 0.2]\npositions_m = [[0.0, 0.0, 0.1929], [0.0, 0.0, 0.1929], [0.0, 0.0, 0.1909]]\n"
        "rotations_deg = [[0.0, 70.0, 0.0], [0.0, 70.0, 0.0], [0.0, 70.0, 0.0]]",
    )
    text = text.replace("duration_s = 4.0", "duration_s = 0.2")
    assert "n_sections = 4" in text and "times_s = [0.0, 0.04, 0.2]" in text
    path = tmp_path / name
    path.write_text(text + extra)
    return path


def simulated_rod_states(experiment, duration_s: float) -> list:
    """The states a HIL plant writes (``/sim/rod/state`` payloads at the log rate), from the simulator."""
    from aiko.robots.rod_bench.rod_stepper import RodStepper

    stepper = RodStepper(experiment.scenario)
    states = [(0.0, {"t_s": 0.0, "q": stepper.state.q.tolist()})]
    for k in range(1, int(round(duration_s / 0.02)) + 1):
        stepper.advance_to(0.02 * k)
        states.append((stepper.state.t_s, {"t_s": stepper.state.t_s, "q": stepper.state.q.tolist()}))
    return states
