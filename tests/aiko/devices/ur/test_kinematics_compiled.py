"""The compiled kinematics the emulated controller ticks with, against the numpy reference in kinematics.py."""

import subprocess
import sys

import numpy as np
import pytest

from aiko.devices.ur import kinematics as kin
from aiko.devices.ur import kinematics_compiled as kc

RNG = np.random.default_rng(11)


def _away_from_singularities(q: np.ndarray) -> np.ndarray:
    q[2] = np.sign(q[2] or 1) * np.clip(abs(q[2]), 0.4, 2.5)
    q[4] = np.sign(q[4] or 1) * np.clip(abs(q[4]), 0.4, 2.7)
    return q


@pytest.mark.parametrize("model", [kin.UR3, kin.UR3E], ids=lambda m: m.name)
@pytest.mark.parametrize("trial", range(10))
def test_forward_kinematics_equal_the_reference(model, trial):
    q = RNG.uniform(-np.pi, np.pi, 6)
    tcp = np.concatenate([RNG.uniform(-0.05, 0.15, 3), RNG.uniform(-1.0, 1.0, 3)]) if trial % 2 else np.zeros(6)
    pose, flange, jac, tip, elbow, flange_pose, flange_jac = kc.forward_kinematics(kc.model_table(model), q, tcp)
    frames = kin.joint_frames(model, q)
    np.testing.assert_allclose(pose, kin.forward(model, q, tcp), rtol=0, atol=1e-12)
    np.testing.assert_allclose(flange, frames[-1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(tip, frames[-1] @ kin.pose_to_matrix(tcp), rtol=0, atol=1e-12)
    np.testing.assert_allclose(jac, kin.jacobian(model, q, tcp), rtol=0, atol=1e-12)
    np.testing.assert_allclose(elbow, frames[1][:3, 3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(flange_pose, kin.forward(model, q), rtol=0, atol=1e-12)
    np.testing.assert_allclose(flange_jac, kin.jacobian(model, q), rtol=0, atol=1e-12)


@pytest.mark.parametrize("trial", range(20))
def test_the_inverse_equals_the_reference(trial):
    q = _away_from_singularities(RNG.uniform(-2.5, 2.5, 6))
    tcp = np.array([0.0, 0.0, 0.1 * (trial % 3), 0.0, 0.0, 0.3 * (trial % 2)])
    pose = kin.forward(kin.UR3, q, tcp)
    seed = q + RNG.uniform(-0.15, 0.15, 6)
    compiled = kc.solve_inverse(kin.UR3, kc.model_table(kin.UR3), pose, seed, tcp)
    reference = kin.inverse(kin.UR3, pose, seed, tcp)
    # the same iteration to the same tolerance: the iterates agree to rounding, so both stop at the same step
    np.testing.assert_allclose(compiled, reference, rtol=0, atol=1e-12)
    reached = kin.pose_to_matrix(kin.forward(kin.UR3, compiled, tcp))
    np.testing.assert_allclose(reached, kin.pose_to_matrix(pose), rtol=0, atol=1e-6)


def test_the_inverse_wraps_to_the_turn_nearest_the_seed():
    q = np.array([0.3, -1.2, 1.4, -1.6, -1.5, -1.0])
    seed = q + np.array([0, 0, 0, 0, 0, 2 * np.pi - 0.05])  # the last joint a turn on, inside its +-2 pi range
    solved = kc.solve_inverse(kin.UR3, kc.model_table(kin.UR3), kin.forward(kin.UR3, q), seed, np.zeros(6))
    assert solved[5] == pytest.approx(q[5] + 2 * np.pi, abs=1e-6)


def test_a_pose_out_of_reach_raises_as_the_reference_does():
    seed = np.array([0, -1.57, 1.57, -1.57, -1.57, 0])
    with pytest.raises(kin.IKError, match="no inverse kinematics solution"):
        kc.solve_inverse(kin.UR3, kc.model_table(kin.UR3), np.array([1.5, 0.0, 0.3, 0.0, 3.14, 0.0]), seed, np.zeros(6))


def test_after_the_warm_up_a_moving_arms_ticks_load_no_kernel():
    """In a fresh process, the arm's constructor warms the kinematics; then the ticks of a moveL and of a servo
    stream give no compiled function a signature it did not have: nothing is loaded inside a controller tick.
    (Each compiled function called from Python loads its own cache entry; the warm-up once missed `pose_matrix`,
    and a quiet HIL run's first moving tick took 7-9 ms loading it.) Run twice: a process that compiles (an empty
    cache) registers the callees it compiles with their dispatchers and so cannot show what a loading one misses."""
    code = """
import numpy as np
from numba.core.registry import CPUDispatcher
from aiko.devices.ur import arm_sim, kinematics_compiled as kc

def loaded():
    return {n: len(f.signatures) for n, f in vars(kc).items() if isinstance(f, CPUDispatcher)}

sim = arm_sim.ArmSim()
warm = loaded()
pose = sim.tcp_pose().copy()
pose[2] -= 0.01
sim.start(arm_sim.MoveLMotion(sim, pose, 0.05, 1.0))
for _ in range(5):
    sim.tick(0.005)
sim.start(arm_sim.ServoMotion(sim.ik(pose), 0.1, 300.0))
for _ in range(5):
    sim.tick(0.005)
print(sorted(n for n, k in loaded().items() if k != warm[n]))
"""
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert done.stdout.strip() == "[]", done.stdout
