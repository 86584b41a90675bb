"""numba version of the contact laws of one residual evaluation: slack maps, friction bound, nodal forces.

Why a second copy of `sim.cosserat.slack`: the step evaluates the maps ~1000 times per simulated second on
~20 nodes, where numpy's per-call overhead (≈ 30 small array operations, ~50 µs) cost as much as the whole
kinematic sweep. `slack.normal_map` / `slack.friction_map` stay the readable reference; `test_fast_paths.py`
compares this kernel with them for every smoothing, on separated, sticking and sliding nodes.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from sim.cosserat.slack import SMOOTHINGS, Smoothing

SMOOTHING_CODE = {name: code for code, name in enumerate(SMOOTHINGS)}  # heaviside 0, sigmoid 1, trigonometric 2


def smoothing_arguments(smoothing: Smoothing) -> tuple[int, float, float]:
    """(kind code, sharpness, tangent ε) for `contact_laws`."""
    return SMOOTHING_CODE[smoothing.kind], float(smoothing.sharpness), float(smoothing.tangent_epsilon)


@numba.njit(cache=True)
def _d(kind, c, x):
    """(D(x), D'(x)) as `Smoothing.d`."""
    if kind == 0:
        return (1.0 if x > 0.0 else 0.0), 0.0
    if kind == 1:
        cx = min(max(c * x, -500.0), 500.0)
        value = 1.0 / (1.0 + np.exp(-cx))
        return value, c * value * (1.0 - value)
    if x >= np.pi / c:
        return 1.0, 0.0
    if x > 0.0:
        return 0.5 * (1.0 - np.cos(c * x)), 0.5 * c * np.sin(c * x)
    return 0.0, 0.0


@numba.njit(cache=True)
def _f(kind, c, x):
    """(f(x) = D(x)·x, f'(x))."""
    value, deriv = _d(kind, c, x)
    return value * x, deriv * x + value


class ContactLaws(NamedTuple):
    """Per-node results of the contact laws at the slacks u = [u_n, u_t1, u_t2] (k nodes); forces in newtons, the
    rest dimensionless (the slack units). The friction bound is a = μ·max(Λ_n, 0) (see `StepProblem._contact`)."""

    lam_n: np.ndarray  # (k,) Λ_n = f(u_n)
    dlam_n: np.ndarray  # (k,) dΛ_n/du_n
    gap_map: np.ndarray  # (k,) f*(u_n): the gap the law asks for
    dgap_map: np.ndarray  # (k,)
    dbound_dun: np.ndarray  # (k,) ∂a/∂u_n
    lam_t: np.ndarray  # (k,2) Λ_t = W(u_t)·u_t
    dlt_da: np.ndarray  # (k,2) ∂Λ_t/∂a
    slip_map: np.ndarray  # (k,2) W*(u_t)·u_t: the slip the law asks for
    dslip_da: np.ndarray  # (k,2)
    dlt_du: np.ndarray  # (k,2,2) ∂Λ_t/∂u_t
    dslip_du: np.ndarray  # (k,2,2)
    force: np.ndarray  # (k,3) σ_λ(Λ_n n + Λ_t·[t1 t2]), world
    df_dun: np.ndarray  # (k,3) ∂force/∂u_n
    df_dut: np.ndarray  # (k,3,2) ∂force/∂u_t


def contact_laws(kind, c, eps, mu, force_scale, slack, normal, t1, t2) -> ContactLaws:
    """All per-node quantities of `StepProblem._contact` and its Newton blocks for slacks (k,3) and the contact
    frames (k,3) each (`smoothing_arguments` gives kind, c, eps)."""
    return ContactLaws(*contact_laws_kernel(kind, c, eps, mu, force_scale, slack, normal, t1, t2))


@numba.njit(cache=True)
def contact_laws_kernel(kind, c, eps, mu, force_scale, slack, normal, t1, t2):
    """`contact_laws` as a tuple in `ContactLaws`' order (numba)."""
    k = slack.shape[0]
    lam_n = np.empty(k)
    dlam_n = np.empty(k)
    gap_map = np.empty(k)
    dgap_map = np.empty(k)
    dbound_dun = np.empty(k)
    lam_t = np.empty((k, 2))
    dlt_da = np.empty((k, 2))
    slip_map = np.empty((k, 2))
    dslip_da = np.empty((k, 2))
    dlt_du = np.empty((k, 2, 2))
    dslip_du = np.empty((k, 2, 2))
    force = np.empty((k, 3))
    df_dun = np.empty((k, 3))
    df_dut = np.empty((k, 3, 2))
    for j in range(k):
        un = slack[j, 0]
        lam, dlam = _f(kind, c, un)
        value, deriv = _d(kind, c, -un)  # f*(u) = −D(−u)·u
        lam_n[j] = lam
        dlam_n[j] = dlam
        gap_map[j] = -value * un
        dgap_map[j] = deriv * un - value
        a = mu * lam if lam > 0.0 else 0.0
        da = mu * dlam if lam > 0.0 else 0.0
        dbound_dun[j] = da

        u0 = slack[j, 1]
        u1 = slack[j, 2]
        s = np.sqrt((u0 * u0 + u1 * u1) + eps * eps)
        r = a / s
        g = a / s**3
        dr0 = -g * u0
        dr1 = -g * u1
        f_stick, df_stick = _f(kind, c, r - 1.0)
        weight = -r + f_stick
        dweight = -1.0 + df_stick
        lam_t[j, 0] = weight * u0
        lam_t[j, 1] = weight * u1
        dlt_du[j, 0, 0] = weight + dweight * u0 * dr0
        dlt_du[j, 0, 1] = dweight * u0 * dr1
        dlt_du[j, 1, 0] = dweight * u1 * dr0
        dlt_du[j, 1, 1] = weight + dweight * u1 * dr1
        dlt_da[j, 0] = (dweight / s) * u0
        dlt_da[j, 1] = (dweight / s) * u1
        f_slip, df_slip = _f(kind, c, 1.0 - r)
        if f_slip < 0.0:  # W* ≥ 0 (`slack.friction_map`): no slip along the friction force on the stick side
            f_slip, df_slip = 0.0, 0.0
        slip_map[j, 0] = f_slip * u0
        slip_map[j, 1] = f_slip * u1
        dslip_du[j, 0, 0] = f_slip - df_slip * u0 * dr0
        dslip_du[j, 0, 1] = -df_slip * u0 * dr1
        dslip_du[j, 1, 0] = -df_slip * u1 * dr0
        dslip_du[j, 1, 1] = f_slip - df_slip * u1 * dr1
        dslip_da[j, 0] = -(df_slip / s) * u0
        dslip_da[j, 1] = -(df_slip / s) * u1

        dlt_dun0 = dlt_da[j, 0] * da
        dlt_dun1 = dlt_da[j, 1] * da
        for e in range(3):
            force[j, e] = force_scale * (lam * normal[j, e] + lam_t[j, 0] * t1[j, e] + lam_t[j, 1] * t2[j, e])
            df_dun[j, e] = force_scale * (dlam * normal[j, e] + dlt_dun0 * t1[j, e] + dlt_dun1 * t2[j, e])
            for b in range(2):
                df_dut[j, e, b] = force_scale * (t1[j, e] * dlt_du[j, 0, b] + t2[j, e] * dlt_du[j, 1, b])
    return (
        lam_n,
        dlam_n,
        gap_map,
        dgap_map,
        dbound_dun,
        lam_t,
        dlt_da,
        slip_map,
        dslip_da,
        dlt_du,
        dslip_du,
        force,
        df_dun,
        df_dut,
    )


@numba.njit(cache=True)
def _bisect_normal(c, target, high):
    """x in [0, high] with f(x) = target (trigonometric f, increasing): `slack._increasing_inverse`."""
    low = 0.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if _f(2, c, mid)[0] < target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


@numba.njit(cache=True)
def _friction_magnitude(c, s, a):
    """`slack._friction_magnitude` for one node (trigonometric)."""
    r = a / max(s, 1e-300)
    return s * (r - _f(2, c, r - 1.0)[0] + _f(2, c, 1.0 - r)[0])


@numba.njit(cache=True)
def trigonometric_slack_from_regular(c, mu, regular):
    """`slack.slack_from_regular` for the trigonometric map with sharpness c (same brackets and bisection)."""
    k = regular.shape[0]
    out = np.empty((k, 3))
    band = np.pi / c
    for j in range(k):
        y = regular[j, 0]
        x = abs(y)
        if x < band:
            x = _bisect_normal(c, x, band)
        u_n = x if y > 0.0 else (-x if y < 0.0 else 0.0)
        lam = _f(2, c, u_n)[0]
        a = mu * lam if lam > 0.0 else 0.0
        y0 = regular[j, 1]
        y1 = regular[j, 2]
        m = np.sqrt(y0 * y0 + y1 * y1)
        s = m
        deep_slide = a / (1.0 - band) if band < 1.0 else np.inf
        if m > a / (1.0 + band) and m < deep_slide and m > 0.0:
            high = max(m, a)
            for _ in range(200):
                if _friction_magnitude(c, high, a) >= m:
                    break
                high *= 2.0
            low = 0.0
            for _ in range(60):
                mid = 0.5 * (low + high)
                if _friction_magnitude(c, mid, a) < m:
                    low = mid
                else:
                    high = mid
            s = 0.5 * (low + high)
        out[j, 0] = u_n
        scale = s / m if m > 0.0 else 0.0
        out[j, 1] = y0 * scale
        out[j, 2] = y1 * scale
    return out


def regular_from_slack(smoothing: Smoothing, friction_coefficient: float, slack: np.ndarray) -> np.ndarray:
    """`slack.regular_slack` through `contact_laws` (the frames do not enter y = (Λ_n − δ_n, v_t − Λ_t))."""
    kind, c, eps = smoothing_arguments(smoothing)
    frame = np.zeros((slack.shape[0], 3))
    laws = contact_laws(kind, c, eps, friction_coefficient, 1.0, slack, frame, frame, frame)
    out = np.empty_like(slack)
    out[:, 0] = laws.lam_n - laws.gap_map
    out[:, 1:3] = laws.slip_map - laws.lam_t
    return out
