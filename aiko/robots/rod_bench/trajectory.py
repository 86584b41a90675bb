"""The base trajectory the bench streams: the rod's base pose as a function of time, from the experiment's
``[base_motion]`` table (the very table the simulator is driven by) or from a log's measured flange poses (replay).

Both are :class:`sim.cosserat.scenario.BaseMotion` (waypoints, linear interpolation, held after the last), so the
bench and the simulator interpolate identically."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.messages import FlangeTarget
from aiko.robots.rod_bench.mount import Mount
from sim.cosserat import RodParameterError
from sim.cosserat.scenario import BaseMotion


class BaseTrajectory:
    """``target(t_s, lead_s)``: the set-point to send at ``t_s`` for the pose due ``lead_s`` later."""

    def __init__(self, motion: BaseMotion, mount: Mount, time_offset_s: float = 0.0) -> None:
        self.motion = motion
        self.mount = mount
        self.time_offset_s = time_offset_s  # loop time t is motion time t + offset (a replay starting before 0)

    def alpha(self, t_s: float) -> np.ndarray:
        return self.motion.alpha(t_s + self.time_offset_s)

    def target(self, t_s: float, lead_s: float) -> FlangeTarget:
        alpha = self.alpha(t_s + lead_s)
        return FlangeTarget(t_s, t_s + lead_s, alpha, self.mount.flange_pose(alpha))


def motion_from_samples(times_s: Sequence[float], alphas: np.ndarray) -> BaseMotion:
    """A base motion through logged base poses (``alphas`` (k, 6), ``[rotation vector; position]``); repeated or
    out-of-order stamps are dropped (the first of equal stamps is kept)."""
    t = np.asarray(times_s, dtype=float)
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 2 or a.shape[1] != 6 or len(a) != len(t) or len(t) == 0:
        raise ConfigError(f"logged base poses must be (k, 6) with one time each, got {a.shape} and {t.shape}")
    keep = np.concatenate([[True], np.diff(t) > 0])
    t, a = t[keep], a[keep]
    try:
        return BaseMotion(
            tuple(t.tolist()),
            tuple(tuple(r) for r in a[:, 3:6].tolist()),
            tuple(tuple(r) for r in a[:, 0:3].tolist()),
        )
    except RodParameterError as exc:
        raise ConfigError(f"logged base poses: {exc}") from None
