"""A scenario: model, initial state, time step, prescribed base motion and an optional release time.

`simulate` runs it and hands every sample to a callback (the aiko layer records it); sim itself writes no files.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from sim.cosserat.dynamics import step
from sim.cosserat.forces import centreline
from sim.cosserat.model import RodModel, RodState
from sim.cosserat.newton import NewtonSettings
from sim.cosserat.rod import RodParameterError
from sim.cosserat.step_problem import NewtonIterate, StepInfo


def interpolate_rows(times: Sequence[float], rows: np.ndarray | Sequence[np.ndarray], t_s: float) -> np.ndarray:
    """``rows`` (one array per time, times increasing) linearly interpolated at ``t_s``, held before the first and
    after the last: np.interp of every component, bitwise (its formula and order of operations; NaN gives NaN), by
    one bisection for all of them instead of one np.interp call per component."""
    if math.isnan(t_s):
        return np.full(np.shape(rows[0]), np.nan)
    if t_s <= times[0]:
        return np.array(rows[0], dtype=float)
    if t_s >= times[-1]:
        return np.array(rows[-1], dtype=float)
    j = bisect.bisect_right(times, t_s) - 1  # times[j] <= t_s < times[j + 1]
    slope: np.ndarray = (rows[j + 1] - rows[j]) / (times[j + 1] - times[j])
    out: np.ndarray = slope * (t_s - times[j]) + rows[j]
    return out


@dataclass(frozen=True)
class BaseMotion:
    """Base pose waypoints (time, position, rotation vector), linearly interpolated; held after the last."""

    times_s: tuple[float, ...]
    positions_m: tuple[tuple[float, float, float], ...]
    rotation_vectors_rad: tuple[tuple[float, float, float], ...] | None = None

    def __post_init__(self) -> None:
        t = np.asarray(self.times_s, dtype=float)
        if t.ndim != 1 or len(t) < 1 or np.any(np.diff(t) <= 0):
            raise RodParameterError(f"base motion times_s must be strictly increasing, got {list(self.times_s)}")
        if np.asarray(self.positions_m, dtype=float).shape != (len(t), 3):
            raise RodParameterError(f"base motion positions_m must be {len(t)} [x, y, z] triples")
        if self.rotation_vectors_rad is not None:
            if np.asarray(self.rotation_vectors_rad, dtype=float).shape != (len(t), 3):
                raise RodParameterError(f"base motion rotation vectors must be {len(t)} triples")

    def alpha(self, t_s: float) -> np.ndarray:
        """[rotation vector; position] at t_s (`interpolate_rows`: np.interp's result, a bench run asks ~1 000 times a
        second)."""
        times, rows = self._knots
        return interpolate_rows(times, rows, t_s)

    @property
    def _knots(self) -> tuple[list[float], np.ndarray]:
        """The waypoint times and their (k, 6) poses, built once (the dataclass is frozen: cached beside it)."""
        knots = self.__dict__.get("_knots_cache")
        if knots is None:
            pos = np.asarray(self.positions_m, dtype=float)
            rot = (
                np.zeros_like(pos)
                if self.rotation_vectors_rad is None
                else np.asarray(self.rotation_vectors_rad, float)
            )
            knots = ([float(t) for t in self.times_s], np.ascontiguousarray(np.hstack([rot, pos])))
            object.__setattr__(self, "_knots_cache", knots)
        return knots


@dataclass(frozen=True, eq=False)
class Scenario:
    name: str
    model: RodModel
    initial_state: RodState
    dt_s: float
    duration_s: float
    base_motion: BaseMotion | None = None
    # at this time a clamped base becomes free and every point constraint is dropped (the "dropped" rod)
    release_at_s: float | None = None
    newton: NewtonSettings = field(default_factory=NewtonSettings)
    max_halvings: int = 5  # of a step that does not converge (see `dynamics.step`)

    def __post_init__(self) -> None:
        if not self.dt_s > 0 or not self.duration_s > 0:
            raise RodParameterError(f"dt_s and duration_s must be > 0, got {self.dt_s}, {self.duration_s}")


@dataclass
class Sample:
    t_s: float
    state: RodState
    info: StepInfo | None
    centreline_m: np.ndarray  # (n+1, 3) at the strain nodes
    model: RodModel


@dataclass
class SimulationResult:
    times_s: np.ndarray
    tip_m: np.ndarray
    iterations: np.ndarray
    substeps: np.ndarray
    final_state: RodState
    final_info: StepInfo | None


def released_model(model: RodModel) -> RodModel:
    """The model after `Scenario.release_at_s`: free base, no point constraints (same rod, grid, contact)."""
    return replace(model, base="free", constraints=(), constraint_index=np.zeros(0, dtype=np.int64))


def simulate(
    scenario: Scenario,
    on_sample: Callable[[Sample], None] | None = None,
    sample_every: int = 1,
    on_newton_iterate: Callable[[NewtonIterate], None] | None = None,
) -> SimulationResult:
    """Run the scenario from its initial state; `on_sample` sees every `sample_every`-th step (and t = 0),
    `on_newton_iterate` every Newton iterate (see `dynamics.step`)."""
    model = scenario.model
    state = scenario.initial_state.copy()
    free_model = released_model(model) if scenario.release_at_s is not None else None
    n_steps = int(round(scenario.duration_s / scenario.dt_s))
    times, tips, iterations, substeps = [], [], [], []
    info = None

    def emit(current_model):
        if on_sample is None:
            return
        line = centreline(current_model, state.q)
        on_sample(Sample(state.t_s, state, info, line, current_model))

    emit(model)
    for k in range(1, n_steps + 1):
        current = model
        if free_model is not None and state.t_s >= scenario.release_at_s - 1e-12:
            current = free_model
        alpha_next = None
        if current.base == "clamped" and scenario.base_motion is not None:
            alpha_next = scenario.base_motion.alpha(state.t_s + scenario.dt_s)
        info = step(
            current, state, scenario.dt_s, scenario.newton, alpha_next, scenario.max_halvings, on_newton_iterate
        )
        times.append(state.t_s)
        tips.append(centreline(current, state.q)[-1].copy())
        iterations.append(info.iterations)
        substeps.append(info.substeps)
        if k % sample_every == 0 or k == n_steps:
            emit(current)
    return SimulationResult(np.array(times), np.array(tips), np.array(iterations), np.array(substeps), state, info)
