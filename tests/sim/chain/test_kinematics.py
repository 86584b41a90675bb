"""Forward kinematics, B and B_dot of the chain against finite differences and the geometric form."""

import numpy as np
import pytest

from sim import lie
from sim.chain import (
    Chain,
    ChainModelError,
    chain_frames,
    forward_kinematics,
    transfer_matrix,
    transfer_matrix_rate,
    uniform_chain,
)
from sim.chain.transfer import (
    stack_blocks,
    transfer_blocks,
    transfer_blocks_geometric,
    transfer_rate_blocks_geometric,
)

RNG = np.random.default_rng(2)


def tree_chain() -> Chain:
    """A branching tree: 0 <- 1 <- 2, 1 <- 3 <- 4, 0 <- 5, with generic (non-axis-aligned) joint axes."""
    parent = np.array([-1, 0, 1, 1, 3, 0])
    n = parent.size
    axes = RNG.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    J = np.array([np.diag(RNG.uniform(0.01, 0.03, 3)) for _ in range(n)])
    return Chain(
        parent=parent,
        joint_axis=axes,
        joint_offset_m=RNG.normal(scale=0.2, size=(n, 3)),
        com_offset_m=RNG.normal(scale=0.2, size=(n, 3)),
        mass_kg=RNG.uniform(0.5, 2.0, n),
        inertia_kg_m2=J,
    )


CHAINS = {
    "serial_zyzy": lambda: uniform_chain(7, 0.3, 1.2, 0.04, "zyzyxzy"),
    "serial_20": lambda: uniform_chain(20, 0.1, 0.1, 0.01, "zy" * 10),
    "tree": tree_chain,
}


def fd_velocity_blocks(chain, q, h=1e-6):
    """Central differences of forward kinematics: x_dot (inertial), omega (body frame) per joint rate."""
    n = chain.n_bodies
    Bx = np.zeros((n, 3, n))
    Bw = np.zeros((n, 3, n))
    _, R0 = forward_kinematics(chain, q)
    for j in range(n):
        dq = np.zeros(n)
        dq[j] = h
        xp, Rp = forward_kinematics(chain, q + dq)
        xm, Rm = forward_kinematics(chain, q - dq)
        Bx[:, :, j] = (xp - xm) / (2 * h)
        Bw[:, :, j] = lie.vee3(np.swapaxes(R0, 1, 2) @ (Rp - Rm) / (2 * h))
    return stack_blocks(Bx, Bw)


@pytest.mark.parametrize("name", CHAINS)
def test_B_matches_finite_differences_of_forward_kinematics(name):
    chain = CHAINS[name]()
    for _ in range(3):
        q = RNG.uniform(-np.pi, np.pi, chain.n_bodies)
        B = transfer_matrix(chain, q)
        fd = fd_velocity_blocks(chain, q)
        rel = np.max(np.abs(B - fd)) / np.max(np.abs(B))
        assert rel <= 1e-8, rel


@pytest.mark.parametrize("name", CHAINS)
def test_B_recursion_equals_geometric_form(name):
    chain = CHAINS[name]()
    q = RNG.uniform(-np.pi, np.pi, chain.n_bodies)
    frames = chain_frames(chain, q)
    for a, b in zip(transfer_blocks(chain, frames), transfer_blocks_geometric(chain, frames), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)


@pytest.mark.parametrize("name", CHAINS)
def test_B_dot_matches_finite_differences_of_B_along_q_dot(name):
    chain = CHAINS[name]()
    q = RNG.uniform(-np.pi, np.pi, chain.n_bodies)
    q_dot = RNG.normal(size=chain.n_bodies)
    h = 1e-6
    fd = (transfer_matrix(chain, q + h * q_dot) - transfer_matrix(chain, q - h * q_dot)) / (2 * h)
    B_dot = transfer_matrix_rate(chain, q, q_dot)
    scale = np.max(np.abs(fd))
    assert np.max(np.abs(B_dot - fd)) / scale <= 1e-8
    geometric = stack_blocks(*transfer_rate_blocks_geometric(chain, chain_frames(chain, q), q_dot))
    np.testing.assert_allclose(B_dot, geometric, rtol=0, atol=1e-12 * scale)


def test_B_layout_and_causality():
    """Rows 6i..6i+2 = x_dot^(i+1), 6i+3..6i+5 = omega^(i+1); joint j moves no body before it."""
    chain = uniform_chain(4, 1.0, 1.0, 0.1, "zzzz")
    B = transfer_matrix(chain, np.zeros(4))
    assert B.shape == (24, 4)
    # straight chain along e1, all axes e3: x_dot^(i) from joint j = e3 x (x_i - o_j) = (0, x_i - o_j, 0)
    for i in range(4):
        for j in range(4):
            expected_v = [0, (i + 0.5) - j, 0] if j <= i else [0, 0, 0]
            np.testing.assert_allclose(B[6 * i : 6 * i + 3, j], expected_v, atol=1e-15)
            np.testing.assert_allclose(B[6 * i + 3 : 6 * i + 6, j], [0, 0, 1] if j <= i else [0, 0, 0])


def test_forward_kinematics_of_straight_and_folded_chain():
    chain = uniform_chain(3, 2.0, 1.0, 0.1, "zzz")
    x, R = forward_kinematics(chain, np.zeros(3))
    np.testing.assert_allclose(x, [[1, 0, 0], [3, 0, 0], [5, 0, 0]], atol=1e-15)
    x, R = forward_kinematics(chain, np.array([np.pi / 2, np.pi / 2, 0.0]))
    np.testing.assert_allclose(x, [[0, 1, 0], [-1, 2, 0], [-3, 2, 0]], atol=1e-14)
    np.testing.assert_allclose(R[2], lie.R3(np.pi), atol=1e-15)


def test_base_pose_moves_the_whole_chain_rigidly():
    chain = uniform_chain(5, 0.2, 1.0, 0.02, "zyzyz")
    q = RNG.normal(size=5)
    g = lie.exp_se3(RNG.normal(size=6))
    x0, R0 = forward_kinematics(chain, q)
    x1, R1 = forward_kinematics(chain, q, base_pose=g)
    np.testing.assert_allclose(x1, x0 @ g[:3, :3].T + g[:3, 3], atol=1e-14)
    np.testing.assert_allclose(R1, g[:3, :3] @ R0, atol=1e-14)


def test_bad_inputs_raise_actionable_errors():
    with pytest.raises(ChainModelError, match="axes must name one generator per body: 3 characters"):
        uniform_chain(3, 1.0, 1.0, 0.1, "zy")
    with pytest.raises(ChainModelError, match="allowed letters are x, y, z"):
        uniform_chain(2, 1.0, 1.0, 0.1, "zq")
    with pytest.raises(ChainModelError, match="link_mass_kg must be > 0"):
        uniform_chain(2, 1.0, 0.0, 0.1, "zz")
    chain = uniform_chain(2, 1.0, 1.0, 0.1, "zz")
    with pytest.raises(ChainModelError, match=r"q must have shape \(2,\)"):
        forward_kinematics(chain, np.zeros(3))
    with pytest.raises(ChainModelError, match="parent"):
        Chain(
            parent=[0, -1],
            joint_axis=np.eye(3)[:2],
            joint_offset_m=np.zeros((2, 3)),
            com_offset_m=np.zeros((2, 3)),
            mass_kg=np.ones(2),
            inertia_kg_m2=np.tile(np.eye(3), (2, 1, 1)),
        )
    with pytest.raises(ChainModelError, match="unit vectors"):
        Chain(
            parent=[-1],
            joint_axis=[[0, 0, 2.0]],
            joint_offset_m=np.zeros((1, 3)),
            com_offset_m=np.zeros((1, 3)),
            mass_kg=np.ones(1),
            inertia_kg_m2=np.eye(3)[None],
        )
    assert not chain.joint_axis.flags.writeable
