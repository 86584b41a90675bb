"""Aiko's shape from cardan joint angles: independent recursion, angle extraction (paper 000 eq. 65-67)."""

import numpy as np
import pytest

from sim import lie
from sim.chain import ChainModelError, chain_frames
from sim.chain.cardan import (
    AIKO_AXIS_OFFSET_M,
    cardan_angle_rates,
    cardan_angles_from_rotations,
    cardan_chain,
    cardan_rates_from_velocities,
    link_poses_from_joint_angles,
    quaternions_wxyz,
)
from sim.chain.transfer import transfer_blocks

RNG = np.random.default_rng(5)
L = 0.122  # Aiko link length (paper 000)
EZ = np.array([0.0, 0.0, 1.0])


def reference_poses(angles, link_length_m, offset_m):
    """Plain loop over paper 000's definition: R_{i+1} = R_i R_y(a_h) R_x(a_v); yaw, offset, pitch."""
    n = angles.shape[0] + 1
    R = [np.eye(3)]
    x = [np.zeros(3)]
    half = 0.5 * (link_length_m - offset_m)
    for (a_h, a_v), Ri, xi in zip(angles, R, x, strict=False):
        R_yaw = Ri @ lie.R2(a_h)
        R_next = R_yaw @ lie.R1(a_v)
        x.append(xi + half * Ri @ EZ + offset_m * R_yaw @ EZ + half * R_next @ EZ)
        R.append(R_next)
        if len(R) == n:
            break
    return np.array(x), np.array(R)


def sidewinding_angles(t_s, n_links=11):
    """Paper 000 eq. 70-71 with the sidewinding parameters of Sec. VIII-E (no soft start)."""
    i = np.arange(n_links - 1)
    w, d = np.deg2rad(80.0), np.deg2rad(-50.0)
    a_h = np.deg2rad(30.0) * np.sin(w * t_s + i * d)
    a_v = np.deg2rad(10.0) * np.sin(w * t_s + i * d + np.deg2rad(90.0))
    return np.stack([a_h, a_v], axis=1)


def test_straight_robot_has_links_every_L_along_ez():
    x, R = link_poses_from_joint_angles(np.zeros((10, 2)), L, AIKO_AXIS_OFFSET_M)
    np.testing.assert_allclose(x, np.outer(np.arange(11) * L, EZ), atol=1e-15)
    np.testing.assert_allclose(R, np.tile(np.eye(3), (11, 1, 1)), atol=1e-15)


@pytest.mark.parametrize("offset_m", [0.0, AIKO_AXIS_OFFSET_M])
def test_chain_kinematics_match_an_independent_recursion(offset_m):
    angles = RNG.uniform(-1.2, 1.2, size=(10, 2))
    x, R = link_poses_from_joint_angles(angles, L, offset_m)
    x_ref, R_ref = reference_poses(angles, L, offset_m)
    np.testing.assert_allclose(x, x_ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(R, R_ref, rtol=0, atol=1e-15)


def test_angle_extraction_inverts_the_shape():
    angles = np.column_stack([RNG.uniform(-1.5, 1.5, 10), RNG.uniform(-3.0, 3.0, 10)])
    _, R = link_poses_from_joint_angles(angles, L, AIKO_AXIS_OFFSET_M)
    np.testing.assert_allclose(cardan_angles_from_rotations(R), angles, rtol=0, atol=1e-13)


def test_joint_rates_of_eq_67():
    """omega_v = alpha_v_dot and omega_h = cos(alpha_v) alpha_h_dot (eq. 67's definitions)."""
    angles = RNG.uniform(-1.0, 1.0, size=(10, 2))
    rates = RNG.normal(size=(10, 2))
    chain = cardan_chain(11, L, AIKO_AXIS_OFFSET_M)
    frames = chain_frames(chain, angles.reshape(-1))
    _, Bw = transfer_blocks(chain, frames)
    omega = np.einsum("naj,j->na", Bw, rates.reshape(-1))
    omega_links = np.concatenate([np.zeros((1, 3)), omega[1::2]])  # link 1 is the (resting) base
    R = np.concatenate([np.eye(3)[None], frames.rotations[1::2]])
    got = cardan_rates_from_velocities(R, omega_links)
    np.testing.assert_allclose(got[:, 1], rates[:, 1], atol=1e-14)
    np.testing.assert_allclose(got[:, 0], np.cos(angles[:, 1]) * rates[:, 0], atol=1e-14)
    np.testing.assert_allclose(cardan_angle_rates(R, omega_links), rates, atol=1e-14)


def test_tracked_link_pose_fixes_every_other_link():
    angles = RNG.uniform(-0.8, 0.8, size=(10, 2))
    g_world = lie.exp_se3(RNG.normal(size=6))
    x, R = link_poses_from_joint_angles(angles, L, AIKO_AXIS_OFFSET_M)
    x_world = x @ g_world[:3, :3].T + g_world[:3, 3]
    R_world = g_world[:3, :3] @ R
    tracked = lie.pose(R_world[5], x_world[5])  # link 6, the one Vicon tracks
    x2, R2 = link_poses_from_joint_angles(angles, L, AIKO_AXIS_OFFSET_M, tracked_link=5, tracked_pose=tracked)
    np.testing.assert_allclose(x2, x_world, atol=1e-14)
    np.testing.assert_allclose(R2, R_world, atol=1e-14)
    q = quaternions_wxyz(R2)
    assert q.shape == (11, 4)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-15)


def test_quaternions_are_scipys_in_every_branch_of_shepperds_method():
    """The hand-written conversion (kept off scipy.spatial for start-up time) gives scipy's quaternion, sign
    included, whichever of the trace and the three diagonal entries is largest: random rotations and rotations by
    ~pi about each axis (where the trace formula would lose precision)."""
    from scipy.spatial.transform import Rotation

    near_half_turns = [lie.exp_so3(3.1 * axis + 0.05 * RNG.normal(size=3)) for axis in np.eye(3) for _ in range(20)]
    R = np.concatenate([Rotation.random(200, random_state=3).as_matrix(), np.array(near_half_turns), np.eye(3)[None]])
    trace = np.trace(R, axis1=1, axis2=2)
    branches = np.argmax(np.column_stack([R[:, 0, 0], R[:, 1, 1], R[:, 2, 2], trace]), axis=1)
    assert set(branches.tolist()) == {0, 1, 2, 3}
    expected = Rotation.from_matrix(R).as_quat(scalar_first=True)
    np.testing.assert_allclose(quaternions_wxyz(R), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(quaternions_wxyz(R[5]), expected[5], rtol=0, atol=1e-15)


def test_axis_offset_effect_on_link6_during_sidewinding_is_millimetres():
    """Size of the 2.2 cm yaw-pitch offset on link 6 (relative to link 1) over one sidewinding period.

    Small but not negligible against Vicon's sub-millimetre accuracy: between 1 mm and 2 cm (the numbers in
    docs/chain.md come from `aiko chain offset-effect experiments/sidewinding.toml`)."""
    period_s = 2 * np.pi / np.deg2rad(80.0)
    shifts = []
    for t in np.linspace(0.0, period_s, 40):
        angles = sidewinding_angles(t)
        x0, _ = link_poses_from_joint_angles(angles, L, 0.0)
        x1, _ = link_poses_from_joint_angles(angles, L, AIKO_AXIS_OFFSET_M)
        shifts.append(np.linalg.norm(x1[5] - x0[5]))
    assert 1e-3 < max(shifts) < 2e-2


def test_bad_angles_and_offsets_are_rejected():
    with pytest.raises(ChainModelError, match=r"shape \(n_links - 1, 2\)"):
        link_poses_from_joint_angles(np.zeros(10), L)
    with pytest.raises(ChainModelError, match="axis_offset_m must be in"):
        cardan_chain(11, L, axis_offset_m=0.2)
    with pytest.raises(ChainModelError, match="tracked_link must be in 0..10"):
        link_poses_from_joint_angles(np.zeros((10, 2)), L, tracked_link=11)
