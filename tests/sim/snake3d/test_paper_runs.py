"""The paper's three 15 s runs (Transeth et al., Figs. 6, 7, 9–11) with the shared gait held at 10 Hz.

Each run is simulated once per session with the fast step (about 5–15 s of CPU in total) and checked for the
qualitative outcome the paper reports, and for the numerical invariants after 15 s.
"""

import math

import numpy as np
import pytest

from aiko.robots.aiko.paper_runs import run_paper
from sim.snake3d import kinematics as kin

RUNS = ("lateral_undulation_orthotropic", "lateral_undulation_isotropic", "sidewinding")


@pytest.fixture(scope="session")
def paper_runs():
    return {name: run_paper(name, 15.0) for name in RUNS}


def displacement(run) -> np.ndarray:
    return run.tracked_m[-1, :2] - run.tracked_m[0, :2]


@pytest.mark.slow
def test_orthotropic_lateral_undulation_moves_forward_along_x(paper_runs):
    """Fig. 6: link 6 moves steadily forward, mainly along +e_x (head direction)."""
    run = paper_runs["lateral_undulation_orthotropic"]
    dx, dy = displacement(run)
    assert dx > 0.5
    assert abs(math.degrees(math.atan2(dy, dx))) < 30
    # steadily: every 3 s window makes progress
    window = int(3.0 * 20)
    x = run.tracked_m[:, 0]
    assert np.all(x[window::window] - x[:-window:window][: len(x[window::window])] > 0.05)


@pytest.mark.slow
def test_isotropic_lateral_undulation_moves_slowly_backward(paper_runs):
    """Fig. 7: with μ_Tx = μ_Ty the snake moves slowly backward along e_x (the direction of the body wave)."""
    dx, _ = displacement(paper_runs["lateral_undulation_isotropic"])
    forward, _ = displacement(paper_runs["lateral_undulation_orthotropic"])
    assert dx < -0.05
    assert abs(dx) < 0.5 * forward


@pytest.mark.slow
def test_sidewinding_moves_mainly_along_y_with_the_body_lifted(paper_runs):
    """Figs. 9–11: sidewinding moves link 6 mainly along e_y; most of the body is lifted."""
    run = paper_runs["sidewinding"]
    dx, dy = displacement(run)
    assert abs(dy) > 0.4
    assert abs(dy) > 3 * abs(dx)
    assert np.mean(run.lifted_fraction[20:]) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_constraints_hold_after_15_s(paper_runs, name):
    sim = paper_runs[name].simulator
    state, model = sim.state, sim.model
    drift = np.abs(kin.gap_joint(model, state.position_m, state.quaternion)[:, :3]).max()
    assert drift < 1e-6
    np.testing.assert_allclose(np.linalg.norm(state.quaternion, axis=1), 1.0, atol=1e-12)
    assert state.t_s == pytest.approx(15.0, abs=1e-9)
    # every accepted step satisfies the contact laws (eq. 87–89) to the residual tolerance (1e-5 m/s)
    assert 0 < sim.stats.max_residual_m_s <= sim.model.residual_tolerance_m_s


@pytest.mark.slow
def test_rolling_friction_coefficient_matters_little():
    """μ_V is not given in the paper (we use 0.05): a 20-fold change moves sidewinding's 5 s travel by < 15 %."""
    travel = {}
    for mu_rolling in (0.01, 0.2):
        run = run_paper("sidewinding", 5.0, mu_rolling=mu_rolling)
        travel[mu_rolling] = displacement(run)
    low, high = travel[0.01], travel[0.2]
    assert np.linalg.norm(low - high) < 0.15 * np.linalg.norm(low)
