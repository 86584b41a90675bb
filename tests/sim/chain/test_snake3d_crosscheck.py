"""Cross-check with the 3D simulator (paper 000, sim.snake3d): Aiko's link poses from the chain model, given
the pose of link 6 and the joint angles the simulator reports, equal the simulator's own link poses."""

import numpy as np
from scipy.spatial.transform import Rotation

from sim import lie
from sim.chain.cardan import (
    cardan_angle_rates,
    cardan_angles_from_rotations,
    link_poses_from_joint_angles,
)
from sim.snake3d import kinematics as snake3d_kinematics
from sim.snake3d.model import SnakeModel
from sim.snake3d.simulator import SnakeSimulator
from tests.sim.chain.test_cardan import sidewinding_angles


def test_chain_link_poses_match_snake3d_during_sidewinding():
    model = SnakeModel()
    simulator = SnakeSimulator(model, snake3d_kinematics.posture_state(model, sidewinding_angles(0.0)))
    worst_position_m = worst_rotation = 0.0
    for k in range(5):  # 0.5 s of sidewinding with references held for 0.1 s (the robot's 10 Hz)
        simulator.set_references(sidewinding_angles(0.1 * k))
        simulator.advance_to(0.1 * (k + 1))
        state = simulator.state
        R = Rotation.from_quat(state.quaternion, scalar_first=True).as_matrix()
        angles = cardan_angles_from_rotations(R)
        np.testing.assert_allclose(angles, snake3d_kinematics.joint_angles(state.quaternion), atol=1e-13)
        rates = snake3d_kinematics.joint_rates(state.quaternion, state.omega_body_rad_s)
        np.testing.assert_allclose(cardan_angle_rates(R, state.omega_body_rad_s), rates, atol=1e-12)
        tracked = lie.pose(R[5], state.position_m[5])  # link 6, the Vicon target
        x, R_chain = link_poses_from_joint_angles(angles, model.link_length_m, 0.0, 5, tracked)
        worst_position_m = max(worst_position_m, np.abs(x - state.position_m).max())
        worst_rotation = max(worst_rotation, np.abs(R_chain - R).max())
    assert state.t_s > 0.49 and np.ptp(state.position_m[:, :2]) > 0.1  # it really moved
    assert worst_position_m < 1e-9
    assert worst_rotation < 1e-9
