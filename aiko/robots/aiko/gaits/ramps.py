"""Rate- and acceleration-limited ramps: how a steered gait's parameters move to what the operator asked for.

A parameter (an amplitude, an offset, a frequency) never jumps to a new value: a :class:`Ramp` moves it there with
its velocity bounded by ``max_rate`` and its acceleration by ``max_accel``, decelerating so that it arrives at rest
(a discrete time-optimal profile on a fixed step). The velocity is continuous (it changes by at most
``max_accel · dt`` per step), so every quantity built from ramped parameters is C¹ with a bounded second derivative,
whatever sequence of targets it is given, however often the target changes.

:meth:`Ramp.reach` bounds every value the ramp can take from now on while its target stays put (the larger of where
it is, where it would come to rest braking at once, and the target): the steered gait couples parameters through it
(an amplitude may only grow as far as the frequency it will meet allows), so a bound holds at every instant and
not only at the ends of a ramp.

A gait switch cross-fades two running gaits with the quintic :func:`smoothstep` (zero first and second derivative
at both ends: the blend adds no jump in rate or acceleration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Ramp:
    """One parameter moving toward ``target`` with |velocity| ≤ max_rate and |acceleration| ≤ max_accel."""

    value: float
    max_rate: float
    max_accel: float
    target: float = math.nan
    velocity: float = 0.0

    def __post_init__(self) -> None:
        if not (self.max_rate > 0 and self.max_accel > 0):
            raise ValueError(f"a ramp needs a positive rate and acceleration, got {self.max_rate}, {self.max_accel}")
        if math.isnan(self.target):
            self.target = self.value

    def settled(self, tolerance: float = 1e-12) -> bool:
        return abs(self.target - self.value) <= tolerance and abs(self.velocity) <= tolerance

    def stopping_point(self) -> float:
        """Where the value comes to rest if it brakes now at the full acceleration (one step of slack)."""
        v = self.velocity
        return self.value + v * abs(v) / (2 * self.max_accel)

    def reach(self) -> float:
        """The largest |value| the ramp can take from now on while its target stays where it is."""
        slack = abs(self.velocity) * 1e-3 + 1e-12  # one 1 ms step of the discrete profile beyond the continuous one
        return max(abs(self.value), abs(self.stopping_point()), abs(self.target)) + slack

    def step(self, dt_s: float) -> None:
        """Advance one step: accelerate toward the target at most ``max_accel``, never faster than ``max_rate``,
        braking early enough to stop on the target (discrete profile: the stopping distance of a velocity v is
        v²/(2a) + v·dt/2)."""
        error = self.target - self.value
        a, v = self.max_accel, self.velocity
        if error == 0.0 and v == 0.0:
            return
        distance = abs(error)
        brake_speed = a * (-dt_s / 2 + math.sqrt(dt_s * dt_s / 4 + 2 * distance / a))
        wanted = math.copysign(min(self.max_rate, brake_speed, distance / dt_s), error)
        v_next = min(max(wanted, v - a * dt_s), v + a * dt_s)
        v_next = min(max(v_next, -self.max_rate), self.max_rate)
        self.value += v_next * dt_s
        self.velocity = v_next
        # the acceleration of this step, (v_next - v) / dt, is within ±max_accel by construction

    @property
    def acceleration_bound(self) -> float:
        return self.max_accel


def smoothstep(tau: float) -> tuple[float, float, float]:
    """The quintic 10τ³ − 15τ⁴ + 6τ⁵ on [0, 1] and its first two derivatives in τ (0 outside the ends).

    Peak first derivative 1.875 (τ = ½), peak |second derivative| 10/√3 ≈ 5.774 (τ = ½ ∓ √3/6)."""
    if tau <= 0.0:
        return 0.0, 0.0, 0.0
    if tau >= 1.0:
        return 1.0, 0.0, 0.0
    t2 = tau * tau
    w = t2 * tau * (10 - 15 * tau + 6 * t2)
    dw = 30 * t2 * (1 - tau) ** 2
    ddw = 60 * tau * (1 - tau) * (1 - 2 * tau)
    return w, dw, ddw


SMOOTHSTEP_MAX_RATE = 1.875
SMOOTHSTEP_MAX_ACCEL = 10 / math.sqrt(3)
