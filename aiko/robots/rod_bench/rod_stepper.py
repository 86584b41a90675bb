"""The Cosserat rod with its base driven by a stream of poses: the one place the bench steps the simulator (the sim
backend, the HIL plant inside the UR3 emulator and the replay all use it, so they integrate identically).

The base pose between the given waypoints is interpolated linearly (rotation vectors component-wise, as
:class:`sim.cosserat.scenario.BaseMotion` does) and held after the last one; every step is the experiment's
``dt_s``, so a stepper fed the experiment's own ``[base_motion]`` knots reproduces ``sim.cosserat.simulate``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aiko.core.errors import AikoError
from sim.cosserat import ConvergenceError, step
from sim.cosserat.scenario import Scenario, interpolate_rows
from sim.cosserat.step_problem import StepInfo


class RodStepper:
    def __init__(self, scenario: Scenario, on_sample: Callable[[RodStepper], None] | None = None, every: int = 1):
        self.scenario = scenario
        self.model = scenario.model
        self.state = scenario.initial_state.copy()
        self.dt_s = scenario.dt_s
        self.info: StepInfo | None = None
        self.steps = 0
        self.newton_iterations = 0
        self.halved_steps = 0
        self.on_sample = on_sample
        self.every = max(1, int(every))
        self._times: list[float] = [0.0]
        self._alphas: list[np.ndarray] = [self.state.q[0:6].copy()]

    @property
    def alpha(self) -> np.ndarray:
        return self.state.q[0:6].copy()

    def add_waypoint(self, t_s: float, alpha: np.ndarray) -> None:
        """The base must be at ``alpha`` at ``t_s`` (later waypoints than ``t_s`` are replaced)."""
        while self._times and self._times[-1] >= t_s - 1e-12:
            if len(self._times) == 1:
                break
            self._times.pop()
            self._alphas.pop()
        if t_s > self._times[-1] + 1e-12:
            self._times.append(float(t_s))
            self._alphas.append(np.asarray(alpha, dtype=float).copy())
        else:
            self._alphas[-1] = np.asarray(alpha, dtype=float).copy()

    def base_alpha_at(self, t_s: float) -> np.ndarray:
        """The base pose at ``t_s``: ``np.interp`` of each component (held before the first and after the last
        waypoint), by a bisection instead of arrays rebuilt from every waypoint so far (which made each step
        O(waypoints): 6000 of them after a minute of a 100 Hz stream)."""
        return interpolate_rows(self._times, self._alphas, t_s)

    def prime(self) -> None:
        """Load the compiled kernels (numba's first dispatch, the step's and the centreline's cache entries: ~1 s
        here) by one step of a copy of the state, thrown away, and one centreline; the stepper's own state is not
        touched. Called before a run's clock starts, so a run does not begin a second late."""
        from sim.cosserat.forces import sweep_points

        state = self.state.copy()
        try:
            step(self.model, state, self.dt_s, self.scenario.newton, self.alpha, self.scenario.max_halvings)
        except ConvergenceError:
            pass  # the run's own first step reports it, where it belongs
        sweep_points(self.model, self.state.q)

    def emit(self) -> None:
        if self.on_sample is not None:
            self.on_sample(self)

    def advance_to(self, t_s: float) -> None:
        """Step until the rod's time reaches ``t_s`` (whole steps of ``dt_s``; a fraction left over waits)."""
        while self.state.t_s + self.dt_s <= t_s + 1e-9:
            alpha_next = self.base_alpha_at(self.state.t_s + self.dt_s)
            try:
                self.info = step(
                    self.model,
                    self.state,
                    self.dt_s,
                    self.scenario.newton,
                    alpha_next,
                    self.scenario.max_halvings,
                )
            except ConvergenceError as exc:
                raise AikoError(
                    f"{self.scenario.name}: rod simulation stopped at t = {self.state.t_s:.3f} s: {exc}"
                ) from None
            self.steps += 1
            self.newton_iterations += self.info.iterations
            self.halved_steps += int(self.info.substeps > 1)
            if self.steps % self.every == 0:
                self.emit()

    def summary(self) -> dict[str, float | int]:
        return {
            "rod_steps": self.steps,
            "newton_iterations_mean": self.newton_iterations / max(1, self.steps),
            "halved_steps": self.halved_steps,
        }
