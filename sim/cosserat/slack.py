"""Slack maps that turn Signorini and Coulomb's complementarity conditions into equalities (paper 004, §V).

With D a Heaviside-like function, D*(u) = −D(−u) and f(x) = D(x)·x:
  normal:   Λ_n = f(u_n),             δ_n = f*(u_n) = D*(u_n)·u_n        (0 ≤ δ_n ⊥ Λ_n ≥ 0)
  friction: Λ_t = W(u_t)·u_t,         v_t = W*(u_t)·u_t
            W = −a/|u_t| + f(a/|u_t| − 1),  W* = f(1 − a/|u_t|),  a = μΛ_n
With the exact Heaviside: |u_t| ≤ a → stick (Λ_t = −u_t, v_t = 0); |u_t| > a → slide
(Λ_t = −a·u_t/|u_t|, v_t = (|u_t| − a)·u_t/|u_t|). |u_t| is regularised as sqrt(u_t·u_t + ε²) so the
maps are differentiable at u_t = 0. Slacks here are dimensionless: the caller scales them into force,
gap and slip velocity.
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
    slip = f_slip[:, None] * u_t
    dslip_du = f_slip[:, None, None] * eye - df_slip[:, None, None] * u_t[:, :, None] * dr_du[:, None, :]
    dslip_da = -(df_slip / s)[:, None] * u_t
    return lam, dlam_du, dlam_da, slip, dslip_du, dslip_da
