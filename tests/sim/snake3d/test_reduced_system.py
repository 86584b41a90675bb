"""The composite-rigid-body reduced system of the fast step equals the plain dense product Jᵀ J, Jᵀ f."""

import numpy as np
import pytest

from sim.snake3d import SnakeModel, fast, posture_state
from sim.snake3d import kinematics as kin


def _null_space(R: np.ndarray, half_L: float) -> tuple[np.ndarray, np.ndarray]:
    """N's rows per link (the step's section 3), written with numpy: link 1's twist, then the joint rates."""
    n = len(R)
    nz = 6 + 2 * (n - 1)
    Nv, Nw = np.zeros((n, 3, nz)), np.zeros((n, 3, nz))
    Nv[0, :, :3] = np.eye(3)
    Nw[0, :, 3:6] = R[0]
    for j in range(n - 1):
        w = 6 + 2 * j
        Nw[j + 1, :, :w] = Nw[j, :, :w]
        Nw[j + 1, :, w], Nw[j + 1, :, w + 1] = R[j, :, 1], R[j + 1, :, 0]
        zi, zj = half_L * R[j, :, 2], half_L * R[j + 1, :, 2]
        Nv[j + 1] = Nv[j] + np.cross(Nw[j].T, zi).T + np.cross(Nw[j + 1].T, zj).T
    return Nv, Nw


@pytest.mark.parametrize("n_links", [1, 2, 11, 21])
def test_composite_reduced_system_matches_the_dense_product(n_links):
    model = SnakeModel(n_links=n_links)
    rng = np.random.default_rng(n_links)
    state = posture_state(model, rng.uniform(-0.8, 0.8, (n_links - 1, 2)), head_direction_rad=0.7)
    R = kin.rotation_matrices(state.quaternion)
    Nv, Nw = _null_space(R, model.link_length_m / 2)
    theta = np.array([model.inertia_transverse_kg_m2] * 2 + [model.inertia_axial_kg_m2])
    args = (
        R, rng.normal(0, 2, (n_links, 3)), rng.normal(0, 0.3, (n_links, 3)), rng.normal(0, 0.5, (n_links, 3)),
        Nv, Nw, model.link_mass_kg, theta, model.gravity_vector(), model.dt_s, model.link_length_m / 2,
    )  # fmt: skip
    nz = Nv.shape[2]
    dense_M, dense_b = np.zeros((nz, nz)), np.zeros(nz)
    fast_M, fast_b = np.full((nz, nz), np.nan), np.zeros(nz)
    fast.reduced_system_dense(*args, dense_M, dense_b)
    fast.reduced_system(*args, fast_M, fast_b)
    lower = np.tril_indices(nz)
    scale = np.abs(dense_M).max()
    np.testing.assert_allclose(fast_M[lower], dense_M[lower], rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(fast_b, dense_b, rtol=0, atol=1e-14 * np.abs(dense_b).max())
    # and the dense form is Nᵀ M N itself
    M = np.diag(model.mass_diagonal())
    N = np.concatenate([np.concatenate([Nv[i], R[i].T @ Nw[i]]) for i in range(n_links)])
    np.testing.assert_allclose(dense_M, N.T @ M @ N, rtol=0, atol=1e-13 * scale)
