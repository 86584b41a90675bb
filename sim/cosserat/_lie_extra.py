"""numba kernels for SE(3) used in the Cosserat forward sweep.

Why a separate copy of some SE(3) maps: the rod's hot loop runs inside numba and must accept *complex* arrays
(the sweep is evaluated at q + i·ε·q̇ to get J̇·q̇ exactly by the complex step), so every map here is written
analytically (no abs(), no conjugates; branches test the real part only). `sim/lie.py` is the
readable reference; tests compare these kernels against it. Conventions: twists angular-first [ω; v],
ad_ξ = [[ω̃, 0], [ṽ, ω̃]], Ad_g = [[R, 0], [p̃R, R]].
"""

from __future__ import annotations

import math

import numba
import numpy as np

# Below this θ² the five coefficients of `exp_coefficients` are their Taylor series (11 terms each, Horner), above it
# their closed forms. The closed forms of the last two cancel for small θ (c3's numerator 2θ − 3 sin θ + θ cos θ is
# ~θ⁵/60: at θ² = 1e-3 it keeps 8 of 16 digits), and so do the derivatives the sweeps' complex step takes of them (3e-11
# of c2' and c3' at θ² = 0.2, 1e-12 at 1). The series' first omitted term at θ² = 1 is below 1e-21 of each coefficient
# and of its derivative (tests/sim/cosserat/test_kinematics.py checks both sides against exact rational series). A rod's
# sweep intervals turn by far less than a radian, so the sweeps take the series: as fast as the closed forms at a
# complex θ² (~200 against ~190 ns a call, measured), and exact to the last digit or two.
_SERIES_ANGLE_SQ = 1.0
_SERIES_TERMS = 11
# the series' coefficients of t = θ², k = 0..10: (−1)^k/(2k+1)!, /(2k+2)!, /(2k+3)!, /(2k+4)! and (−1)^k (k+1)/(2k+5)!
_SERIES_A = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(_SERIES_TERMS))
_SERIES_B = tuple((-1) ** k / math.factorial(2 * k + 2) for k in range(_SERIES_TERMS))
_SERIES_C1 = tuple((-1) ** k / math.factorial(2 * k + 3) for k in range(_SERIES_TERMS))
_SERIES_C2 = tuple((-1) ** k / math.factorial(2 * k + 4) for k in range(_SERIES_TERMS))
_SERIES_C3 = tuple((-1) ** k * (k + 1) / math.factorial(2 * k + 5) for k in range(_SERIES_TERMS))


@numba.njit(cache=True, inline="always")
def _horner(t, c):
    """Σ_k c[k] tᵏ (real or complex t: the sum takes t's type)."""
    acc = t * 0.0 + c[len(c) - 1]
    for k in range(len(c) - 2, -1, -1):
        acc = acc * t + c[k]
    return acc


@numba.njit(cache=True)
def mm(a, b):
    """a @ b for the tiny (3×3, 6×6) matrices here: explicit loops beat numba's BLAS call overhead
    (the sweep does ~20 such products per point)."""
    n, m = a.shape
    p = b.shape[1]
    out = np.zeros((n, p), dtype=a.dtype)
    for i in range(n):
        for k in range(m):
            aik = a[i, k]
            for j in range(p):
                out[i, j] += aik * b[k, j]
    return out


@numba.njit(cache=True)
def mv(a, x):
    """a @ x for a tiny matrix and vector (see `mm`)."""
    n, m = a.shape
    out = np.zeros(n, dtype=a.dtype)
    for i in range(n):
        acc = a[i, 0] * x[0]
        for k in range(1, m):
            acc += a[i, k] * x[k]
        out[i] = acc
    return out


@numba.njit(cache=True)
def skew(w):
    """3×3 skew matrix w̃ with w̃ x = w × x."""
    out = np.zeros((3, 3), dtype=w.dtype)
    out[0, 1] = -w[2]
    out[0, 2] = w[1]
    out[1, 0] = w[2]
    out[1, 2] = -w[0]
    out[2, 0] = -w[1]
    out[2, 1] = w[0]
    return out


@numba.njit(cache=True)
def ad(xi):
    """6×6 adjoint ad_ξ of the Lie algebra se(3), angular-first."""
    out = np.zeros((6, 6), dtype=xi.dtype)
    wt = skew(xi[0:3])
    vt = skew(xi[3:6])
    out[0:3, 0:3] = wt
    out[3:6, 3:6] = wt
    out[3:6, 0:3] = vt
    return out


@numba.njit(cache=True)
def exp_coefficients(theta_sq):
    """sinθ/θ, (1−cosθ)/θ², (θ−sinθ)/θ³ and T_Ω's two further ones, (θ² + 2cosθ − 2)/(2θ⁴) and
    (2θ − 3sinθ + θcosθ)/(2θ⁵) — analytic in θ² (real or complex: complex-step safe), with one square root, sine and
    cosine for all five: the rod's sweeps call it at every point of every residual, mostly at a complex θ² (where each
    is several real transcendental calls)."""
    t2 = theta_sq
    if abs(t2.real) < _SERIES_ANGLE_SQ:
        a = _horner(t2, _SERIES_A)
        b = _horner(t2, _SERIES_B)
        c1 = _horner(t2, _SERIES_C1)
        c2 = _horner(t2, _SERIES_C2)
        c3 = _horner(t2, _SERIES_C3)
    else:
        t = np.sqrt(t2)
        s = np.sin(t)
        co = np.cos(t)
        a = s / t
        b = (1.0 - co) / t2
        c1 = (t - s) / (t2 * t)
        c2 = (t2 + 2.0 * co - 2.0) / (2.0 * t2 * t2)
        c3 = (2.0 * t - 3.0 * s + t * co) / (2.0 * t2 * t2 * t)
    return a, b, c1, c2, c3


@numba.njit(cache=True)
def _so3_coefficients(theta_sq):
    """sinθ/θ, (1−cosθ)/θ², (θ−sinθ)/θ³ — analytic in θ² (complex-step safe)."""
    a, b, c, _, _ = exp_coefficients(theta_sq)
    return a, b, c


@numba.njit(cache=True)
def so3_exp(w):
    """Rodrigues: exp(w̃)."""
    a, b, _ = _so3_coefficients(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    wt = skew(w)
    out = a * wt + b * mm(wt, wt)
    for i in range(3):
        out[i, i] += 1.0
    return out


@numba.njit(cache=True)
def so3_left_jacobian(w):
    """J_l(w) = Σ w̃^k/(k+1)!: maps φ̇ of the exponential coordinates to the spatial angular velocity."""
    _, b, c = _so3_coefficients(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    wt = skew(w)
    out = b * wt + c * mm(wt, wt)
    for i in range(3):
        out[i, i] += 1.0
    return out


@numba.njit(cache=True)
def se3_exp(xi):
    """exp of a twist [ω; v] -> (R, p)."""
    w = xi[0:3]
    v = xi[3:6]
    R = so3_exp(w)
    p = mv(so3_left_jacobian(w), v)
    return R, p


@numba.njit(cache=True)
def ad_inverse_pose(R, p):
    """Ad_{g⁻¹} for g = (R, p): [[Rᵀ, 0], [−Rᵀp̃, Rᵀ]]."""
    out = np.zeros((6, 6), dtype=R.dtype)
    Rt = R.T.copy()
    out[0:3, 0:3] = Rt
    out[3:6, 3:6] = Rt
    out[3:6, 0:3] = -mm(Rt, skew(p))
    return out


@numba.njit(cache=True)
def se3_tangent_coefficients(theta_sq):
    """The two coefficients of T_Ω beyond `_so3_coefficients` (`exp_coefficients`)."""
    _, _, _, c2, c3 = exp_coefficients(theta_sq)
    return c2, c3


@numba.njit(cache=True)
def se3_tangent(xi):
    """T_Ω = Σ ad_Ω^k/(k+1)! in closed form (Barfoot's SE(3) left Jacobian, reordered angular-first).

    Ad_{exp(−Ω)}·T_Ω is the differential of the exponential in the body frame, which turns d/dt of a
    sub-step's Ω into the twist it adds to the frame at the sub-step's end.
    """
    w = xi[0:3]
    rho = xi[3:6]
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    Jl = so3_left_jacobian(w)
    W = skew(w)
    P = skew(rho)
    _, _, c1 = _so3_coefficients(t2)
    c2, c3 = se3_tangent_coefficients(t2)
    WP = mm(W, P)
    PW = mm(P, W)
    WPW = mm(WP, W)
    WW = mm(W, W)
    Q = 0.5 * P + c1 * (WP + PW + WPW) + c2 * (mm(WW, P) + mm(PW, W) - 3.0 * WPW) + c3 * (mm(WPW, W) + mm(W, WPW))
    out = np.zeros((6, 6), dtype=xi.dtype)
    out[0:3, 0:3] = Jl
    out[3:6, 3:6] = Jl
    out[3:6, 0:3] = Q
    return out
