"""Reference shaping before anything reaches the bus: clamp to the joint limits, then limit the slew rate.

The modules clamp too (firmware), but the PC must never *ask* for an angle outside the mechanics, and a first
reference far from the current posture (a gait starting in a curved posture) must not become a step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ShapedReferences:
    angle_rad: np.ndarray  # (n, 2) columns h, v
    rate_rad_s: np.ndarray  # (n, 2)
    clamped: np.ndarray  # bool (n, 2)
    slew_limited: np.ndarray  # bool (n, 2)


class ReferenceShaper:
    """Clamp to ±limit per axis; move at most `slew_limit_rad_s` × Δt from the previous shaped reference."""

    def __init__(self, limit_h_rad: float, limit_v_rad: float, slew_limit_rad_s: float) -> None:
        if slew_limit_rad_s <= 0:
            raise ValueError(f"slew_limit_rad_s must be > 0, got {slew_limit_rad_s}")
        self.limits_rad = np.array([limit_h_rad, limit_v_rad])
        self.slew_limit_rad_s = slew_limit_rad_s
        self._previous: np.ndarray | None = None
        self._previous_t_s: float | None = None

    def reset(self, angle_rad: np.ndarray, t_s: float | None) -> None:
        """Start slewing from this posture (the measured one, at activation)."""
        self._previous = np.clip(np.asarray(angle_rad, float), -self.limits_rad, self.limits_rad)
        self._previous_t_s = t_s

    def shape(self, t_s: float, angle_rad: np.ndarray, rate_rad_s: np.ndarray) -> ShapedReferences:
        angle = np.asarray(angle_rad, float)
        rate = np.array(rate_rad_s, float)
        clamped = np.abs(angle) > self.limits_rad
        target = np.clip(angle, -self.limits_rad, self.limits_rad)
        slewed = np.zeros_like(clamped)
        if self._previous is not None:
            dt = 0.0 if self._previous_t_s is None else max(t_s - self._previous_t_s, 0.0)
            step = self.slew_limit_rad_s * dt
            delta = target - self._previous
            slewed = np.abs(delta) > step + 1e-12
            target = np.where(slewed, self._previous + np.clip(delta, -step, step), target)
        # no feed-forward into a limit, nor while the shaper (not the gait) sets the pace
        rate[clamped | slewed] = 0.0
        self._previous, self._previous_t_s = target, t_s
        return ShapedReferences(target, rate, clamped, slewed)
