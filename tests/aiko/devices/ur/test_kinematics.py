"""The UR3 model: FK against hand-computed poses, IK round trips, the Jacobian against finite differences."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from aiko.devices.ur import kinematics as kin

RNG = np.random.default_rng(7)


def test_zero_joints_put_the_flange_where_the_dh_table_says():
    # All joints at zero: the arm lies along -x; flange at (a2 + a3, -(d4 + d6), d1 - d5), tool z along -y.
    pose = kin.forward(kin.UR3, np.zeros(6))
    assert pose[:3] == pytest.approx([-0.24365 - 0.21325, -(0.11235 + 0.0819), 0.1519 - 0.08535], abs=1e-12)
    tool_z = Rotation.from_rotvec(pose[3:]).as_matrix()[:, 2]
    assert tool_z == pytest.approx([0.0, -1.0, 0.0], abs=1e-12)


def test_ur3e_differs_from_ur3_by_its_own_table():
    pose = kin.forward(kin.UR3E, np.zeros(6))
    assert pose[:3] == pytest.approx([-0.24355 - 0.2132, -(0.13105 + 0.0921), 0.15185 - 0.08535], abs=1e-12)


def test_tcp_offset_moves_the_point_along_the_tool_axis():
    q = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2])
    flange = kin.pose_to_matrix(kin.forward(kin.UR3, q))
    tcp = kin.forward(kin.UR3, q, np.array([0, 0, 0.1, 0, 0, 0]))
    assert tcp[:3] == pytest.approx(flange[:3, 3] + 0.1 * flange[:3, 2], abs=1e-12)


@pytest.mark.parametrize("trial", range(20))
def test_ik_round_trip_from_a_nearby_seed(trial):
    q = RNG.uniform(-2.5, 2.5, 6)
    # keep away from the elbow (q3 = 0) and wrist (q5 = 0) singularities, where two branches meet
    q[2] = np.sign(q[2] or 1) * np.clip(abs(q[2]), 0.4, 2.5)
    q[4] = np.sign(q[4] or 1) * np.clip(abs(q[4]), 0.4, 2.7)
    pose = kin.forward(kin.UR3, q)
    seed = q + RNG.uniform(-0.15, 0.15, 6)
    solved = kin.inverse(kin.UR3, pose, seed)
    assert kin.forward(kin.UR3, solved)[:3] == pytest.approx(pose[:3], abs=1e-6)
    assert np.allclose(kin.pose_to_matrix(kin.forward(kin.UR3, solved)), kin.pose_to_matrix(pose), atol=1e-6)
    # the solution nearest the seed is the one we started from
    assert solved == pytest.approx(q, abs=1e-4)


def test_ik_raises_for_a_pose_out_of_reach():
    with pytest.raises(kin.IKError, match="no inverse kinematics solution"):
        kin.inverse(kin.UR3, [1.5, 0.0, 0.3, 0.0, 3.14, 0.0], np.array([0, -1.57, 1.57, -1.57, -1.57, 0]))


@pytest.mark.parametrize("trial", range(5))
def test_jacobian_matches_finite_differences(trial):
    q = RNG.uniform(-2.0, 2.0, 6)
    tcp = np.array([0.0, 0.01, 0.12, 0.0, 0.0, 0.0])
    jac = kin.jacobian(kin.UR3, q, tcp)
    h = 1e-6
    t0 = kin.pose_to_matrix(kin.forward(kin.UR3, q, tcp))
    for i in range(6):
        dq = np.zeros(6)
        dq[i] = h
        t1 = kin.pose_to_matrix(kin.forward(kin.UR3, q + dq, tcp))
        numeric = kin.pose_error(t0, t1) / h
        assert jac[:, i] == pytest.approx(numeric, abs=1e-5)


def test_joint_limits_and_speed_limits_are_the_ur3_manuals():
    assert kin.UR3.joint_max_rad == pytest.approx((2 * np.pi,) * 6)
    assert np.degrees(kin.UR3.joint_speed_max_rad_s) == pytest.approx([180, 180, 180, 360, 360, 360])
    assert kin.within_joint_limits(kin.UR3, np.full(6, 6.2))
    assert not kin.within_joint_limits(kin.UR3, np.array([0, 0, 0, 0, 0, 6.3]))


def test_ik_wraps_to_the_turn_nearest_the_seed():
    q = np.array([0.2, -1.3, 1.5, -1.7, -1.5, -0.1])
    seed = q.copy()
    seed[5] += 2 * np.pi - 0.05  # the seed sits one turn away on wrist 3 (still inside +-360 deg)
    solved = kin.inverse(kin.UR3, kin.forward(kin.UR3, q), seed)
    assert solved[5] == pytest.approx(q[5] + 2 * np.pi, abs=1e-6)
    # a seed whose nearest turn would leave the +-360 deg range is wrapped back inside it
    seed[5] = 2 * np.pi - 0.01
    assert kin.inverse(kin.UR3, kin.forward(kin.UR3, q), seed)[5] == pytest.approx(q[5] + 2 * np.pi, abs=1e-6)
    q[5] = 0.1
    assert kin.inverse(kin.UR3, kin.forward(kin.UR3, q), seed)[5] == pytest.approx(0.1, abs=1e-6)


def _random_rotvecs(n: int, rng: np.random.Generator, angles: np.ndarray | None = None) -> np.ndarray:
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = rng.uniform(0.0, np.pi, n) if angles is None else angles
    return axes * angles[:, None]


@pytest.mark.parametrize(
    "angles",
    [
        "uniform",
        "tiny",  # the Taylor branches
        "near pi/2",  # where the axis switches from the antisymmetric to the symmetric part
        "near pi",  # the antisymmetric part vanishes
    ],
)
def test_rotation_vector_conversions_equal_scipy(angles):
    rng = np.random.default_rng(7)
    n = 400
    chosen = {
        "uniform": None,
        "tiny": 10.0 ** rng.uniform(-12, -4, n),
        "near pi/2": np.pi / 2 + rng.uniform(-1e-9, 1e-9, n),
        "near pi": np.pi - 10.0 ** rng.uniform(-8, -3, n),
    }[angles]
    for rotvec in _random_rotvecs(n, rng, chosen):
        matrix = Rotation.from_rotvec(rotvec).as_matrix()
        np.testing.assert_allclose(kin.rotvec_to_matrix(rotvec), matrix, rtol=0, atol=1e-14)
        np.testing.assert_allclose(kin.matrix_to_rotvec(matrix), Rotation.from_matrix(matrix).as_rotvec(), atol=1e-12)


def test_a_half_turn_gives_its_axis_either_way_round():
    for axis in np.eye(3).tolist() + [[0.6, 0.0, 0.8], [1 / 3**0.5] * 3]:
        rotvec = kin.matrix_to_rotvec(Rotation.from_rotvec(np.pi * np.asarray(axis)).as_matrix())
        assert np.linalg.norm(rotvec) == pytest.approx(np.pi, abs=1e-12)
        assert abs(float(rotvec @ axis)) == pytest.approx(np.pi, abs=1e-12)  # +axis or -axis: the same half turn
