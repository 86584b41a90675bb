"""Slack maps that turn Signorini and Coulomb's complementarity conditions into equalities (paper 004, §V).

With D a Heaviside-like function, D*(u) = −D(−u) and f(x) = D(x)·x:
  normal:   Λ_n = f(u_n),             δ_n = f*(u_n) = D*(u_n)·u_n        (0 ≤ δ_n ⊥ Λ_n ≥ 0)
  friction: Λ_t = W(u_t)·u_t,         v_t = W*(u_t)·u_t
            W = −a/|u_t| + f(a/|u_t| − 1),  W* = max(f(1 − a/|u_t|), 0),  a = μΛ_n
With the exact Heaviside: |u_t| ≤ a → stick (Λ_t = −u_t, v_t = 0); |u_t| > a → slide
(Λ_t = −a·u_t/|u_t|, v_t = (|u_t| − a)·u_t/|u_t|). |u_t| is regularised as sqrt(u_t·u_t + ε²) so the
maps are differentiable at u_t = 0. Slacks here are dimensionless: the caller scales them into force,
gap and slip velocity.

W* is clamped at zero (a departure from paper 004's v_t = f(1 − a/|u_t|)·u_t that matters for the sigmoid only:
its f(x) = x·D(x) dips to −0.2785/c for x < 0, the exact maps' f does not). Unclamped, the sigmoid slipped on the
stick side *along* the friction force, Λ_t·v_t > 0, and a rod at rest just inside the cone crept up the slope.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SMOOTHINGS = ("heaviside", "sigmoid", "trigonometric")


class SmoothingError(ValueError):
    """Unknown smoothing name or a non-positive smoothing parameter."""


@dataclass(frozen=True)
class Smoothing:
    """D(x) and D'(x). `sharpness` is c of the sigmoid 1/(1+e^{−cx}) or w of (1 − cos wx)/2 on [0, π/w]."""

    kind: str = "sigmoid"
    sharpness: float = 50.0
    tangent_epsilon: float = 1e-9

    def __post_init__(self) -> None:
        if self.kind not in SMOOTHINGS:
            raise SmoothingError(f"smoothing {self.kind!r} is not one of {', '.join(SMOOTHINGS)}")
        if not self.sharpness > 0:
            raise SmoothingError(f"smoothing sharpness must be > 0, got {self.sharpness!r}")

    def d(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D(x), D'(x))."""
        x = np.asarray(x, dtype=float)
        if self.kind == "heaviside":
            return (x > 0).astype(float), np.zeros_like(x)
        if self.kind == "sigmoid":
            cx = np.clip(self.sharpness * x, -500.0, 500.0)
            value = 1.0 / (1.0 + np.exp(-cx))
            return value, self.sharpness * value * (1.0 - value)
        w = self.sharpness
        inside = (x > 0) & (x < np.pi / w)
        value = np.where(x >= np.pi / w, 1.0, np.where(inside, 0.5 * (1.0 - np.cos(w * x)), 0.0))
        deriv = np.where(inside, 0.5 * w * np.sin(w * x), 0.0)
        return value, deriv

    def f(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(f(x) = D(x)·x, f'(x))."""
        value, deriv = self.d(x)
        return value * x, deriv * x + value

    def f_star(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(f*(x) = −D(−x)·x, d/dx)."""
        value, deriv = self.d(-np.asarray(x, dtype=float))
        return -value * x, deriv * x - value


def normal_map(smoothing: Smoothing, u_n: np.ndarray):
    """Normal force and gap from the normal slack: (Λ_n, dΛ_n/du, δ_n, dδ_n/du)."""
    lam, dlam = smoothing.f(u_n)
    gap, dgap = smoothing.f_star(u_n)
    return lam, dlam, gap, dgap


def friction_map(smoothing: Smoothing, u_t: np.ndarray, a: np.ndarray):
    """Friction force and slip from tangential slacks u_t (k,2) and friction bound a = μΛ_n (k,).

    Returns Λ_t (k,2), dΛ_t/du_t (k,2,2), dΛ_t/da (k,2), v_t (k,2), dv_t/du_t (k,2,2), dv_t/da (k,2).
    """
    u_t = np.atleast_2d(np.asarray(u_t, dtype=float))
    a = np.asarray(a, dtype=float).reshape(-1)
    s = np.sqrt(np.sum(u_t * u_t, axis=1) + smoothing.tangent_epsilon**2)
    r = a / s
    dr_du = -(a / s**3)[:, None] * u_t
    f_stick, df_stick = smoothing.f(r - 1.0)
    weight = -r + f_stick
    lam = weight[:, None] * u_t
    dweight = -1.0 + df_stick
    eye = np.eye(2)[None]
    dlam_du = weight[:, None, None] * eye + dweight[:, None, None] * u_t[:, :, None] * dr_du[:, None, :]
    dlam_da = (dweight / s)[:, None] * u_t
    f_slip, df_slip = smoothing.f(1.0 - r)
    # W* ≥ 0: the sigmoid's f(x) = x·D(x) is negative for x < 0, which made the slip on the stick side point along
    # the friction force (friction doing positive work: a rod held just inside the cone crept up-slope). Clamped,
    # the stick side has no slip at all, as with the exact maps; sliding is unchanged.
    backwards = f_slip < 0.0
    f_slip = np.where(backwards, 0.0, f_slip)
    df_slip = np.where(backwards, 0.0, df_slip)
    slip = f_slip[:, None] * u_t
    dslip_du = f_slip[:, None, None] * eye - df_slip[:, None, None] * u_t[:, :, None] * dr_du[:, None, :]
    dslip_da = -(df_slip / s)[:, None] * u_t
    return lam, dlam_du, dlam_da, slip, dslip_du, dslip_da


# --- Regular (Heaviside) slack coordinates of an exact smoothing -------------------------------------------------
# With an exact smoothing (Heaviside, trigonometric) the maps trace exactly the Signorini and Coulomb graphs, so
# u ↦ y = (Λ_n − δ_n, v_t − Λ_t) is a homeomorphism onto the slack of the Heaviside maps with the *same* force,
# gap and slip: Λ_n = max(y_n, 0), δ_n = max(−y_n, 0); stick |y_t| ≤ a: Λ_t = −y_t, v_t = 0; slide: Λ_t = −a·ŷ_t,
# v_t = (|y_t| − a)·ŷ_t. For the trigonometric map, dy/du = 0 at the corners (u_n = 0 and |u_t| = a): there the
# maps are cubic in u and Newton in u meets singular columns. `dynamics` therefore iterates in y and maps back.


def regular_slack(smoothing: Smoothing, slack: np.ndarray, friction_coefficient: float) -> np.ndarray:
    """y = (Λ_n − δ_n, v_t − Λ_t) of the slacks u (k,3): the Heaviside slacks with the same force, gap, slip."""
    slack = np.asarray(slack, dtype=float)
    lam_n, _, gap, _ = normal_map(smoothing, slack[:, 0])
    bound = friction_coefficient * np.maximum(lam_n, 0.0)
    lam_t, _, _, slip, _, _ = friction_map(smoothing, slack[:, 1:3], bound)
    return np.column_stack([lam_n - gap, slip - lam_t])


def _require_exact(smoothing: Smoothing) -> None:
    if smoothing.kind == "sigmoid":
        raise SmoothingError("the sigmoid map is not exact: it has no Heaviside (regular) slack coordinates")


def _increasing_inverse(fun, target: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """x in [low, high] with fun(x) = target for an increasing fun, by bisection (60 halvings: to round-off of
    the bracket). Bisection because the trigonometric maps are cubic at the corners, where Newton crawls."""
    low, high = low.astype(float).copy(), high.astype(float).copy()
    for _ in range(60):
        mid = 0.5 * (low + high)
        below = fun(mid) < target
        low = np.where(below, mid, low)
        high = np.where(below, high, mid)
    return 0.5 * (low + high)


def _normal_magnitude_inverse(smoothing: Smoothing, y: np.ndarray) -> np.ndarray:
    """x ≥ 0 with f(x) = y ≥ 0 (f = D·x increasing; f(x) = x beyond the smoothing band)."""
    if smoothing.kind == "heaviside":
        return y.copy()
    band = np.pi / smoothing.sharpness
    inside = y < band
    x = y.copy()
    if np.any(inside):
        x[inside] = _increasing_inverse(
            lambda z: smoothing.f(z)[0], y[inside], np.zeros(int(inside.sum())), np.full(int(inside.sum()), band)
        )
    return x


def _friction_magnitude(smoothing: Smoothing, s: np.ndarray, a: np.ndarray) -> np.ndarray:
    """|v_t − Λ_t| = s·(r − f(r − 1) + f(1 − r)), r = a/s, as a function of s = |u_t| (increasing)."""
    r = a / np.maximum(s, 1e-300)
    return s * (r - smoothing.f(r - 1.0)[0] + smoothing.f(1.0 - r)[0])


def slack_from_regular(smoothing: Smoothing, regular: np.ndarray, friction_coefficient: float) -> np.ndarray:
    """The slacks u (k,3) of `smoothing` whose force, gap and slip equal the Heaviside maps' at `regular` (the
    inverse of `regular_slack`, with |u_t| taken unregularised, ε = 0)."""
    _require_exact(smoothing)
    regular = np.asarray(regular, dtype=float)
    y_n = regular[:, 0]
    u_n = np.sign(y_n) * _normal_magnitude_inverse(smoothing, np.abs(y_n))
    lam_n = smoothing.f(u_n)[0]
    a = friction_coefficient * np.maximum(lam_n, 0.0)
    y_t = regular[:, 1:3]
    m = np.linalg.norm(y_t, axis=1)
    s = m.copy()
    if smoothing.kind == "trigonometric":
        # identity where both maps are exact Heaviside: deep stick (r − 1 ≥ π/w) and, if π/w < 1, deep slide
        band = np.pi / smoothing.sharpness
        deep_slide = a / (1.0 - band) if band < 1.0 else np.inf
        inside = (m > a / (1.0 + band)) & (m < deep_slide) & (m > 0.0)
        if np.any(inside):
            ai, mi = a[inside], m[inside]
            high = np.maximum(mi, ai)
            for _ in range(200):  # the slide band's m(s) ≥ a + s·f(1 − a/s) grows without bound: bracket it
                short = _friction_magnitude(smoothing, high, ai) < mi
                if not np.any(short):
                    break
                high = np.where(short, 2.0 * high, high)
            s[inside] = _increasing_inverse(
                lambda z: _friction_magnitude(smoothing, z, ai), mi, np.zeros_like(mi), high
            )
    u_t = np.where(m[:, None] > 0.0, y_t * (s / np.where(m > 0.0, m, 1.0))[:, None], 0.0)
    return np.column_stack([u_n, u_t])
