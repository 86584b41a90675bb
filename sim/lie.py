"""so(3) / se(3) tools shared by the chain model (paper 002) and the Cosserat rod (paper 004).

Conventions (one set for the whole stack):

* Rotations are active: ``x_world = R @ x_body``. Elementary rotations R1/R2/R3 are eq. 18 of paper 002.
* A pose is the 4x4 homogeneous matrix g = E = [[R, p], [0, 1]] (paper 002 eq. 31, "frame connection").
* Twists are **angular-first**, xi = [omega; v] (paper 004 convention), hat(xi) = [[omega^, v], [0, 0]].
  Wrenches are [moment; force].
* Ad_g = [[R, 0], [p^ R, R]],  ad_xi = [[omega^, 0], [v^, omega^]],
  Ad*_g = Ad_g^{-T} (acts on wrenches, preserves power <Ad*_g w, Ad_g eta> = <w, eta>),
  ad*_xi = -ad_xi^T (= d/dt Ad*_{exp(t xi)} at t = 0, the convention of Renda et al. used in paper 004).
* Left Jacobians: exp(phi + d) = exp(J_l(phi) d) exp(phi) + O(d^2); J_l = sum_k ad^k / (k+1)! = (e^ad - 1)/ad.
  Right Jacobians: exp(phi + d) = exp(phi) exp(J_r(phi) d); J_r(phi) = J_l(-phi) (= J_l^T on SO(3)).
  The Cosserat "tangent operator" T_Omega = sum_k ad_Omega^k/(k+1)! is the left Jacobian of SE(3) (also
  called dexp_Omega in the Lie-group-integrator literature): ``tangent_se3`` is an alias.

Every function accepts batches: vectors (..., 3) / (..., 6), matrices (..., 3, 3) / (..., 4, 4), and returns
the matching leading shape. The formulas are written out (instead of calling scipy.linalg.expm or
scipy.spatial.transform.Rotation) because we need (a) Taylor branches near zero angle accurate to machine
precision for the rod's tiny per-section strains, (b) arbitrary leading batch shapes, and (c) closed forms for
the SE(3) Jacobians that scipy does not offer. The tests compare against scipy's expm/Rotation as oracles.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "SMALL_ANGLE_RAD",
    "hat3",
    "vee3",
    "hat6",
    "vee6",
    "R1",
    "R2",
    "R3",
    "exp_so3",
    "log_so3",
    "exp_se3",
    "log_se3",
    "pose",
    "pose_inv",
    "pose_parts",
    "E",
    "E_inv",
    "Ad",
    "Ad_inv",
    "Ad_star",
    "ad",
    "ad_star",
    "left_jacobian_so3",
    "left_jacobian_so3_inv",
    "right_jacobian_so3",
    "right_jacobian_so3_inv",
    "left_jacobian_se3",
    "left_jacobian_se3_inv",
    "right_jacobian_se3",
    "right_jacobian_se3_inv",
    "tangent_se3",
    "tangent_se3_inv",
    "project_to_so3",
]

#: Below this angle the trigonometric coefficients are evaluated by their Taylor series (7 terms, Horner).
#: The closed forms cancel catastrophically near zero (e.g. (t^2 + 2 cos t - 2)/(2 t^4) loses eps/t^4), so the
#: switch sits where the closed forms are already accurate to ~eps/t^2 ~ 4e-15 and the series' truncation
#: error (~t^14/14!) is below 1e-20.
SMALL_ANGLE_RAD = 0.25


class LieShapeError(ValueError):
    """An array given to a Lie-group function has the wrong trailing shape."""


def _check_trailing(a: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.shape[a.ndim - len(shape) :] != shape or a.ndim < len(shape):
        raise LieShapeError(f"{name} must have trailing shape {shape}, got array of shape {a.shape}")
    return a


# ----------------------------------------------------------------------------------------------- hat / vee
def hat3(w: np.ndarray) -> np.ndarray:
    """Skew matrix w^ with w^ x = w x x; (..., 3) -> (..., 3, 3)."""
    w = _check_trailing(w, (3,), "w")
    out = np.zeros(w.shape[:-1] + (3, 3))
    out[..., 0, 1] = -w[..., 2]
    out[..., 0, 2] = w[..., 1]
    out[..., 1, 0] = w[..., 2]
    out[..., 1, 2] = -w[..., 0]
    out[..., 2, 0] = -w[..., 1]
    out[..., 2, 1] = w[..., 0]
    return out


def vee3(W: np.ndarray) -> np.ndarray:
    """Inverse of hat3, reading the skew part ((W - W^T)/2) so near-skew input is tolerated."""
    W = _check_trailing(W, (3, 3), "W")
    return 0.5 * np.stack(
        [W[..., 2, 1] - W[..., 1, 2], W[..., 0, 2] - W[..., 2, 0], W[..., 1, 0] - W[..., 0, 1]], axis=-1
    )


def hat6(xi: np.ndarray) -> np.ndarray:
    """Twist [omega; v] -> 4x4 matrix [[omega^, v], [0, 0]] in se(3)."""
    xi = _check_trailing(xi, (6,), "xi")
    out = np.zeros(xi.shape[:-1] + (4, 4))
    out[..., :3, :3] = hat3(xi[..., :3])
    out[..., :3, 3] = xi[..., 3:]
    return out


def vee6(X: np.ndarray) -> np.ndarray:
    """Inverse of hat6: 4x4 se(3) matrix -> [omega; v]."""
    X = _check_trailing(X, (4, 4), "X")
    return np.concatenate([vee3(X[..., :3, :3]), X[..., :3, 3]], axis=-1)


# ------------------------------------------------------------------------------------ elementary rotations
def _elementary(theta_rad: np.ndarray, i: int, j: int) -> np.ndarray:
    th = np.asarray(theta_rad, dtype=float)
    c, s = np.cos(th), np.sin(th)
    out = np.zeros(th.shape + (3, 3))
    k = 3 - i - j
    out[..., k, k] = 1.0
    out[..., i, i] = c
    out[..., j, j] = c
    out[..., i, j] = -s
    out[..., j, i] = s
    return out


def R1(theta_rad: np.ndarray | float) -> np.ndarray:
    """Rotation by theta about e1 (paper 002 eq. 18a); scalar or array of angles -> (..., 3, 3)."""
    return _elementary(theta_rad, 1, 2)


def R2(theta_rad: np.ndarray | float) -> np.ndarray:
    """Rotation by theta about e2 (eq. 18c): note the sign pattern [[c,0,s],[0,1,0],[-s,0,c]]."""
    return _elementary(theta_rad, 2, 0)


def R3(theta_rad: np.ndarray | float) -> np.ndarray:
    """Rotation by theta about e3 (eq. 18e)."""
    return _elementary(theta_rad, 0, 1)


# --------------------------------------------------------------------------------- scalar coefficient kit
def _angle(w: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("...i,...i->...", w, w))


def _factorial_series(fn, n_terms: int = 7) -> np.ndarray:
    """Coefficients c_m (m = 0..n_terms-1) of a power series in t^2, c_m = fn(m) (exact factorials)."""
    return np.array([fn(m) for m in range(n_terms)], dtype=float)


_F = math.factorial
# f(t) = sum_m c_m t^(2m) for small t; derivations in the docstrings of the closed forms below.
_SERIES_A = _factorial_series(lambda m: (-1) ** m / _F(2 * m + 1))  # sin t / t
_SERIES_B = _factorial_series(lambda m: (-1) ** m / _F(2 * m + 2))  # (1 - cos t)/t^2
_SERIES_C = _factorial_series(lambda m: (-1) ** m / _F(2 * m + 3))  # (t - sin t)/t^3
_SERIES_D = _factorial_series(lambda m: (-1) ** m / _F(2 * m + 4))  # (t^2 + 2 cos t - 2)/(2 t^4)
_SERIES_E = _factorial_series(lambda m: (-1) ** m * (m + 1) / _F(2 * m + 5))  # (2t - 3 sin t + t cos t)/(2 t^5)
# (1 - (t/2) cot(t/2))/t^2 = -sum_{n>=1} (-1)^n B_2n t^(2n-2)/(2n)!  (Bernoulli numbers B_2n)
_BERNOULLI_2N = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6]
_SERIES_JINV = np.array([-((-1) ** n) * _BERNOULLI_2N[n - 1] / _F(2 * n) for n in range(1, 8)])


def _horner(t2: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    out = np.full_like(t2, coeffs[-1])
    for c in coeffs[-2::-1]:
        out = out * t2 + c
    return out


def _coeffs_so3(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a = sin t / t, b = (1 - cos t)/t^2, c = (t - sin t)/t^3, with Taylor branches near 0."""
    t2 = theta * theta
    small = theta < SMALL_ANGLE_RAD
    ts = np.where(small, 1.0, theta)  # safe denominator
    a = np.where(small, _horner(t2, _SERIES_A), np.sin(ts) / ts)
    b = np.where(small, _horner(t2, _SERIES_B), 2.0 * np.sin(0.5 * ts) ** 2 / ts**2)
    c = np.where(small, _horner(t2, _SERIES_C), (ts - np.sin(ts)) / ts**3)
    return a, b, c


# ------------------------------------------------------------------------------------------------ SO(3)
def exp_so3(phi: np.ndarray) -> np.ndarray:
    """Rodrigues: exp(phi^) = I + (sin t/t) phi^ + ((1-cos t)/t^2) phi^^2; (..., 3) -> (..., 3, 3)."""
    phi = _check_trailing(phi, (3,), "phi")
    a, b, _ = _coeffs_so3(_angle(phi))
    W = hat3(phi)
    return np.eye(3) + a[..., None, None] * W + b[..., None, None] * (W @ W)


def log_so3(R: np.ndarray) -> np.ndarray:
    """Rotation vector phi (|phi| <= pi) with exp_so3(phi) = R; robust at 0 and at pi.

    The angle uses atan2(|sin|, cos) (accurate everywhere, unlike arccos near 0 and pi). Near pi, where the
    skew part vanishes, the axis is read from the symmetric part (R + R^T)/2 = cos t I + (1 - cos t) a a^T.
    """
    R = _check_trailing(R, (3, 3), "R")
    s_vec = vee3(R)  # = sin(t) * axis
    sin_t = _angle(s_vec)
    cos_t = 0.5 * (np.trace(R, axis1=-2, axis2=-1) - 1.0)
    theta = np.arctan2(sin_t, cos_t)
    a, _, _ = _coeffs_so3(theta)
    phi_regular = s_vec / np.where(a > 1e-12, a, 1.0)[..., None]
    # near pi: axis from the symmetric part; pick the largest diagonal of a a^T for conditioning
    near_pi = cos_t < -0.99
    if np.any(near_pi):
        S = 0.5 * (R + np.swapaxes(R, -1, -2))
        one_minus_cos = (1.0 - cos_t)[..., None, None]
        A = (S - cos_t[..., None, None] * np.eye(3)) / one_minus_cos  # = a a^T
        diag = np.diagonal(A, axis1=-2, axis2=-1)
        k = np.argmax(diag, axis=-1)
        col = np.take_along_axis(A, k[..., None, None].repeat(3, axis=-1), axis=-2)[..., 0, :]
        axis = col / np.sqrt(np.take_along_axis(diag, k[..., None], axis=-1).clip(min=1e-300))
        # choose the sign agreeing with the (small but non-zero) skew part
        sign = np.where(np.einsum("...i,...i->...", axis, s_vec) < 0.0, -1.0, 1.0)
        phi_pi = (sign * theta)[..., None] * axis
        phi_regular = np.where(near_pi[..., None], phi_pi, phi_regular)
    return phi_regular


def left_jacobian_so3(phi: np.ndarray) -> np.ndarray:
    """J_l(phi) = I + ((1-cos t)/t^2) phi^ + ((t - sin t)/t^3) phi^^2 (paper 004 eq. 49)."""
    phi = _check_trailing(phi, (3,), "phi")
    _, b, c = _coeffs_so3(_angle(phi))
    W = hat3(phi)
    return np.eye(3) + b[..., None, None] * W + c[..., None, None] * (W @ W)


def left_jacobian_so3_inv(phi: np.ndarray) -> np.ndarray:
    """J_l^{-1}(phi) = I - phi^/2 + (1/t^2)(1 - (t/2) cot(t/2)) phi^^2; singular at t = 2 pi."""
    phi = _check_trailing(phi, (3,), "phi")
    t = _angle(phi)
    t2 = t * t
    small = t < SMALL_ANGLE_RAD
    ts = np.where(small, 1.0, t)
    d = np.where(small, _horner(t2, _SERIES_JINV), (1.0 - 0.5 * ts / np.tan(0.5 * ts)) / ts**2)
    W = hat3(phi)
    return np.eye(3) - 0.5 * W + d[..., None, None] * (W @ W)


def right_jacobian_so3(phi: np.ndarray) -> np.ndarray:
    """J_r(phi) = J_l(-phi): exp(phi + d) = exp(phi) exp(J_r d)."""
    return left_jacobian_so3(-np.asarray(phi, dtype=float))


def right_jacobian_so3_inv(phi: np.ndarray) -> np.ndarray:
    """Inverse of right_jacobian_so3."""
    return left_jacobian_so3_inv(-np.asarray(phi, dtype=float))


def project_to_so3(M: np.ndarray) -> np.ndarray:
    """Nearest rotation (Frobenius) to M via SVD; used to clean accumulated round-off in long products."""
    M = _check_trailing(M, (3, 3), "M")
    U, _, Vt = np.linalg.svd(M)
    d = np.sign(np.linalg.det(U @ Vt))
    U = U.copy()
    U[..., :, 2] *= d[..., None]
    return U @ Vt


# ------------------------------------------------------------------------------------------------ SE(3)
def pose(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Frame connection E = [[R, p], [0, 1]] (paper 002 eq. 31) from (..., 3, 3) and (..., 3)."""
    R = _check_trailing(R, (3, 3), "R")
    p = _check_trailing(p, (3,), "p")
    lead = np.broadcast_shapes(R.shape[:-2], p.shape[:-1])
    out = np.zeros(lead + (4, 4))
    out[..., :3, :3] = R
    out[..., :3, 3] = p
    out[..., 3, 3] = 1.0
    return out


def pose_parts(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) of a pose (views into g)."""
    g = _check_trailing(g, (4, 4), "g")
    return g[..., :3, :3], g[..., :3, 3]


def pose_inv(g: np.ndarray) -> np.ndarray:
    """E^{-1} = [[R^T, -R^T p], [0, 1]] (paper 002 eq. 32), exact (no general matrix inverse)."""
    R, p = pose_parts(g)
    Rt = np.swapaxes(R, -1, -2)
    return pose(Rt, -np.einsum("...ij,...j->...i", Rt, p))


#: Paper 002 names for the frame connection and its inverse.
E = pose
E_inv = pose_inv


def _q_block(phi: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Lower-left 3x3 block of the SE(3) left Jacobian (angular-first), Barfoot's Q(rho, phi).

    Q = 1/2 P + c (W P + P W + W P W) + d (W^2 P + P W^2 - 3 W P W) + e (W P W^2 + W^2 P W),
    W = phi^, P = rho^; c = (t - sin t)/t^3, d = (t^2 + 2 cos t - 2)/(2 t^4),
    e = (2t - 3 sin t + t cos t)/(2 t^5).
    """
    t = _angle(phi)
    t2 = t * t
    small = t < SMALL_ANGLE_RAD
    ts = np.where(small, 1.0, t)
    _, _, c = _coeffs_so3(t)
    d = np.where(small, _horner(t2, _SERIES_D), (ts**2 + 2.0 * np.cos(ts) - 2.0) / (2.0 * ts**4))
    e = np.where(small, _horner(t2, _SERIES_E), (2.0 * ts - 3.0 * np.sin(ts) + ts * np.cos(ts)) / (2.0 * ts**5))
    W = hat3(phi)
    P = hat3(rho)
    WP = W @ P
    PW = P @ W
    WPW = WP @ W
    WW = W @ W
    return (
        0.5 * P
        + c[..., None, None] * (WP + PW + WPW)
        + d[..., None, None] * (WW @ P + P @ WW - 3.0 * WPW)
        + e[..., None, None] * (WPW @ W + W @ WPW)
    )


def exp_se3(xi: np.ndarray) -> np.ndarray:
    """exp of the twist xi = [phi; rho]: [[exp(phi^), J_l(phi) rho], [0, 1]]; (..., 6) -> (..., 4, 4)."""
    xi = _check_trailing(xi, (6,), "xi")
    phi, rho = xi[..., :3], xi[..., 3:]
    return pose(exp_so3(phi), np.einsum("...ij,...j->...i", left_jacobian_so3(phi), rho))


def log_se3(g: np.ndarray) -> np.ndarray:
    """Inverse of exp_se3 (|phi| <= pi): [phi; J_l(phi)^{-1} p]."""
    R, p = pose_parts(g)
    phi = log_so3(R)
    rho = np.einsum("...ij,...j->...i", left_jacobian_so3_inv(phi), p)
    return np.concatenate([phi, rho], axis=-1)


def Ad(g: np.ndarray) -> np.ndarray:
    """Adjoint of a pose on angular-first twists: [[R, 0], [p^ R, R]] (6x6)."""
    R, p = pose_parts(g)
    out = np.zeros(R.shape[:-2] + (6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., 3:, :3] = hat3(p) @ R
    return out


def Ad_inv(g: np.ndarray) -> np.ndarray:
    """Ad_{g^{-1}} = [[R^T, 0], [-R^T p^, R^T]], computed without a matrix inverse."""
    return Ad(pose_inv(g))


def Ad_star(g: np.ndarray) -> np.ndarray:
    """Co-adjoint on wrenches [moment; force]: Ad*_g = Ad_g^{-T} = [[R, p^ R], [0, R]]."""
    return np.swapaxes(Ad_inv(g), -1, -2)


def ad(xi: np.ndarray) -> np.ndarray:
    """Small adjoint (Lie bracket matrix) of xi = [omega; v]: [[omega^, 0], [v^, omega^]]."""
    xi = _check_trailing(xi, (6,), "xi")
    W = hat3(xi[..., :3])
    out = np.zeros(xi.shape[:-1] + (6, 6))
    out[..., :3, :3] = W
    out[..., 3:, 3:] = W
    out[..., 3:, :3] = hat3(xi[..., 3:])
    return out


def ad_star(xi: np.ndarray) -> np.ndarray:
    """Co-adjoint ad*_xi = -ad_xi^T = [[omega^, v^], [0, omega^]] (Renda / paper 004 convention)."""
    return -np.swapaxes(ad(xi), -1, -2)


def left_jacobian_se3(xi: np.ndarray) -> np.ndarray:
    """J_l(xi) = sum_k ad_xi^k/(k+1)! = [[J_l(phi), 0], [Q(phi, rho), J_l(phi)]] (closed form)."""
    xi = _check_trailing(xi, (6,), "xi")
    phi, rho = xi[..., :3], xi[..., 3:]
    J = left_jacobian_so3(phi)
    out = np.zeros(xi.shape[:-1] + (6, 6))
    out[..., :3, :3] = J
    out[..., 3:, 3:] = J
    out[..., 3:, :3] = _q_block(phi, rho)
    return out


def left_jacobian_se3_inv(xi: np.ndarray) -> np.ndarray:
    """Inverse of left_jacobian_se3: [[Ji, 0], [-Ji Q Ji, Ji]], Ji = J_l(phi)^{-1}."""
    xi = _check_trailing(xi, (6,), "xi")
    phi, rho = xi[..., :3], xi[..., 3:]
    Ji = left_jacobian_so3_inv(phi)
    out = np.zeros(xi.shape[:-1] + (6, 6))
    out[..., :3, :3] = Ji
    out[..., 3:, 3:] = Ji
    out[..., 3:, :3] = -Ji @ _q_block(phi, rho) @ Ji
    return out


def right_jacobian_se3(xi: np.ndarray) -> np.ndarray:
    """J_r(xi) = J_l(-xi) = sum_k (-ad_xi)^k/(k+1)!: exp(xi + d) = exp(xi) exp(J_r d)."""
    return left_jacobian_se3(-np.asarray(xi, dtype=float))


def right_jacobian_se3_inv(xi: np.ndarray) -> np.ndarray:
    """Inverse of right_jacobian_se3."""
    return left_jacobian_se3_inv(-np.asarray(xi, dtype=float))


#: The Cosserat rod's tangent operator T_Omega = sum_k ad_Omega^k/(k+1)! (= dexp_Omega) and its inverse.
tangent_se3 = left_jacobian_se3
tangent_se3_inv = left_jacobian_se3_inv
