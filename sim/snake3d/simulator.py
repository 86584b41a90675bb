"""The simulator: a model, a state, held joint commands, and the numba step (or the reference step).

Joint commands are held between calls (zero-order hold, as the robot's joint controllers hold the last CAN
reference): either PD references (``set_references``; gains from the model, eq. 68–69 with the sign fixed) or raw
joint torques (``set_torques``, for hardware-in-the-loop with emulated joint controllers).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim.snake3d import fast
from sim.snake3d import kinematics as kin
from sim.snake3d.model import ContactNotConvergedError, SimulationDivergedError, SnakeModel, SnakeState

if TYPE_CHECKING:
    from sim.snake3d.reference import StepInfo

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    steps: int = 0
    sweeps: int = 0
    max_sweeps: int = 0
    retries: int = 0
    wall_time_s: float = 0.0
    max_residual_m_s: float = 0.0  # largest violation of the contact laws (eq. 87–89) left by an accepted step
    split_steps: int = 0  # steps that converged only as sub-steps (Δt/2, Δt/4, ...)
    max_split_depth: int = 0  # deepest halving used: the finest sub-step was Δt / 2^max_split_depth

    @property
    def newton_iterations_mean(self) -> float:
        return self.sweeps / self.steps if self.steps else 0.0


class SnakeSimulator:
    """Integrates a :class:`SnakeModel` from a :class:`SnakeState` with the fast (numba) or reference step."""

    def __init__(self, model: SnakeModel, state: SnakeState | None = None, use_reference: bool = False) -> None:
        self.model = model
        self.state = state if state is not None else kin.posture_state(model)
        if self.state.position_m.shape != (model.n_links, 3):
            raise ValueError(
                f"state has {self.state.position_m.shape[0]} links but the model has n_links = {model.n_links}"
            )
        self.state.check_finite()
        self.use_reference = use_reference
        nj = model.n_joints
        self.ref_angle = np.zeros((nj, 2))
        self.ref_rate = np.zeros((nj, 2))
        self.feedforward_nm = np.zeros((nj, 2))
        self.gains = np.array([model.kp_h_nm_rad, model.kd_h_nms_rad, model.kp_v_nm_rad, model.kd_v_nms_rad])
        self.impulses = np.zeros((model.n_all_contacts, 4))
        self._obstacles = model.obstacle_array()
        self.stats = RunStats()
        self._params = model.params_array()
        self._out_stats = np.zeros(6, dtype=np.int64)
        self._totals = np.zeros(6, dtype=np.int64)
        self._diagnostics = np.zeros(2)
        # joint angles (α_h, α_v) and rates (n−1, 2) of the current state, refreshed by every step() in compiled code
        self.joint_angle_rad = np.zeros((nj, 2))
        self.joint_rate_rad_s = np.zeros((nj, 2))
        self._refresh_joint_state()

    # --- commands -------------------------------------------------------------------------------------------
    def set_references(self, angle_rad: np.ndarray, rate_rad_s: np.ndarray | None = None) -> None:
        """PD mode: hold these joint references (n−1, 2) [h, v] until the next call."""
        nj = self.model.n_joints
        angle = np.asarray(angle_rad, dtype=float).reshape(nj, 2)
        rate = np.zeros((nj, 2)) if rate_rad_s is None else np.asarray(rate_rad_s, dtype=float).reshape(nj, 2)
        if not (np.all(np.isfinite(angle)) and np.all(np.isfinite(rate))):
            raise ValueError("joint references must be finite")
        self.ref_angle[:] = angle
        self.ref_rate[:] = rate
        self.gains[:] = [
            self.model.kp_h_nm_rad,
            self.model.kd_h_nms_rad,
            self.model.kp_v_nm_rad,
            self.model.kd_v_nms_rad,
        ]
        self.feedforward_nm[:] = 0.0

    def set_torques(self, torques_nm: np.ndarray) -> None:
        """External-torque mode: hold these joint torques (n−1, 2) [τ_h, τ_v] (N m); the PD law is switched off."""
        tau = np.asarray(torques_nm, dtype=float).reshape(self.model.n_joints, 2)
        if not np.all(np.isfinite(tau)):
            raise ValueError("joint torques must be finite")
        self.feedforward_nm[:] = tau
        self.gains[:] = 0.0

    # --- stepping -------------------------------------------------------------------------------------------
    def step(self, n_steps: int = 1) -> None:
        if n_steps <= 0:
            return
        start = time.perf_counter()
        s = self.state
        if self.use_reference:
            for _ in range(n_steps):
                info = self._reference_step()
                self.impulses[:] = info.impulses
                self.stats.steps += 1
                self.stats.sweeps += info.iterations
                self.stats.max_sweeps = max(self.stats.max_sweeps, info.iterations)
                self.stats.retries += info.retries
        else:
            self._totals[:] = 0
            status, done = fast.run_steps(
                n_steps, s.position_m, s.quaternion, s.velocity_m_s, s.omega_body_rad_s, s.impulse_cache,
                self.ref_angle, self.ref_rate, self.gains, self.feedforward_nm, self._params, self._obstacles, s.t_s,
                self.impulses,
                self._out_stats, self._totals, self._diagnostics,
            )  # fmt: skip
            s.t_s += done * self.model.dt_s
            self.stats.steps += int(self._totals[0])
            self.stats.sweeps += int(self._totals[1])
            self.stats.max_sweeps = max(self.stats.max_sweeps, int(self._totals[2]))
            self.stats.retries += int(self._totals[3])
            self.stats.split_steps += int(self._totals[4])
            self.stats.max_split_depth = max(self.stats.max_split_depth, int(self._totals[5]))
            self.stats.max_residual_m_s = max(self.stats.max_residual_m_s, float(self._diagnostics[1]))
            if status != fast.STATUS_OK:
                self._refresh_joint_state()
                self._raise(status)
        self._refresh_joint_state()
        self.stats.wall_time_s += time.perf_counter() - start

    def _refresh_joint_state(self) -> None:
        s = self.state
        fast.joint_state(s.quaternion, s.omega_body_rad_s, self.joint_angle_rad, self.joint_rate_rad_s)

    def _reference_step(self) -> StepInfo:
        """One reference step; if its prox iteration fails, the same step as sub-steps (twin of fast.split_step)."""
        from sim.snake3d.reference import reference_step  # imported here: it pulls in scipy (~0.1 s of cold start)

        args = (self.ref_angle, self.ref_rate, self.gains, self.feedforward_nm)
        try:
            return reference_step(self.model, self.state, *args)
        except ContactNotConvergedError as error:
            if self.model.max_step_halvings == 0:
                raise
            failure = error
        start = self.state.copy()
        depth = [0]
        try:
            info = self._bisect(self.model.dt_s, 0, args, depth)
        except ContactNotConvergedError as error:
            _restore(self.state, start)
            raise ContactNotConvergedError(
                f"{failure} and {self.model.max_step_halvings} halvings of the step",
                failure.t_s,
                failure.links,
                sweeps=failure.sweeps + error.sweeps,
            ) from failure
        self.state.t_s = start.t_s + self.model.dt_s  # exact, not the sum of the sub-steps
        self.stats.split_steps += 1
        self.stats.max_split_depth = max(self.stats.max_split_depth, depth[0])
        return dataclasses.replace(
            info, iterations=info.iterations + failure.sweeps, retries=info.retries + failure.reductions
        )

    def _bisect(self, dt_s: float, depth: int, args: tuple, deepest: list[int]) -> StepInfo:
        """Advance dt_s as two halves, each bisected again on failure down to Δt / 2^max_step_halvings (depth-first,
        the order of fast.split_step). Failed attempts' sweeps are counted; impulses add up over the sub-steps."""
        from sim.snake3d.reference import reference_step

        depth += 1
        deepest[0] = max(deepest[0], depth)
        model = dataclasses.replace(self.model, dt_s=dt_s / 2)
        self.state.impulse_cache *= 0.5  # warm start: impulses scale with the step
        halves = []
        spent = 0
        for _half in range(2):
            try:
                info = reference_step(model, self.state, *args)
            except ContactNotConvergedError as error:
                if depth >= self.model.max_step_halvings:
                    error.sweeps += spent
                    raise
                spent += error.sweeps
                info = self._bisect(dt_s / 2, depth, args, deepest)
                info = dataclasses.replace(
                    info, iterations=info.iterations + error.sweeps, retries=info.retries + error.reductions
                )
            halves.append(info)
            spent += info.iterations
        self.state.impulse_cache *= 2.0
        return _sum_infos(halves[0], halves[1])

    def _raise(self, status: int) -> None:
        t = self.state.t_s
        if status == fast.STATUS_NOT_CONVERGED:
            contacts = [int(a) for a in self._out_stats[3:6] if a >= 0]
            links = tuple(sorted({self._contact_link(a) + 1 for a in contacts}))
            raise ContactNotConvergedError(
                f"snake3d: contact iteration did not converge at t = {t:.6f} s after {self._out_stats[0]} sweeps, "
                f"at most {self.model.max_retries} reductions of r and {self.model.max_step_halvings} halvings of the "
                "step; "
                f"worst contacts {contacts} on links {list(links)} (try a smaller dt_s or a larger max_iterations)",
                t,
                links,
            )
        self.state.check_finite()
        link = int(self._out_stats[3]) + 1
        raise SimulationDivergedError(f"snake3d diverged at t = {t:.6f} s near link {link}", t, (link,))

    def _contact_link(self, a: int) -> int:
        n = self.model.n_links
        return a % n if a < 2 * n else (a - 2 * n) // max(1, len(self.model.obstacles))

    def advance(self, duration_s: float) -> None:
        """Step for ``duration_s`` (rounded to whole steps) with the held commands."""
        if not (math.isfinite(duration_s) and duration_s >= 0):
            raise ValueError(f"duration_s must be finite and >= 0, got {duration_s}")
        self.step(int(round(duration_s / self.model.dt_s)))

    def advance_to(self, t_s: float) -> None:
        """Step until the state time reaches ``t_s`` (to within half a step)."""
        n = int(math.floor((t_s - self.state.t_s) / self.model.dt_s + 0.5))
        self.step(n)

    # --- read-out -------------------------------------------------------------------------------------------
    def joint_angles(self) -> np.ndarray:
        """(α_h, α_v) per joint (n−1, 2) of the current state (a new array; computed, so valid even after the
        state was edited in place; ``joint_angle_rad`` holds the same values as of the last step())."""
        self._refresh_joint_state()
        return self.joint_angle_rad.copy()

    def joint_rates(self) -> np.ndarray:
        """(α̇_h, α̇_v) per joint (n−1, 2) of the current state (a new array, see joint_angles)."""
        self._refresh_joint_state()
        return self.joint_rate_rad_s.copy()

    def contact_forces_n(self) -> np.ndarray:
        """Mean contact forces of the last step (n_all_contacts, 4) [N, T1, T2, V] = impulses / Δt (ground contacts
        first: T along / across the link; then link–obstacle contacts: T horizontal, vertical)."""
        return self.impulses / self.model.dt_s


def _sum_infos(a: StepInfo, b: StepInfo) -> StepInfo:
    """Two consecutive sub-steps as one step: impulses add (impulse / Δt stays the mean force), sweeps add."""
    from sim.snake3d.reference import StepInfo

    return StepInfo(
        a.iterations + b.iterations,
        a.retries + b.retries,
        np.union1d(a.active_contacts, b.active_contacts),
        a.impulses + b.impulses,
        a.joint_impulses + b.joint_impulses,
    )


def _restore(state: SnakeState, saved: SnakeState) -> None:
    """Put ``saved`` back into ``state`` in place (callers may hold the state object)."""
    state.position_m[:] = saved.position_m
    state.quaternion[:] = saved.quaternion
    state.velocity_m_s[:] = saved.velocity_m_s
    state.omega_body_rad_s[:] = saved.omega_body_rad_s
    state.impulse_cache[:] = saved.impulse_cache
    state.t_s = saved.t_s
