"""Every W matrix against finite differences of the quantity it differentiates (gap functions are ground truth)."""

import numpy as np
import pytest

from sim.snake3d import kinematics as kin
from sim.snake3d.model import SnakeModel
from sim.snake3d.rotations import quat_about_axis, quat_multiply, quat_to_matrix

MODEL = SnakeModel(n_links=5)
FD_STEP = 1e-6
FD_TOL = 1e-8  # central differences: truncation ~ h² |g'''| ≈ 1e-12, rounding ~ 1e-16/h ≈ 1e-10


def random_configuration(seed: int):
    rng = np.random.default_rng(seed)
    angles = rng.uniform(-0.6, 0.6, size=(MODEL.n_joints, 2))
    state = kin.posture_state(MODEL, angles, head_direction_rad=rng.uniform(-3, 3))
    # break the joint constraints slightly: W must be the derivative everywhere, not only on the manifold
    state.position_m += rng.normal(scale=1e-3, size=state.position_m.shape)
    state.quaternion += rng.normal(scale=1e-3, size=state.quaternion.shape)
    state.quaternion /= np.linalg.norm(state.quaternion, axis=1, keepdims=True)
    u = rng.normal(size=6 * MODEL.n_links)
    return state.position_m, state.quaternion, u


def displaced(pos, quat, u, eps):
    """q moved along the velocity u for a time eps (body-frame angular velocity, exact exponential)."""
    u = u.reshape(-1, 6)
    new_quat = np.empty_like(quat)
    for i in range(len(quat)):
        w = u[i, 3:]
        angle = np.linalg.norm(w) * eps
        new_quat[i] = quat_multiply(quat[i], quat_about_axis(w / np.linalg.norm(w), angle))
    return pos + eps * u[:, :3], new_quat


def fd(fun, pos, quat, u):
    p1, q1 = displaced(pos, quat, u, FD_STEP)
    p0, q0 = displaced(pos, quat, u, -FD_STEP)
    return (fun(p1, q1) - fun(p0, q0)) / (2 * FD_STEP)


@pytest.mark.parametrize("seed", range(4))
def test_W_normal_matches_gap_derivative(seed):
    pos, quat, u = random_configuration(seed)
    W = kin.W_normal(MODEL, pos, quat)
    expected = fd(lambda p, q: kin.gap_normal(MODEL, p, q), pos, quat, u)
    np.testing.assert_allclose(W.T @ u, expected, atol=FD_TOL)


@pytest.mark.parametrize("seed", range(4))
def test_W_joint_matches_gap_derivative_including_phi(seed):
    pos, quat, u = random_configuration(seed)
    W = kin.W_joint(MODEL, pos, quat)
    expected = fd(lambda p, q: kin.gap_joint(MODEL, p, q).reshape(-1), pos, quat, u)
    np.testing.assert_allclose(W.T @ u, expected, atol=FD_TOL)


@pytest.mark.parametrize("seed", range(4))
def test_W_tangential_is_velocity_of_body_point_in_plane_frame(seed):
    pos, quat, u = random_configuration(seed)
    R0 = kin.rotation_matrices(quat)
    offsets = kin.contact_point_offsets(MODEL, R0)
    links = np.array([kin.contact_link(MODEL, a) for a in range(MODEL.n_contacts)])
    body_points = np.array([R0[links[a]].T @ offsets[a] for a in range(MODEL.n_contacts)])

    def points(p, q):
        R = kin.rotation_matrices(q)
        return np.array([p[links[a]] + R[links[a]] @ body_points[a] for a in range(MODEL.n_contacts)])

    velocity = fd(points, pos, quat, u).reshape(MODEL.n_contacts, 3)
    W = kin.W_tangential(MODEL, pos, quat)
    gamma = (W.T @ u).reshape(MODEL.n_contacts, 2)
    for a in range(MODEL.n_contacts):
        ex, ey = kin.plane_frame(R0[links[a]])
        np.testing.assert_allclose(gamma[a], [velocity[a] @ ex, velocity[a] @ ey], atol=FD_TOL)
    # the normal direction is the same body point's vertical velocity
    np.testing.assert_allclose(kin.W_normal(MODEL, pos, quat).T @ u, velocity[:, 2], atol=FD_TOL)


@pytest.mark.parametrize("seed", range(3))
def test_W_rolling_is_eq_33_along_the_plane_frame(seed):
    """γ_V = (e_y^Π)ᵀ Dᵀ (L_SC e_z^I × ω_I): eq. 33 keeping the rolling about the link axis."""
    pos, quat, u = random_configuration(seed)
    R0 = kin.rotation_matrices(quat)

    def rotations(p, q):
        return np.array([quat_to_matrix(qq) for qq in q])

    Rdot = fd(rotations, pos, quat, u)
    W = kin.W_rolling(MODEL, pos, quat)
    gamma = W.T @ u
    for a in range(MODEL.n_contacts):
        i = kin.contact_link(MODEL, a)
        omega_tilde = Rdot[i] @ R0[i].T
        omega = np.array([omega_tilde[2, 1], omega_tilde[0, 2], omega_tilde[1, 0]])
        _, ey = kin.plane_frame(R0[i])
        expected = np.cross(MODEL.link_radius_m * kin.E_Z, omega) @ ey
        np.testing.assert_allclose(gamma[a], expected, atol=FD_TOL)


def test_joint_angles_recover_posture_and_rates_match_fd():
    rng = np.random.default_rng(7)
    angles = rng.uniform(-0.7, 0.7, size=(MODEL.n_joints, 2))
    state = kin.posture_state(MODEL, angles, head_direction_rad=0.4)
    np.testing.assert_allclose(kin.joint_angles(state.quaternion), angles, atol=1e-12)
    np.testing.assert_allclose(kin.gap_joint(MODEL, state.position_m, state.quaternion), 0.0, atol=1e-15)
    u = rng.normal(size=6 * MODEL.n_links)
    WJ = kin.W_joint(MODEL, state.position_m, state.quaternion)
    u -= WJ @ np.linalg.solve(WJ.T @ WJ, WJ.T @ u)  # an admissible velocity: W_Jᵀ u = 0
    expected = fd(lambda p, q: kin.joint_angles(q), state.position_m, state.quaternion, u)
    np.testing.assert_allclose(kin.joint_rates(state.quaternion, u.reshape(-1, 6)[:, 3:]), expected, atol=FD_TOL)


def test_joint_torques_do_the_work_of_the_joint_rates():
    """Power balance: τ_Cᵀ u = Σ τ·α̇, so a positive torque drives the joint angle up (the sign convention)."""
    rng = np.random.default_rng(3)
    state = kin.posture_state(MODEL, rng.uniform(-0.5, 0.5, size=(MODEL.n_joints, 2)))
    u = rng.normal(size=6 * MODEL.n_links)
    torques = rng.normal(size=(MODEL.n_joints, 2))
    tau_C = kin.joint_torque_forces(state.quaternion, torques)
    rates = kin.joint_rates(state.quaternion, u.reshape(-1, 6)[:, 3:])
    assert tau_C @ u == pytest.approx(np.sum(torques * rates), rel=1e-12)


def test_projection_removes_drift_and_keeps_link_one():
    from sim.snake3d.constraints import project_joint_constraints

    pos, quat, _ = random_configuration(11)
    pos0, quat0 = pos.copy(), quat.copy()
    assert np.abs(kin.gap_joint(MODEL, pos, quat)).max() > 1e-4
    project_joint_constraints(pos, quat, MODEL.link_length_m)
    assert np.abs(kin.gap_joint(MODEL, pos, quat)).max() < 1e-14
    np.testing.assert_array_equal(pos[0], pos0[0])
    np.testing.assert_allclose(quat[0], quat0[0], atol=1e-15)
    # every link keeps its axis e_z^B (Sec. VII-C)
    for i in range(MODEL.n_links):
        np.testing.assert_allclose(quat_to_matrix(quat[i])[:, 2], quat_to_matrix(quat0[i])[:, 2], atol=1e-12)
