"""The fast (numba) step against the plain-numpy reference, joint control sign, the HIL plant, bad input."""

import math

import numpy as np
import pytest

from sim.snake3d import SimulationDivergedError, SnakeModel, SnakeModelError, SnakeSimulator, posture_state
from sim.snake3d import kinematics as kin
from sim.snake3d.plant import Snake3DPlant
from sim.snake3d.rotations import matrix_to_quat, rot_y


@pytest.mark.parametrize("prox_mode", ["local", "paper"])
def test_fast_step_matches_reference_step(prox_mode):
    model = SnakeModel(prox_mode=prox_mode, tolerance=1e-12, velocity_tolerance_m_s=1e-10)
    rng = np.random.default_rng(2)
    state = posture_state(model, rng.uniform(-0.4, 0.4, size=(model.n_joints, 2)), height_m=2e-4)
    state.velocity_m_s[:] = rng.normal(scale=0.05, size=state.velocity_m_s.shape)
    fast, ref = SnakeSimulator(model, state.copy()), SnakeSimulator(model, state.copy(), use_reference=True)
    angles = rng.uniform(-0.5, 0.5, size=(model.n_joints, 2))
    rates = rng.uniform(-1, 1, size=(model.n_joints, 2))
    for sim in (fast, ref):
        sim.set_references(angles, rates)
        sim.step(8)
    assert fast.stats.sweeps == ref.stats.sweeps
    assert ref.impulses[:, 0].max() > 0, "the comparison must include closed contacts"
    for name in ("position_m", "quaternion", "velocity_m_s", "omega_body_rad_s", "impulse_cache"):
        np.testing.assert_allclose(getattr(fast.state, name), getattr(ref.state, name), rtol=1e-10, atol=1e-12)


MU_LONGITUDINAL, MU_TRANSVERSAL, MU_ROLLING = 0.11, 0.47, 0.08


def _sliding_and_rolling_on_a_slope(prox_mode: str, use_reference: bool, seed: int = 5) -> SnakeSimulator:
    """Five links lying flat on a 14° slope (azimuth 35°), orthotropic friction, sliding at a few cm/s, every link
    rolling about its own axis at 0.5–1 rad/s, with the horizontal joints driven through a rate reference."""
    model = SnakeModel(
        n_links=5,
        prox_mode=prox_mode,
        mu_longitudinal=MU_LONGITUDINAL,
        mu_transversal=MU_TRANSVERSAL,
        mu_rolling=MU_ROLLING,
        slope_rad=math.radians(14.0),
        slope_azimuth_rad=math.radians(35.0),
        tolerance=1e-12,
        velocity_tolerance_m_s=1e-10,
    )
    rng = np.random.default_rng(seed)
    posture = np.column_stack([rng.uniform(-0.5, 0.5, model.n_joints), np.zeros(model.n_joints)])
    state = posture_state(model, posture)  # flat: every sphere touches the ground
    state.velocity_m_s[:, :2] = rng.normal(scale=0.05, size=(model.n_links, 2))
    state.omega_body_rad_s[:, 2] = rng.uniform(0.5, 1.0, model.n_links) * rng.choice([-1.0, 1.0], model.n_links)
    sim = SnakeSimulator(model, state, use_reference=use_reference)
    rates = np.column_stack([rng.uniform(-0.5, 0.5, model.n_joints), np.zeros(model.n_joints)])
    sim.set_references(posture, rates)
    return sim


@pytest.mark.parametrize("prox_mode", ["local", "paper"])
def test_fast_step_matches_reference_step_with_orthotropic_friction_on_a_slope_while_rolling(prox_mode):
    """The twins on the case the isotropic comparison above cannot see: μ_l ≠ μ_t ≠ μ_V, tilted gravity and rolling
    links, so a fast path that swaps or mixes the two tangential coefficients (or the rolling one, or a slope
    component) diverges from the reference at once.

    The case is checked to exercise those paths: most closed contacts slide (their tangential impulse lies on the
    friction ellipse with semi-axes μ_l P_N, μ_t P_N) and roll at the rolling bound μ_V P_N.

    Tolerance: both steps run the same sweeps (asserted equal, step by step) with the same arithmetic up to the
    order of summation, so they differ by round-off carried through ≤ 1000 Gauss–Seidel sweeps: measured ≤ 1e-13
    absolute on every quantity (positions ~0.5 m, rates ~0.5 rad/s, impulses ~2e-3 N s). rtol 1e-10 / atol 1e-12
    (the isotropic test's bounds) leave a 10× margin; a swapped coefficient (0.11 against 0.47) changes the
    friction impulses by tens of percent."""
    fast = _sliding_and_rolling_on_a_slope(prox_mode, use_reference=False)
    ref = _sliding_and_rolling_on_a_slope(prox_mode, use_reference=True)
    sliding = rolling_at_bound = closed = 0
    for _ in range(8):
        fast.step(1)
        ref.step(1)
        assert fast.stats.sweeps == ref.stats.sweeps
        np.testing.assert_allclose(fast.impulses, ref.impulses, rtol=1e-10, atol=1e-12)
        impulses = ref.impulses[ref.impulses[:, 0] > 0]
        ellipse = np.hypot(
            impulses[:, 1] / (MU_LONGITUDINAL * impulses[:, 0]), impulses[:, 2] / (MU_TRANSVERSAL * impulses[:, 0])
        )
        closed += len(impulses)
        sliding += int(np.sum(np.abs(ellipse - 1.0) < 1e-9))
        rolling_at_bound += int(np.sum(np.abs(np.abs(impulses[:, 3]) / (MU_ROLLING * impulses[:, 0]) - 1.0) < 1e-9))
    assert closed >= 40 and sliding >= closed // 2 and rolling_at_bound >= closed // 2, (closed, sliding)
    for name in ("position_m", "quaternion", "velocity_m_s", "omega_body_rad_s", "impulse_cache"):
        np.testing.assert_allclose(getattr(fast.state, name), getattr(ref.state, name), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1])
def test_pd_joint_tracks_a_step_reference(axis):
    """Sign of eq. 68–69 fixed: a free two-link body (no gravity) settles at the commanded joint angle."""
    model = SnakeModel(n_links=2, gravity_m_s2=0.0)
    sim = SnakeSimulator(model, posture_state(model, height_m=0.5))
    target = np.zeros((1, 2))
    target[0, axis] = 0.3
    sim.set_references(target)
    sim.step(4)  # 1 ms: a quarter of the joint's ~5 ms oscillation period, so the rate is far from a zero crossing
    assert sim.joint_rates()[0, axis] > 0, "the joint must start moving towards its reference"
    sim.advance(1.0)
    np.testing.assert_allclose(sim.joint_angles()[0], target[0], atol=1e-6)
    # no external force: the centre of mass stays where it was
    assert np.abs(sim.state.velocity_m_s.sum(axis=0)).max() < 1e-12


def test_hil_plant_with_external_pd_matches_internal_pd():
    """An external controller applying τ = K_p(α_r − α) − K_d α̇ through the plant behaves like the built-in PD."""
    model = SnakeModel(n_links=2, gravity_m_s2=0.0)
    plant = Snake3DPlant(model, posture_state(model, height_m=0.5))
    target = np.array([0.2, -0.1])
    for _ in range(400):  # 0.1 s at the simulator rate
        angle, rate = plant.joint_state()
        tau = np.array([[40, 800]]) * (target - angle) - np.array([[0.2, 0.2]]) * rate
        plant.advance(tau, model.dt_s)
    internal = SnakeSimulator(model, posture_state(model, height_m=0.5))
    internal.set_references(target.reshape(1, 2))
    internal.advance(0.1)
    angle, _ = plant.joint_state()
    np.testing.assert_allclose(angle, internal.joint_angles(), atol=2e-3)
    with pytest.raises(ValueError, match=r"shape \(1, 2\)"):
        plant.advance(np.zeros(2), 0.01)


@pytest.mark.parametrize(
    ("key", "value"),
    [("link_mass_kg", 0.0), ("link_mass_kg", -1.0), ("mu_longitudinal", 0.0), ("mu_transversal", -0.2),
     ("dt_s", 0.0), ("dt_s", math.nan), ("n_links", 0), ("prox_mode", "fast"), ("slope_rad", 2.0)],
)  # fmt: skip
def test_invalid_parameters_name_the_key(key, value):
    with pytest.raises(SnakeModelError, match=key):
        SnakeModel(**{key: value})


def test_non_finite_state_is_rejected_with_the_link():
    model = SnakeModel(n_links=3)
    state = posture_state(model)
    state.velocity_m_s[1, 0] = math.inf
    with pytest.raises(SimulationDivergedError, match=r"link\(s\) \[2\]"):
        SnakeSimulator(model, state)


def test_non_convergence_raises_with_time_and_links():
    model = SnakeModel(n_links=3, max_iterations=1, max_retries=0, tolerance=1e-30, velocity_tolerance_m_s=1e-30)
    sim = SnakeSimulator(model, posture_state(model))  # lying on the ground: the first sweep loads the contacts
    with pytest.raises(SimulationDivergedError, match=r"did not converge at t = 0\.0+ s .* links \["):
        sim.step(5)


def test_a_link_standing_upright_on_one_sphere_is_simulated():
    """Eq. 27's friction frame is undefined for a vertical link; the step must stay finite and stop the sphere."""
    model = SnakeModel(n_links=1)
    state = posture_state(model)
    upright = rot_y(-math.pi / 2) @ kin.FLAT_LINK  # e_z^B pointing up
    state.quaternion[0] = matrix_to_quat(upright)
    state.position_m[0] = [0.0, 0.0, model.sphere_offset_m + model.link_radius_m + 1e-4]
    state.velocity_m_s[0] = [0.1, 0.0, 0.0]
    for use_reference in (False, True):
        sim = SnakeSimulator(model, state.copy(), use_reference=use_reference)
        sim.step(40)
        assert np.all(np.isfinite(sim.state.position_m))
        assert sim.impulses[model.n_links, 0] > 0  # the rear sphere carries it
