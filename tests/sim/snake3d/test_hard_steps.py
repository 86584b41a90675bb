"""Steps the prox iteration finds hard: a slowly converging impact, the step-halving fallback, and clean failure.

The fixture is the state of the HIL run that used to fail (sidewinding through the emulated motors at 200 Hz
references, t = 0.09625 s): the tail, raised by the initial posture and let go by the gear free play, lands on the
ground with every distal joint free (zero torque). Its contact problem converges linearly and slowly (1296 sweeps).
"""

from pathlib import Path

import numpy as np
import pytest

from sim.snake3d import ContactNotConvergedError, SnakeModel, SnakeModelError, SnakeSimulator, SnakeState

FIXTURE = Path(__file__).parent / "data" / "hil_tail_impact.npz"
STATE_FIELDS = ("position_m", "quaternion", "velocity_m_s", "omega_body_rad_s", "impulse_cache")
AIKO = {"link_mass_kg": 0.682}  # the robot description's mass; every other parameter at its default


def _impact(**overrides) -> tuple[SnakeModel, SnakeState, np.ndarray]:
    data = np.load(FIXTURE)
    state = SnakeState(float(data["t_s"]), *(data[name].copy() for name in STATE_FIELDS))
    return SnakeModel(**AIKO, **overrides), state, data["torques_nm"]


def _step(model, state, torques, use_reference=False) -> SnakeSimulator:
    sim = SnakeSimulator(model, state.copy(), use_reference=use_reference)
    sim.set_torques(torques)
    sim.step(1)
    return sim


def test_slowly_converging_impact_continues_with_the_same_r():
    """The iteration is still contracting after max_iterations sweeps: halving r (the old retry) would only slow it
    (sweeps grow as 1/r), so the block continues and converges in one step without a retry or a split."""
    model, state, torques = _impact()
    fast = _step(model, state, torques)
    assert fast.stats.sweeps > model.max_iterations  # a second block was needed ...
    assert fast.stats.retries == 0 and fast.stats.split_steps == 0  # ... continued, not restarted or split
    assert fast.stats.max_residual_m_s <= model.residual_tolerance_m_s
    ref = _step(model, state, torques, use_reference=True)
    assert ref.stats.sweeps == fast.stats.sweeps and ref.stats.retries == 0
    for name in STATE_FIELDS:
        np.testing.assert_allclose(getattr(fast.state, name), getattr(ref.state, name), rtol=1e-8, atol=1e-10)


def test_a_step_that_does_not_converge_is_retried_as_half_steps():
    """With a budget too small for the full step (500 < 1296 sweeps) the two half steps converge (≤ 406 each)."""
    model, state, torques = _impact(max_iterations=500, max_retries=0)
    fast = _step(model, state, torques)
    assert fast.stats.split_steps == 1 and fast.stats.max_split_depth == 1 and fast.stats.steps == 1
    assert fast.state.t_s == pytest.approx(state.t_s + model.dt_s, abs=1e-15)
    assert fast.stats.max_residual_m_s <= model.residual_tolerance_m_s  # each half step met the contact laws
    # the same step taken whole (enough sweeps) agrees to first order in Δt; impulses add over the halves
    whole = _step(SnakeModel(**AIKO, max_iterations=20_000), state, torques)
    np.testing.assert_allclose(fast.state.velocity_m_s, whole.state.velocity_m_s, atol=2e-3)
    total_impulse = fast.contact_forces_n()[:, 0].sum() * model.dt_s
    assert total_impulse == pytest.approx(whole.contact_forces_n()[:, 0].sum() * model.dt_s, rel=0.05)
    ref = _step(model, state, torques, use_reference=True)
    assert (ref.stats.split_steps, ref.stats.max_split_depth, ref.stats.sweeps) == (1, 1, fast.stats.sweeps)
    for name in STATE_FIELDS:
        np.testing.assert_allclose(getattr(fast.state, name), getattr(ref.state, name), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fast.impulses, ref.impulses, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("use_reference", [False, True])
def test_failure_after_every_halving_raises_and_leaves_the_state_untouched(use_reference):
    model, state, torques = _impact(
        max_iterations=1, max_retries=0, max_step_halvings=2, tolerance=1e-30, velocity_tolerance_m_s=1e-30
    )
    sim = SnakeSimulator(model, state.copy(), use_reference=use_reference)
    sim.set_torques(torques)
    with pytest.raises(ContactNotConvergedError, match=r"did not converge at t = 0\.096250 s .* 2 halvings"):
        sim.step(1)
    assert sim.state.t_s == state.t_s
    for name in STATE_FIELDS:  # nothing of the accepted sub-steps is kept
        np.testing.assert_array_equal(getattr(sim.state, name), getattr(state, name))


def test_halving_can_be_switched_off_and_is_validated():
    model, state, torques = _impact(max_retries=0, max_step_halvings=0)
    with pytest.raises(ContactNotConvergedError, match="0 halvings"):
        _step(model, state, torques)
    with pytest.raises(SnakeModelError, match="max_step_halvings"):
        SnakeModel(max_step_halvings=-1)
