"""The compiled joint state equals the readable definitions (eq. 63, 65–67) on random link attitudes and rates."""

import numpy as np
import pytest

from sim.snake3d import kinematics as kin
from sim.snake3d.joint_state import joint_state


@pytest.mark.parametrize("seed", range(5))
def test_compiled_joint_state_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=(11, 4))
    quat /= np.linalg.norm(quat, axis=1)[:, None]
    omega = rng.normal(scale=2.0, size=(11, 3))
    angles, rates = joint_state(quat, omega)
    np.testing.assert_allclose(angles, kin.joint_angles(quat), rtol=0, atol=1e-12)
    np.testing.assert_allclose(rates, kin.joint_rates(quat, omega), rtol=0, atol=1e-12)


def test_a_straight_resting_snake_has_zero_joint_state():
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (11, 1))
    angles, rates = joint_state(quat, np.zeros((11, 3)))
    assert not angles.any() and not rates.any()
