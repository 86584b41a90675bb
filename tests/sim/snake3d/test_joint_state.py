"""The compiled joint read-out (fast.joint_state) that the HIL plant uses equals the reference kinematics."""

import numpy as np

from sim.snake3d import SnakeModel, SnakeSimulator, fast, posture_state
from sim.snake3d import kinematics as kin
from sim.snake3d.plant import Snake3DPlant


def test_compiled_joint_state_matches_the_reference_kinematics():
    model = SnakeModel(n_links=7)
    rng = np.random.default_rng(11)
    state = posture_state(model, rng.uniform(-0.7, 0.7, (6, 2)), head_direction_rad=1.1)
    state.omega_body_rad_s[:] = rng.normal(0, 3, (7, 3))
    angles, rates = np.full((6, 2), np.nan), np.full((6, 2), np.nan)
    fast.joint_state(state.quaternion, state.omega_body_rad_s, angles, rates)
    np.testing.assert_allclose(angles, kin.joint_angles(state.quaternion), rtol=0, atol=1e-14)
    np.testing.assert_allclose(rates, kin.joint_rates(state.quaternion, state.omega_body_rad_s), rtol=0, atol=1e-13)


def test_plant_joint_state_follows_every_advance_and_views_are_updated_in_place():
    model = SnakeModel(n_links=3, gravity_m_s2=0.0)
    plant = Snake3DPlant(model, posture_state(model, height_m=0.3))
    angle_view, rate_view = plant.joint_state_views()
    for _ in range(3):
        plant.advance(np.array([[0.05, -0.1], [0.0, 0.2]]), 4 * model.dt_s)
        angles, rates = plant.joint_state()
        sim = plant.simulator
        np.testing.assert_allclose(angles, kin.joint_angles(sim.state.quaternion), atol=1e-14)
        np.testing.assert_allclose(rates, kin.joint_rates(sim.state.quaternion, sim.state.omega_body_rad_s), atol=1e-13)
        assert np.array_equal(angle_view, angles) and np.array_equal(rate_view, rates)
        assert angles is not angle_view  # joint_state() hands out copies
    assert np.abs(rates).max() > 0.1  # the torques did move the joints


def test_joint_angles_are_recomputed_after_the_state_is_edited_in_place():
    model = SnakeModel(n_links=2)
    sim = SnakeSimulator(model, posture_state(model))
    edited = posture_state(model, np.array([[0.3, -0.2]]))
    sim.state.quaternion[:] = edited.quaternion
    np.testing.assert_allclose(sim.joint_angles(), [[0.3, -0.2]], atol=1e-12)


def test_scalar_projection_equals_the_vector_form_bit_for_bit():
    from sim.snake3d.constraints import project_joint_constraints, project_joint_constraints_vector

    model = SnakeModel()
    rng = np.random.default_rng(5)
    state = posture_state(model, rng.uniform(-0.6, 0.6, (10, 2)))
    quat = state.quaternion + rng.normal(0, 1e-3, state.quaternion.shape)  # drifted joints, unnormalised
    pos = state.position_m + rng.normal(0, 1e-3, state.position_m.shape)
    a_pos, a_quat, b_pos, b_quat = pos.copy(), quat.copy(), pos.copy(), quat.copy()
    project_joint_constraints(a_pos, a_quat, model.link_length_m)
    project_joint_constraints_vector(b_pos, b_quat, model.link_length_m)
    assert np.array_equal(a_pos, b_pos) and np.array_equal(a_quat, b_quat)
    assert np.abs(kin.gap_joint(model, a_pos, a_quat)).max() < 1e-15
