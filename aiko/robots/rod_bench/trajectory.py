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

    def target(self, t_s: float, lead_s: float, lag_s: float = 0.0) -> FlangeTarget:
        """``lag_s``: how far the set-points are behind the loop (`SetPointTime`); the pose is the trajectory's that
        much earlier, still due ``lead_s`` after ``t_s``."""
        trajectory_t_s = t_s + lead_s - lag_s
        alpha = self.alpha(trajectory_t_s)
        return FlangeTarget(t_s, t_s + lead_s, alpha, self.mount.flange_pose(alpha), trajectory_t_s)


# After a stall the set-points replay the stretch of the trajectory they missed at up to this many times its speed
# (see `SetPointTime`).
CATCH_UP_SPEED_RATIO = 2.0


class SetPointTime:
    """The trajectory time the set-points follow: the loop's time, except that it advances at most
    :data:`CATCH_UP_SPEED_RATIO` periods a set-point, so after a stall the arm catches up along the trajectory at
    up to twice its speed instead of being sent the newest pose at once.

    Why: sent the newest pose at once, a servo target jumps by everything the stall skipped, and the arm's own
    checks judge the jump as one period's motion: a 50 ms stall during a 12.5 mm/s press implied 62 mm/s, over a
    50 mm/s TCP limit, the target was refused and the run stopped itself (measured on the code before; the test is
    in tests/aiko/robots/rod_bench/test_bench_hil.py). Replayed at twice the pace, the path is the planned one and
    its speed at most twice the plan's; how far the set-points lagged is `lag_max_s`, in the run's summary. (The
    rod's reaction to such a jump is not what makes it dangerous here: injected 50-200 ms stalls left the press's
    peak force at 5.6 N either way.)
    On the simulated clock the loop never stalls and the set-point time is the loop's time."""

    def __init__(self, period_s: float, ratio: float = CATCH_UP_SPEED_RATIO) -> None:
        if not ratio > 1.0:
            raise ValueError(f"a catch-up ratio must be > 1 (else a stall's lag is never made up), got {ratio}")
        self.period_s = period_s
        self.ratio = ratio
        self._last_s: float | None = None
        self.lag_max_s = 0.0

    def __call__(self, loop_t_s: float) -> float:
        """The trajectory time of the set-point the loop sends at ``loop_t_s``."""
        t = loop_t_s if self._last_s is None else min(loop_t_s, self._last_s + self.ratio * self.period_s)
        self._last_s = t
        self.lag_max_s = max(self.lag_max_s, loop_t_s - t)
        return t


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
