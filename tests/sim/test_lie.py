"""so(3)/se(3) tools: round trips, identities, finite differences; scipy expm/Rotation as oracles."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.linalg import expm
from scipy.spatial.transform import Rotation

from sim import lie

RNG = np.random.default_rng(7)

# angles that straddle the Taylor-branch threshold and the pi singularity of log
ANGLES_RAD = [0.0, 1e-12, 1e-7, 1e-3, 0.2499, 0.2501, 0.6, 1.0, 2.5, np.pi - 1e-3, np.pi - 1e-8, np.pi]


def unit(v):
    return v / np.linalg.norm(v)


def random_rotvecs(n, max_angle=np.pi):
    axes = RNG.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    return axes * RNG.uniform(0, max_angle, size=(n, 1))


def rotvec_cases():
    axes = [unit(RNG.normal(size=3)) for _ in range(3)] + [np.array([1.0, 0, 0]), np.array([0, 0, -1.0])]
    return [a * t for a in axes for t in ANGLES_RAD]


def random_pose():
    return lie.pose(lie.exp_so3(random_rotvecs(1)[0]), RNG.normal(size=3))


def se3_jacobian_oracle(xi):
    """sum_k ad^k/(k+1)! = int_0^1 exp(s ad) ds = top-right block of expm([[ad, I], [0, 0]])."""
    A = np.zeros((12, 12))
    A[:6, :6] = lie.ad(xi)
    A[:6, 6:] = np.eye(6)
    return expm(A)[:6, 6:]


# ------------------------------------------------------------------------------------------ hat / vee
def test_hat3_is_cross_product_and_vee_inverts_it():
    w, x = RNG.normal(size=(2, 10, 3))
    np.testing.assert_allclose(np.einsum("nij,nj->ni", lie.hat3(w), x), np.cross(w, x), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(lie.vee3(lie.hat3(w)), w)
    xi = RNG.normal(size=(4, 2, 6))
    np.testing.assert_array_equal(lie.vee6(lie.hat6(xi)), xi)


def test_bad_shape_names_the_argument_and_expected_shape():
    with pytest.raises(ValueError, match=r"phi must have trailing shape \(3,\)"):
        lie.exp_so3(np.zeros(4))
    with pytest.raises(lie.LieShapeError, match=r"xi must have trailing shape \(6,\)"):
        lie.ad(np.zeros((2, 3)))


# ---------------------------------------------------------------------------------- elementary rotations
def test_elementary_rotations_match_paper_eq18_and_matrix_exponential():
    th = 0.7
    c, s = np.cos(th), np.sin(th)
    np.testing.assert_allclose(lie.R1(th), [[1, 0, 0], [0, c, -s], [0, s, c]], atol=1e-16)
    np.testing.assert_allclose(lie.R2(th), [[c, 0, s], [0, 1, 0], [-s, 0, c]], atol=1e-16)
    np.testing.assert_allclose(lie.R3(th), [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-16)
    for k, Rk in enumerate([lie.R1, lie.R2, lie.R3]):
        e = np.eye(3)[k]
        np.testing.assert_allclose(Rk(th), expm(lie.hat3(th * e)), atol=1e-15)
    assert lie.R3(np.array([0.1, 0.2, 0.3])).shape == (3, 3, 3)


# ---------------------------------------------------------------------------------------------- SO(3)
@pytest.mark.parametrize("phi", rotvec_cases())
def test_exp_so3_matches_expm_and_log_inverts_it(phi):
    R = lie.exp_so3(phi)
    np.testing.assert_allclose(R, expm(lie.hat3(phi)), rtol=0, atol=1e-14)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-15)
    back = lie.log_so3(R)
    theta = np.linalg.norm(phi)
    if theta < np.pi - 1e-6:
        np.testing.assert_allclose(back, phi, rtol=0, atol=1e-14 + 1e-14 * theta)
    else:  # at pi the rotation vector is defined up to sign; the round trip exp(log R) = R is what matters
        np.testing.assert_allclose(lie.exp_so3(back), R, atol=1e-14)
        np.testing.assert_allclose(np.linalg.norm(back), theta, atol=1e-8)
    # agreement with scipy (which is robust at pi) up to the sign ambiguity there
    ref = Rotation.from_matrix(R).as_rotvec()
    if theta < np.pi - 1e-6:
        np.testing.assert_allclose(back, ref, atol=1e-12)


def test_log_so3_tiny_angles_keep_relative_precision():
    for theta in [1e-15, 1e-10, 1e-5]:
        phi = theta * unit(np.array([0.2, -0.5, 0.8]))
        np.testing.assert_allclose(lie.log_so3(lie.exp_so3(phi)), phi, rtol=1e-12, atol=0)


def test_so3_batching_matches_one_by_one():
    phis = random_rotvecs(24).reshape(4, 6, 3)
    Rs = lie.exp_so3(phis)
    assert Rs.shape == (4, 6, 3, 3)
    for idx in np.ndindex(4, 6):
        np.testing.assert_array_equal(Rs[idx], lie.exp_so3(phis[idx]))
    np.testing.assert_allclose(lie.log_so3(Rs), phis, atol=1e-12)


@pytest.mark.parametrize("phi", rotvec_cases())
def test_so3_left_and_right_jacobians_against_finite_differences(phi):
    h = 1e-6
    Jl, Jr = lie.left_jacobian_so3(phi), lie.right_jacobian_so3(phi)
    R = lie.exp_so3(phi)
    for k in range(3):
        d = np.eye(3)[k]
        Rp, Rm = lie.exp_so3(phi + h * d), lie.exp_so3(phi - h * d)
        left = (lie.log_so3(Rp @ R.T) - lie.log_so3(Rm @ R.T)) / (2 * h)
        right = (lie.log_so3(R.T @ Rp) - lie.log_so3(R.T @ Rm)) / (2 * h)
        np.testing.assert_allclose(left, Jl[:, k], atol=1e-9)
        np.testing.assert_allclose(right, Jr[:, k], atol=1e-9)
    np.testing.assert_allclose(Jr, Jl.T, atol=1e-15)
    np.testing.assert_allclose(lie.left_jacobian_so3_inv(phi) @ Jl, np.eye(3), atol=1e-13)
    np.testing.assert_allclose(lie.right_jacobian_so3_inv(phi) @ Jr, np.eye(3), atol=1e-13)
    # the SO(3) block of the series definition
    np.testing.assert_allclose(Jl, se3_jacobian_oracle(np.r_[phi, 0, 0, 0])[:3, :3], atol=1e-14)


def test_project_to_so3_recovers_a_rotation_from_a_perturbed_one():
    R = lie.exp_so3(np.array([0.3, -1.2, 0.5]))
    noisy = R + 1e-7 * RNG.normal(size=(3, 3))
    P = lie.project_to_so3(noisy)
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-15)
    assert np.isclose(np.linalg.det(P), 1.0)
    assert np.max(np.abs(P - R)) < 1e-6


# ---------------------------------------------------------------------------------------------- SE(3)
@pytest.mark.parametrize("phi", rotvec_cases())
def test_exp_se3_matches_expm_and_log_inverts_it(phi):
    rho = np.array([0.4, -1.1, 2.0])
    xi = np.r_[phi, rho]
    g = lie.exp_se3(xi)
    np.testing.assert_allclose(g, expm(lie.hat6(xi)), rtol=0, atol=5e-14)
    if np.linalg.norm(phi) < np.pi - 1e-6:
        np.testing.assert_allclose(lie.log_se3(g), xi, atol=1e-12)
    else:
        np.testing.assert_allclose(lie.exp_se3(lie.log_se3(g)), g, atol=1e-12)


def test_pose_inverse_and_paper_names():
    g = random_pose()
    np.testing.assert_allclose(lie.E_inv(g) @ g, np.eye(4), atol=1e-15)
    np.testing.assert_allclose(lie.pose_inv(g), np.linalg.inv(g), atol=1e-14)
    assert lie.E is lie.pose


def test_Ad_conjugates_twists_and_is_a_homomorphism():
    g1, g2 = random_pose(), random_pose()
    xi = RNG.normal(size=6)
    np.testing.assert_allclose(lie.hat6(lie.Ad(g1) @ xi), g1 @ lie.hat6(xi) @ lie.pose_inv(g1), atol=1e-14)
    np.testing.assert_allclose(lie.Ad(g1 @ g2), lie.Ad(g1) @ lie.Ad(g2), atol=1e-13)
    np.testing.assert_allclose(lie.Ad_inv(g1), np.linalg.inv(lie.Ad(g1)), atol=1e-13)
    np.testing.assert_allclose(lie.Ad_star(g1), np.linalg.inv(lie.Ad(g1)).T, atol=1e-13)
    # Ad* preserves power: <Ad*_g w, Ad_g eta> = <w, eta>
    w, eta = RNG.normal(size=(2, 6))
    assert np.isclose((lie.Ad_star(g1) @ w) @ (lie.Ad(g1) @ eta), w @ eta, rtol=1e-13)


def test_ad_is_the_lie_bracket_and_the_derivative_of_Ad():
    xi, eta = RNG.normal(size=(2, 6))
    X, Y = lie.hat6(xi), lie.hat6(eta)
    np.testing.assert_allclose(lie.ad(xi) @ eta, lie.vee6(X @ Y - Y @ X), atol=1e-14)
    np.testing.assert_allclose(lie.Ad(lie.exp_se3(xi)), expm(lie.ad(xi)), atol=1e-12)
    h = 1e-6
    dAd = (lie.Ad(lie.exp_se3(h * xi)) - lie.Ad(lie.exp_se3(-h * xi))) / (2 * h)
    np.testing.assert_allclose(dAd, lie.ad(xi), atol=1e-9)
    dAd_star = (lie.Ad_star(lie.exp_se3(h * xi)) - lie.Ad_star(lie.exp_se3(-h * xi))) / (2 * h)
    np.testing.assert_allclose(dAd_star, lie.ad_star(xi), atol=1e-9)
    np.testing.assert_allclose(lie.ad_star(xi), -lie.ad(xi).T, atol=0)


@pytest.mark.parametrize("phi", rotvec_cases())
def test_se3_jacobians_match_series_and_finite_differences(phi):
    rho = np.array([0.7, 0.2, -1.3])
    xi = np.r_[phi, rho]
    Jl = lie.left_jacobian_se3(xi)
    np.testing.assert_allclose(Jl, se3_jacobian_oracle(xi), rtol=0, atol=1e-13)
    np.testing.assert_allclose(lie.right_jacobian_se3(xi), se3_jacobian_oracle(-xi), rtol=0, atol=1e-13)
    np.testing.assert_allclose(lie.left_jacobian_se3_inv(xi) @ Jl, np.eye(6), atol=1e-12)
    Jr = lie.right_jacobian_se3(xi)
    np.testing.assert_allclose(lie.right_jacobian_se3_inv(xi) @ Jr, np.eye(6), atol=1e-12)
    assert lie.tangent_se3 is lie.left_jacobian_se3 and lie.tangent_se3_inv is lie.left_jacobian_se3_inv
    if np.linalg.norm(phi) > np.pi - 1e-2:
        return  # log not differentiable at pi
    h = 1e-6
    g = lie.exp_se3(xi)
    gi = lie.pose_inv(g)
    for k in range(6):
        d = np.eye(6)[k]
        gp, gm = lie.exp_se3(xi + h * d), lie.exp_se3(xi - h * d)
        left = (lie.log_se3(gp @ gi) - lie.log_se3(gm @ gi)) / (2 * h)
        right = (lie.log_se3(gi @ gp) - lie.log_se3(gi @ gm)) / (2 * h)
        np.testing.assert_allclose(left, Jl[:, k], atol=1e-8)
        np.testing.assert_allclose(right, Jr[:, k], atol=1e-8)


def test_jacobians_are_continuous_across_the_taylor_threshold():
    axis = unit(np.array([0.3, 0.9, -0.2]))
    rho = np.array([1.0, -2.0, 0.5])
    below = lie.SMALL_ANGLE_RAD * (1 - 1e-9) * axis
    above = lie.SMALL_ANGLE_RAD * (1 + 1e-9) * axis
    for f in [lie.left_jacobian_se3, lie.left_jacobian_se3_inv]:
        np.testing.assert_allclose(f(np.r_[below, rho]), f(np.r_[above, rho]), atol=1e-14)
    for f in [lie.exp_so3, lie.left_jacobian_so3, lie.left_jacobian_so3_inv]:
        np.testing.assert_allclose(f(below), f(above), atol=1e-14)


def test_tangent_operator_gives_the_exact_frozen_strain_substep():
    """Cosserat exact sub-step (paper 004 notes): for eta' = Phi q' - ad_xi eta with frozen xi over length h,
    eta(h) = Ad_{exp(-h xi)} (eta(0) + h T_{h xi} Phi q'). Compare with solve_ivp of the linear ODE."""
    from scipy.integrate import solve_ivp

    xi = np.array([0.3, -0.8, 1.1, 1.0, 0.1, -0.2])
    source = RNG.normal(size=6)
    eta0 = RNG.normal(size=6)
    h = 0.37
    sol = solve_ivp(lambda s, y: source - lie.ad(xi) @ y, (0, h), eta0, rtol=1e-12, atol=1e-13, method="DOP853")
    exact = lie.Ad(lie.exp_se3(-h * xi)) @ (eta0 + h * lie.tangent_se3(h * xi) @ source)
    np.testing.assert_allclose(exact, sol.y[:, -1], atol=1e-10)


def test_se3_batching():
    xi = RNG.normal(size=(3, 5, 6))
    for f, shape in [
        (lie.exp_se3, (4, 4)),
        (lie.ad, (6, 6)),
        (lie.left_jacobian_se3, (6, 6)),
        (lie.left_jacobian_se3_inv, (6, 6)),
    ]:
        out = f(xi)
        assert out.shape == (3, 5) + shape
        np.testing.assert_allclose(out[2, 4], f(xi[2, 4]), atol=1e-15)
    g = lie.exp_se3(xi)
    assert lie.Ad(g).shape == (3, 5, 6, 6)
    np.testing.assert_allclose(lie.exp_se3(lie.log_se3(g)), g, atol=1e-12)


# ------------------------------------------------------------------------------------ property-based checks

finite = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)
unit_axes = arrays(float, 3, elements=finite).filter(lambda v: np.linalg.norm(v) > 1e-3).map(unit)
# angles concentrated where the formulas switch or degenerate: 0, the series threshold, pi
angles = st.one_of(
    st.floats(0.0, 1e-6),
    st.floats(0.2, 0.3),
    st.floats(0.0, np.pi - 1e-6),
    st.floats(np.pi - 1e-6, np.pi - 1e-12),
)


@settings(max_examples=300, deadline=None)
@given(axis=unit_axes, angle=angles, rho=arrays(float, 3, elements=st.floats(-5, 5)))
def test_property_exp_log_round_trips_and_jacobian_inverses(axis, angle, rho):
    phi = angle * axis
    R = lie.exp_so3(phi)
    np.testing.assert_allclose(lie.exp_so3(lie.log_so3(R)), R, atol=1e-13)
    xi = np.r_[phi, rho]
    g = lie.exp_se3(xi)
    np.testing.assert_allclose(lie.exp_se3(lie.log_se3(g)), g, atol=1e-9 * (1 + np.linalg.norm(rho)))
    np.testing.assert_allclose(lie.left_jacobian_se3_inv(xi) @ lie.left_jacobian_se3(xi), np.eye(6), atol=1e-9)
    # J_l(phi) = R J_r(phi): the two Jacobians differ by the rotation itself
    np.testing.assert_allclose(lie.left_jacobian_so3(phi), R @ lie.right_jacobian_so3(phi), atol=1e-14)


@settings(max_examples=100, deadline=None)
@given(
    xi1=arrays(float, 6, elements=st.floats(-3, 3)),
    xi2=arrays(float, 6, elements=st.floats(-3, 3)),
    eta=arrays(float, 6, elements=st.floats(-3, 3)),
)
def test_property_adjoint_identities(xi1, xi2, eta):
    g1, g2 = lie.exp_se3(xi1), lie.exp_se3(xi2)
    scale = 1 + np.abs(g1).max() * np.abs(g2).max()
    np.testing.assert_allclose(lie.Ad(g1 @ g2), lie.Ad(g1) @ lie.Ad(g2), atol=1e-12 * scale**2)
    # Ad_g ad_eta Ad_g^-1 = ad_{Ad_g eta}
    np.testing.assert_allclose(
        lie.Ad(g1) @ lie.ad(eta) @ lie.Ad_inv(g1), lie.ad(lie.Ad(g1) @ eta), atol=1e-11 * scale**2
    )
