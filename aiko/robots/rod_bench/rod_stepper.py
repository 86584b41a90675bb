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
from sim.cosserat.model import RodState
from sim.cosserat.scenario import Scenario, interpolate_rows
from sim.cosserat.step_problem import StepInfo

# How near the base of the run's first step must be to the pose `RodStepper.prime` solved it at for that solution to
# be the step's (every component of the rotation vector in rad and the position in m): far below anything physical,
# far above the kinematics' round-off (see `RodStepper._take_primed_step`).
PRIMED_POSE_TOLERANCE = 1e-9


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
        self._primed_first_step: tuple[np.ndarray, RodState, StepInfo] | None = None

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
        here) by one step of a copy of the state, and one centreline; the stepper's own state is not touched.
        Called before a run's clock starts, so a run does not begin a second late.

        That step is the rod's first with its base held where it starts, and it is kept: the run's first step,
        if its base is held there too, takes it instead of solving again. The first step is the hardest of a run
        (a straight rod released onto the table: the full step fails and is halved twice, 15-25 ms here), and in
        the HIL plant it fell inside one 5 ms controller tick: the one late tick of a quiet run."""
        from sim.cosserat.forces import sweep_points

        state = self.state.copy()
        alpha = self.alpha
        try:
            info = step(self.model, state, self.dt_s, self.scenario.newton, alpha, self.scenario.max_halvings)
        except ConvergenceError:
            pass  # the run's own first step reports it, where it belongs
        else:
            self._primed_first_step = (alpha, state, info)
        sweep_points(self.model, self.state.q)

    def _take_primed_step(self, alpha_next: np.ndarray) -> StepInfo | None:
        """The step `prime` solved, taken into the state, if this is the first step and its base is held where
        `prime` held it; else None (and it is dropped: only the first step may take it).

        Held means within :data:`PRIMED_POSE_TOLERANCE` of that pose in every component (m and rad): the HIL arm
        at rest reads back its start pose to the round-off of the arm's inverse and forward kinematics (measured:
        7e-12), a thousandth of which no rod quantity can tell; a base farther off is a different step, solved as
        usual. The kept state is what `step` gives from this initial state (a copy starts without factors, as the
        initial state does), so the trajectory is the one it would have been from the primed pose."""
        primed, self._primed_first_step = self._primed_first_step, None
        if primed is None or self.steps != 0:
            return None
        alpha, state, info = primed
        held = np.max(np.abs(np.asarray(alpha_next, dtype=float) - alpha)) <= PRIMED_POSE_TOLERANCE
        if not held or not np.array_equal(self.state.q[0:6], alpha):
            return None
        self.state.t_s, self.state.q, self.state.v, self.state.slack = state.t_s, state.q, state.v, state.slack
        self.state.solver_cache = state.solver_cache
        return info

    def emit(self) -> None:
        if self.on_sample is not None:
            self.on_sample(self)

    def advance_to(self, t_s: float) -> None:
        """Step until the rod's time reaches ``t_s`` (whole steps of ``dt_s``; a fraction left over waits)."""
        while self.state.t_s + self.dt_s <= t_s + 1e-9:
            alpha_next = self.base_alpha_at(self.state.t_s + self.dt_s)
            info = self._take_primed_step(alpha_next) or self._step(alpha_next)
            self.info = info
            self.steps += 1
            self.newton_iterations += info.iterations
            self.halved_steps += int(info.substeps > 1)
            if self.steps % self.every == 0:
                self.emit()

    def _step(self, alpha_next: np.ndarray) -> StepInfo:
        try:
            return step(self.model, self.state, self.dt_s, self.scenario.newton, alpha_next, self.scenario.max_halvings)
        except ConvergenceError as exc:
            stopped_at = f"{self.scenario.name}: rod simulation stopped at t = {self.state.t_s:.3f} s"
            raise AikoError(f"{stopped_at}: {exc}") from None

    def summary(self) -> dict[str, float | int]:
        return {
            "rod_steps": self.steps,
            "newton_iterations_mean": self.newton_iterations / max(1, self.steps),
            "halved_steps": self.halved_steps,
        }
