"""A steerable gait: serpenoid gaits whose speed, turn and shape change while they run, and gait switches, with
every joint's reference, rate and acceleration inside what the joint modules can follow.

**Phase as state.** A serpenoid wave (eq. 70–71 of paper 000) is ``α_i = A sin(θ + i δ + δ_0) + ψ`` with the phase
θ integrated from the frequency (θ += ω dt on a fixed 2 ms grid). A frequency change changes how fast θ moves, never
θ itself, so no angle jumps. Speed is a factor ``k`` on the gait's own frequency (negative: the wave runs backwards),
shared by both axes so that sidewinding's phase relation between them survives any speed change.

**Ramps.** Amplitude A, offset ψ (turning: ψ_h), phase step δ, δ_0 and the speed factor move through
:class:`aiko.robots.aiko.gaits.ramps.Ramp` (bounded velocity and acceleration, C¹). Each gets a share of the joint
rate budget R and acceleration budget a (:class:`SteeringLimits`); with m = n − 1 joints behind the first:

    |α̇| ≤ |Ȧ| + A(|ω| + m|δ̇| + |δ̇_0|) + |ψ̇|  ≤ (0.10 + 0.60 + 0.10 + 0.05 + 0.15) R'
    |α̈| ≤ |Ä| + 2|Ȧ|Ω + AΩ² + A(|ω̇| + m|δ̈| + |δ̈_0|) + |ψ̈|,   Ω = |ω| + m|δ̇| + |δ̇_0|

A|ω| ≤ 0.6 R' and Aω² ≤ 0.35 a' are kept at every instant by coupling the ramps through their reach (an amplitude
grows only as far as the frequency it will meet allows, and the reverse), as is A + |ψ| ≤ the joint limit.
R' = 0.75 R and a' = 0.75 a: a running gait keeps a quarter of each budget free for a blend's own terms.

**Gait switch.** A switch cross-fades the running gait into the new one with the quintic smoothstep w(τ):
α = (1 − w) α_old + w α_new, both still running, so the reference is C¹ (C² in the blend weight). The blend's own
terms ẇ(α_new − α_old) and 2ẇ(α̇_new − α̇_old) + ẅ(α_new − α_old) are held inside the reserved quarter by the blend's
duration, computed when it starts from what the two gaits can reach: bounded (≤ 5 s on Aiko). A switch asked for
while a blend runs waits for it to end (the latest request wins). The new serpenoid continues the old one's phase.
The soft start is the blend from the rest posture (all joints 0) into the start gait at t = 0.

**Reactive gaits** (the obstacle-aided controller) shape their references from feedback and may step them (its
relax mode takes the measured angles); they run through a per-joint :class:`Ramp` follower with the full running
budget, which bounds rate and acceleration for any input (a lag where the inner gait asks for more).

Commands (:meth:`SteerableGait.command`) take effect on the grid at the time they are given, so a run driven by
hand and the same commands replayed from a file (``commands = [...]`` in ``[gait]``) give identical references.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.gait import PRESETS, SerpenoidParams, register_gait, serpenoid_from_table, validate_serpenoid
from aiko.robots.aiko.gaits.ramps import SMOOTHSTEP_MAX_ACCEL, SMOOTHSTEP_MAX_RATE, Ramp, smoothstep
from aiko.robots.aiko.joints import JointFeedback, JointReferences

GRID_S = 0.002
"""The fixed step on which phases and ramps move (500 Hz): sampling the gait at 10 Hz or 100 Hz gives the same
values at the same instants, and a command takes effect at the same grid point live and replayed."""

RUNNING_SHARE = 0.75  # of the rate and acceleration budgets, for a running gait; the rest is a blend's
RAMP_RATE_SHARES = {"amplitude": 0.10, "wave": 0.60, "phase_step": 0.10, "phase_v0": 0.05, "offset": 0.15}
RAMP_ACCEL_SHARES = {
    "amplitude": 0.05,
    "wave": 0.35,
    "frequency": 0.10,
    "phase_step": 0.05,
    "phase_v0": 0.05,
    "offset": 0.10,
}
CROSS_TERMS_SHARE = 0.30  # 2|Ȧ|Ω and the δ̇ cross terms of AΩ²
MIN_BLEND_S = 1.0

GAIT_NAMES = ("lateral_undulation", "sidewinding", "obstacle_aided", "rest")
COMMANDS = ("speed", "turn", "gait", "pause", "resume", "stop")


@dataclass(frozen=True)
class SteeringLimits:
    """What the joints can follow and how far the operator may steer.

    ``rate_rad_s`` is the smaller of the robot's ``joints.max_rate_deg_s`` and, on a CAN bus, ``can.slew_limit_deg_s``
    (the limits the experiment validation derives); ``accel_rad_s2`` the joint acceleration budget (``[gait]
    max_accel_deg_s2``; the default 1000 deg/s² is a quarter of what a module's drive at its 2.9 N m current limit
    gives its own reflected rotor inertia, 0.038 kg m² → 77 rad/s², docs/can_hil.md)."""

    n_joints: int
    limit_h_rad: float
    limit_v_rad: float
    rate_rad_s: float
    accel_rad_s2: float
    max_speed: float = 1.5  # the speed factor's largest magnitude (× the gait's own frequency)
    max_turn_rad: float = math.radians(15.0)

    @classmethod
    def of(
        cls,
        robot: RobotDescription,
        *,
        slew_limit_rad_s: float | None = None,
        accel_rad_s2: float = math.radians(1000.0),
        max_speed: float = 1.5,
        max_turn_rad: float = math.radians(15.0),
    ) -> SteeringLimits:
        rate = robot.max_joint_rate_rad_s
        if slew_limit_rad_s is not None:
            rate = min(rate, slew_limit_rad_s)
        return cls(robot.n_joints, robot.limit_h_rad, robot.limit_v_rad, rate, accel_rad_s2, max_speed, max_turn_rad)

    @property
    def running_rate(self) -> float:
        return RUNNING_SHARE * self.rate_rad_s

    @property
    def running_accel(self) -> float:
        return RUNNING_SHARE * self.accel_rad_s2

    def axis_limit(self, axis: int) -> float:
        return self.limit_h_rad if axis == 0 else self.limit_v_rad


# ------------------------------------------------------------------------------------------------ motions
class Motion:
    """A running gait on the grid: ``step`` moves it one grid step, ``sample`` gives angles and rates (2, n)."""

    name = "motion"

    def step(self, t_s: float, feedback: JointFeedback | None) -> None:
        raise NotImplementedError

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def reach(self) -> np.ndarray:
        """Per axis, the largest |angle| this motion can ask for from now on."""
        raise NotImplementedError

    def rate_reach(self, limits: SteeringLimits) -> float:
        """The largest |rate| this motion can ask for from now on (steering included)."""
        return limits.running_rate

    def steer(self, speed: float, turn_rad: float) -> None:
        """Speed factor and turn offset (ψ_h); motions that cannot steer ignore them."""

    @property
    def phase_rad(self) -> float | None:
        return None


class Rest(Motion):
    """A fixed posture (all joints 0 by default): what a run starts from and what "rest" blends to."""

    name = "rest"

    def __init__(self, n_joints: int, posture: np.ndarray | None = None) -> None:
        self.angles = np.zeros((2, n_joints)) if posture is None else np.array(posture, dtype=float)

    def step(self, t_s: float, feedback: JointFeedback | None) -> None:
        pass

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        return self.angles.copy(), np.zeros_like(self.angles)

    def reach(self) -> np.ndarray:
        return np.abs(self.angles).max(axis=1)

    def rate_reach(self, limits: SteeringLimits) -> float:
        return 0.0


class SerpenoidWave(Motion):
    """Eq. 70–71 with the phase integrated and every parameter ramped (see the module docstring)."""

    def __init__(
        self,
        name: str,
        params: SerpenoidParams,
        limits: SteeringLimits,
        phase_rad: float = 0.0,
        speed: float = 1.0,
        turn_rad: float = 0.0,
    ) -> None:
        self.name = name
        self.params = params
        self.limits = limits
        n = limits.n_joints
        self.index = np.arange(n, dtype=float)
        self.axes = (0,) if params.planar or limits.limit_v_rad == 0.0 else (0, 1)
        self.omega0 = (params.omega_h_rad_s, params.omega_v_rad_s if 1 in self.axes else 0.0)
        self.theta = [phase_rad, phase_rad]  # θ_h, θ_v (the v wave's own offset is δ_0)
        R, a = limits.running_rate, limits.running_accel
        m = max(n - 1, 1)
        self.ramps: list[dict[str, Ramp]] = []
        for axis in (0, 1):
            L = limits.axis_limit(axis) or 1.0
            step = params.delta_h_rad if axis == 0 else params.delta_v_rad
            v0 = 0.0 if axis == 0 else params.delta_0_rad
            self.ramps.append(
                {
                    "amplitude": Ramp(0.0, RAMP_RATE_SHARES["amplitude"] * R, RAMP_ACCEL_SHARES["amplitude"] * a),
                    "offset": Ramp(0.0, RAMP_RATE_SHARES["offset"] * R, RAMP_ACCEL_SHARES["offset"] * a),
                    "phase_step": Ramp(
                        step,
                        RAMP_RATE_SHARES["phase_step"] * R / (L * m),
                        RAMP_ACCEL_SHARES["phase_step"] * a / (L * m),
                    ),
                    "phase_v0": Ramp(v0, RAMP_RATE_SHARES["phase_v0"] * R / L, RAMP_ACCEL_SHARES["phase_v0"] * a / L),
                }
            )
        self._amplitude_cmd = [params.amplitude_h_rad, params.amplitude_v_rad]
        self._offset_cmd = [turn_rad, params.offset_v_rad]
        omega0_max = max(abs(w) for w in self.omega0) or 1.0
        L_max = max(limits.axis_limit(ax) for ax in self.axes)
        speed_rate = RAMP_ACCEL_SHARES["frequency"] * a / (L_max * omega0_max)  # A|ω̇| ≤ share · a'
        self.speed = Ramp(0.0, speed_rate, speed_rate / 0.25)
        self._speed_cmd = speed
        self._check_budget()
        # start settled where the commands and the couplings allow (a switch blends into it; no ramp is pending)
        self._couple()
        self.speed.value = self.speed.target
        for axis in self.axes:
            for key in ("amplitude", "offset"):
                self.ramps[axis][key].value = self.ramps[axis][key].target
        self._couple()

    # -- the budget, checked once: the constant terms must fit the share left for them
    def _check_budget(self) -> None:
        lim = self.limits
        R, a = lim.running_rate, lim.running_accel
        for axis in self.axes:
            L = lim.axis_limit(axis)
            e = (RAMP_RATE_SHARES["phase_step"] + RAMP_RATE_SHARES["phase_v0"]) * R / L
            omega_max = lim.max_speed * abs(self.omega0[axis])
            cross = 2 * RAMP_RATE_SHARES["amplitude"] * R * (omega_max + e) + (2 * 0.6 + 0.15) * R * e
            if cross > CROSS_TERMS_SHARE * a * (1 + 1e-9):
                raise ConfigError(
                    f"steering {self.name}: at {math.degrees(omega_max):.4g} deg/s (max_speed {lim.max_speed:g}) the "
                    f"ramps' cross terms need {math.degrees(cross / (CROSS_TERMS_SHARE * RUNNING_SHARE)):.4g} deg/s² "
                    f"of joint acceleration, more than max_accel_deg_s2 = {math.degrees(lim.accel_rad_s2):.4g}; "
                    "lower max_speed or raise max_accel_deg_s2"
                )

    # -- couplings: every ramp's target is cut to what the others' reach allows
    def _speed_cap(self) -> float:
        lim = self.limits
        cap = lim.max_speed
        for axis in self.axes:
            w0 = abs(self.omega0[axis])
            A = self.ramps[axis]["amplitude"].reach()
            if w0 == 0.0 or A == 0.0:
                continue
            cap = min(cap, RAMP_RATE_SHARES["wave"] * lim.running_rate / (A * w0))
            cap = min(cap, math.sqrt(RAMP_ACCEL_SHARES["wave"] * lim.running_accel / A) / w0)
        return cap

    def _amplitude_cap(self, axis: int) -> float:
        lim = self.limits
        L = lim.axis_limit(axis)
        cap = L - self.ramps[axis]["offset"].reach()
        w = abs(self.omega0[axis]) * self.speed.reach()
        if w > 0.0:
            cap = min(cap, RAMP_RATE_SHARES["wave"] * lim.running_rate / w)
            cap = min(cap, RAMP_ACCEL_SHARES["wave"] * lim.running_accel / (w * w))
        return max(cap, 0.0)

    def _couple(self) -> None:
        for axis in self.axes:
            ramps = self.ramps[axis]
            L = self.limits.axis_limit(axis)
            ramps["amplitude"].target = min(abs(self._amplitude_cmd[axis]), self._amplitude_cap(axis))
            room = max(L - ramps["amplitude"].reach(), 0.0)
            ramps["offset"].target = float(np.clip(self._offset_cmd[axis], -room, room))
        cap = self._speed_cap()
        self.speed.target = float(np.clip(self._speed_cmd, -cap, cap))

    def steer(self, speed: float, turn_rad: float) -> None:
        self._speed_cmd = float(np.clip(speed, -self.limits.max_speed, self.limits.max_speed))
        self._offset_cmd[0] = float(np.clip(turn_rad, -self.limits.max_turn_rad, self.limits.max_turn_rad))

    def step(self, t_s: float, feedback: JointFeedback | None) -> None:
        self._couple()
        k0 = self.speed.value
        self.speed.step(GRID_S)
        k_mid = 0.5 * (k0 + self.speed.value)  # the phase integrates the (piecewise linear) frequency exactly
        for axis in self.axes:
            self.theta[axis] += self.omega0[axis] * k_mid * GRID_S
            for ramp in self.ramps[axis].values():
                ramp.step(GRID_S)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.limits.n_joints
        angles, rates = np.zeros((2, n)), np.zeros((2, n))
        for axis in self.axes:
            r = self.ramps[axis]
            A, psi, d, d0 = (r[k].value for k in ("amplitude", "offset", "phase_step", "phase_v0"))
            arg = self.theta[axis] + self.index * d + d0
            s, c = np.sin(arg), np.cos(arg)
            omega = self.omega0[axis] * self.speed.value
            d_arg = omega + self.index * r["phase_step"].velocity + r["phase_v0"].velocity
            angles[axis] = A * s + psi
            rates[axis] = r["amplitude"].velocity * s + A * c * d_arg + r["offset"].velocity
        return angles, rates

    def reach(self) -> np.ndarray:
        out = np.zeros(2)
        for axis in self.axes:
            out[axis] = self.ramps[axis]["amplitude"].reach() + self.ramps[axis]["offset"].reach()
        return out

    @property
    def phase_rad(self) -> float:
        return self.theta[0]

    def frequency_rad_s(self) -> float:
        return self.omega0[0] * self.speed.value


class FollowedGait(Motion):
    """A reactive gait (obstacle-aided) through a per-joint ramp follower: rate and acceleration bounded whatever
    the inner gait asks; its horizontal references are offset by the turn and its propagation scaled by the speed
    (forward only: the track behind the head is the body's past)."""

    def __init__(
        self, name: str, inner: Any, limits: SteeringLimits, start_s: float, start: np.ndarray | None = None
    ) -> None:
        self.name = name
        self.inner = inner
        self.limits = limits
        self.start_s = start_s
        self.base_speed = inner.params.propagation_speed_m_s
        R, a = limits.running_rate, limits.running_accel
        n = limits.n_joints
        self.turn = Ramp(0.0, RAMP_RATE_SHARES["offset"] * R, RAMP_ACCEL_SHARES["offset"] * a)
        first = inner.references(0.0, None).angle_h_rad
        start_h = np.clip(first if start is None else start[0], -limits.limit_h_rad, limits.limit_h_rad)
        self.joints = [Ramp(float(start_h[i]), R, a) for i in range(n)]
        self._turn_cmd = 0.0

    def steer(self, speed: float, turn_rad: float) -> None:
        scale = float(np.clip(speed, 0.0, self.limits.max_speed))
        self.inner.params = replace(self.inner.params, propagation_speed_m_s=max(self.base_speed * scale, 1e-9))
        self._turn_cmd = float(np.clip(turn_rad, -self.limits.max_turn_rad, self.limits.max_turn_rad))

    def step(self, t_s: float, feedback: JointFeedback | None) -> None:
        L = self.limits.limit_h_rad
        self.turn.target = self._turn_cmd
        self.turn.step(GRID_S)
        inner = self.inner.references(max(t_s - self.start_s, 0.0), feedback).angle_h_rad
        target = np.clip(inner + self.turn.value, -L, L)
        for ramp, value in zip(self.joints, target, strict=True):
            ramp.target = float(value)
            ramp.step(GRID_S)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.limits.n_joints
        angles, rates = np.zeros((2, n)), np.zeros((2, n))
        angles[0] = [r.value for r in self.joints]
        rates[0] = [r.velocity for r in self.joints]
        return angles, rates

    def reach(self) -> np.ndarray:
        return np.array([self.limits.limit_h_rad, 0.0])


@dataclass
class Blend(Motion):
    """The old motion cross-faded into the new one over ``duration_s`` (quintic smoothstep)."""

    old: Motion
    new: Motion
    start_s: float
    duration_s: float
    t_s: float = 0.0
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.new.name
        self.t_s = self.start_s

    @staticmethod
    def duration(old: Motion, new: Motion, limits: SteeringLimits) -> float:
        """The shortest time whose blend terms fit the quarter of the budgets the running gaits leave free:
        ẇ·D ≤ R/4 and 2ẇ·(R_old + R_new) + ẅ·D ≤ a/4, with D the reach of both (per axis)."""
        D = float(np.max(old.reach() + new.reach()))
        rates = old.rate_reach(limits) + new.rate_reach(limits)
        free_rate = (1 - RUNNING_SHARE) * limits.rate_rad_s
        free_accel = (1 - RUNNING_SHARE) * limits.accel_rad_s2
        by_rate = SMOOTHSTEP_MAX_RATE * D / free_rate
        # free_accel·T² − 2·1.875·rates·T − 5.774·D ≥ 0
        b, c = 2 * SMOOTHSTEP_MAX_RATE * rates, SMOOTHSTEP_MAX_ACCEL * D
        by_accel = (b + math.sqrt(b * b + 4 * free_accel * c)) / (2 * free_accel)
        return max(MIN_BLEND_S, by_rate, by_accel)

    def step(self, t_s: float, feedback: JointFeedback | None) -> None:
        self.old.step(t_s, feedback)
        self.new.step(t_s, feedback)
        self.t_s = t_s

    @property
    def done(self) -> bool:
        return self.t_s >= self.start_s + self.duration_s - 1e-9

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        w, dw, _ = smoothstep((self.t_s - self.start_s) / self.duration_s)
        dw /= self.duration_s
        a_old, r_old = self.old.sample()
        a_new, r_new = self.new.sample()
        return (1 - w) * a_old + w * a_new, (1 - w) * r_old + w * r_new + dw * (a_new - a_old)

    def reach(self) -> np.ndarray:
        return np.maximum(self.old.reach(), self.new.reach())

    def rate_reach(self, limits: SteeringLimits) -> float:
        return limits.rate_rad_s

    def steer(self, speed: float, turn_rad: float) -> None:
        self.new.steer(speed, turn_rad)

    @property
    def phase_rad(self) -> float | None:
        return self.new.phase_rad


# ------------------------------------------------------------------------------------------------ the gait
@dataclass(frozen=True)
class DriveCommand:
    """One operator command: ``speed`` (factor × the gait's own frequency, negative backwards), ``turn`` (−1 … 1 of
    the largest turn offset ψ_h), ``gait`` (a name of :data:`GAIT_NAMES`),
    ``pause`` / ``resume`` (the wave stops where it is and holds; resume restores the speed), ``stop`` (pause, then
    the run ends once the wave stands still)."""

    t_s: float
    command: str
    value: float | str | None = None
    source: str = "script"

    def as_payload(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "command": self.command,
            "value": float(self.value) if isinstance(self.value, (int, float)) else 0.0,
            "gait": self.value if isinstance(self.value, str) else "",
            "source": self.source,
        }


class SteerableGait:
    """The :class:`aiko.robots.aiko.gait.Gait` a driven run uses: see the module docstring."""

    def __init__(
        self,
        gaits: dict[str, Callable[[float, Motion], Motion]],
        start: str,
        limits: SteeringLimits,
        script: Sequence[DriveCommand] = (),
    ) -> None:
        if start not in gaits:
            raise ConfigError(f"steering: start gait {start!r} is not one of {', '.join(sorted(gaits))}")
        self.n_joints = limits.n_joints
        self.limits = limits
        self.factories = gaits
        self.speed = 1.0
        self.turn = 0.0
        self.paused = False
        self.stopping = False
        self.gait_name = start
        self._pending_gait: str | None = None
        self._script = sorted(script, key=lambda c: c.t_s)
        self._queued: list[DriveCommand] = []
        self._grid = 0  # the grid step the state is at
        self._feedback: JointFeedback | None = None
        rest = Rest(self.n_joints)
        for name, factory in gaits.items():
            if name != start:  # every gait's budget is checked now: a switch to it never fails in the middle of a run
                factory(0.0, rest)
        new = gaits[start](0.0, rest)
        new.steer(self.speed, 0.0)
        self.motion: Motion = Blend(rest, new, 0.0, Blend.duration(rest, new, limits))
        self.applied: list[DriveCommand] = []

    # -- the Gait protocol
    def initial_posture(self) -> JointReferences:
        zeros = np.zeros(self.n_joints)
        return JointReferences(0.0, zeros, zeros.copy(), zeros.copy(), zeros.copy())

    def references(self, t_s: float, feedback: JointFeedback | None = None) -> JointReferences:
        self._feedback = feedback
        target = int(math.floor(t_s / GRID_S + 1e-6))
        while self._grid < target:
            grid_t = self._grid * GRID_S
            self._apply_due(grid_t)
            self._grid += 1
            self.motion.step(self._grid * GRID_S, feedback)
            if isinstance(self.motion, Blend) and self.motion.done:
                self.motion = self.motion.new
                if self._pending_gait is not None:
                    name, self._pending_gait = self._pending_gait, None
                    self._switch(name, self._grid * GRID_S)
        angles, rates = self.motion.sample()
        # the ramps keep these inside the limits; the clip only removes rounding at the µrad level
        angles[0] = np.clip(angles[0], -self.limits.limit_h_rad, self.limits.limit_h_rad)
        angles[1] = np.clip(angles[1], -self.limits.limit_v_rad, self.limits.limit_v_rad)
        return JointReferences(t_s, angles[0], angles[1], rates[0], rates[1])

    def peak_rate_rad_s(self) -> float:
        """The fastest any joint is ever asked to move (the bound; the CAN backend checks it against its slew)."""
        return self.limits.rate_rad_s

    # -- steering
    def command(self, cmd: DriveCommand) -> None:
        """Take ``cmd`` at its ``t_s`` (at the latest on the next grid step)."""
        validate_command(cmd, self.factories)
        self._queued.append(cmd)

    @property
    def time_s(self) -> float:
        return self._grid * GRID_S

    def _apply_due(self, grid_t: float) -> None:
        while self._script and self._script[0].t_s <= grid_t + 1e-9:
            self._apply(self._script.pop(0), grid_t)
        due = [c for c in self._queued if c.t_s <= grid_t + 1e-9]
        if due:
            self._queued = [c for c in self._queued if c.t_s > grid_t + 1e-9]
            for cmd in due:
                self._apply(cmd, grid_t)

    def _apply(self, cmd: DriveCommand, grid_t: float) -> None:
        kind = cmd.command
        if kind == "speed":
            self.speed = float(np.clip(float(cmd.value), -self.limits.max_speed, self.limits.max_speed))
        elif kind == "turn":
            self.turn = float(np.clip(float(cmd.value), -1.0, 1.0))
        elif kind == "pause":
            self.paused = True
        elif kind == "resume":
            self.paused = self.stopping
        elif kind == "stop":
            self.paused = self.stopping = True
        elif kind == "gait":
            if isinstance(self.motion, Blend):
                self._pending_gait = str(cmd.value)
            elif str(cmd.value) != self.motion.name:
                self._switch(str(cmd.value), grid_t)
        self.motion.steer(0.0 if self.paused else self.speed, self.turn * self.limits.max_turn_rad)
        self.applied.append(cmd)

    def _switch(self, name: str, t_s: float) -> None:
        new = self.factories[name](t_s, self.motion)
        new.steer(0.0 if self.paused else self.speed, self.turn * self.limits.max_turn_rad)
        self.motion = Blend(self.motion, new, t_s, Blend.duration(self.motion, new, self.limits))
        self.gait_name = name

    # -- what the status line and the summary show
    def standing_still(self) -> bool:
        """True when the wave holds (paused and every ramp at rest): a stop may end the run now."""
        _, rates = self.motion.sample()
        return self.paused and not isinstance(self.motion, Blend) and float(np.max(np.abs(rates))) < 1e-9

    def status(self) -> dict[str, Any]:
        motion = self.motion
        blending = isinstance(motion, Blend)
        running = motion.new if isinstance(motion, Blend) else motion
        frequency = running.frequency_rad_s() if isinstance(running, SerpenoidWave) else 0.0
        return {
            "gait": self.gait_name,
            "blending": blending,
            "pending_gait": self._pending_gait or "",
            "speed": self.speed,
            "paused": self.paused,
            "stopping": self.stopping,
            "turn": self.turn,
            "turn_deg": math.degrees(self.turn * self.limits.max_turn_rad),
            "frequency_deg_s": math.degrees(frequency),
        }


def validate_command(cmd: DriveCommand, gaits: dict[str, Any] | Sequence[str]) -> None:
    if cmd.command not in COMMANDS:
        raise ConfigError(f"drive command {cmd.command!r}: expected one of {', '.join(COMMANDS)}")
    if not math.isfinite(cmd.t_s) or cmd.t_s < 0:
        raise ConfigError(f"drive command at t_s = {cmd.t_s}: must be a finite time >= 0")
    if cmd.command in ("speed", "turn") and (
        isinstance(cmd.value, bool) or not isinstance(cmd.value, (int, float)) or not math.isfinite(cmd.value)
    ):
        raise ConfigError(f"drive command {cmd.command} at t_s = {cmd.t_s}: needs a finite number, got {cmd.value!r}")
    if cmd.command == "gait" and cmd.value not in gaits:
        raise ConfigError(f"drive command gait at t_s = {cmd.t_s}: {cmd.value!r} is not one of {', '.join(gaits)}")


# ------------------------------------------------------------------------------------------------ factories
def gait_factories(
    robot: RobotDescription, limits: SteeringLimits, serpenoid: dict[str, SerpenoidParams] | None = None
) -> dict[str, Callable[[float, Motion], Motion]]:
    """The gaits a driven run switches between, each a factory (start time, the running motion) → motion.

    ``lateral_undulation`` and ``sidewinding`` are the paper's presets unless ``serpenoid`` gives others (an
    experiment's own ``[gait]``); ``obstacle_aided`` is paper 001's controller with its defaults, its track laid
    from the body's shape at the switch; ``rest`` holds every joint at 0."""
    params = {
        "lateral_undulation": replace(PRESETS["lateral_undulation_orthotropic"], planar=True),
        "sidewinding": replace(PRESETS["sidewinding"], soft_start=False),
        **(serpenoid or {}),
    }
    if not robot.has_vertical_axis:
        params.pop("sidewinding", None)
    out: dict[str, Callable[[float, Motion], Motion]] = {}
    for name, p in params.items():
        p = replace(p, soft_start=False, offset_h_rad=0.0)
        validate_serpenoid(p, robot, f"gait {name}")

        def make(t_s: float, running: Motion, name: str = name, p: SerpenoidParams = p) -> Motion:
            phase = running.phase_rad
            return SerpenoidWave(name, p, limits, phase_rad=0.0 if phase is None else phase)

        out[name] = make
    from aiko.robots.aiko.gaits.obstacle_aided import obstacle_aided_from_table

    def make_obstacle(t_s: float, running: Motion) -> Motion:
        # the track is laid from the body's shape at the switch (paper 001 lays it from the initial posture)
        posture = np.clip(running.sample()[0][0], -robot.limit_h_rad, robot.limit_h_rad)
        table = Table({"initial_joint_angles_deg": [math.degrees(a) for a in posture]}, "gait", "")
        return FollowedGait("obstacle_aided", obstacle_aided_from_table(table, robot), limits, t_s, running.sample()[0])

    out["obstacle_aided"] = make_obstacle
    out["rest"] = lambda t_s, running: Rest(limits.n_joints)
    return out


def parse_commands(entries: Any, where: str, gaits: Sequence[str]) -> list[DriveCommand]:
    """``commands = [{ t_s = 5.0, command = "speed", value = 1.2 }, { t_s = 20, command = "gait", value =
    "lateral_undulation" }, …]``: what ``aiko drive --save`` writes from a driven run."""
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: expected a list of {{ t_s, command, value }} tables")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) - {"t_s", "command", "value", "source"} or "t_s" not in entry:
            raise ConfigError(f"{where}[{i}]: expected {{ t_s = S, command = NAME, value = … }}, got {entry!r}")
        t_s = entry["t_s"]
        if isinstance(t_s, bool) or not isinstance(t_s, (int, float)):
            raise ConfigError(f"{where}[{i}].t_s: expected a number of seconds, got {t_s!r}")
        source = str(entry.get("source", "script"))
        cmd = DriveCommand(float(t_s), str(entry.get("command", "")), entry.get("value"), source)
        try:
            validate_command(cmd, gaits)
        except ConfigError as exc:
            raise ConfigError(f"{where}[{i}]: {exc}") from None
        out.append(cmd)
    return out


def steerable_from_table(table: Table, robot: RobotDescription) -> SteerableGait:
    """``[gait] kind = "steerable"``: ``start`` (a gait name), ``max_speed``, ``max_turn_deg``,
    ``max_accel_deg_s2``, ``commands`` (the operator's commands, e.g. from a driven run's log), and optionally
    ``[gait.lateral_undulation]`` / ``[gait.sidewinding]`` with serpenoid keys replacing the paper's preset."""
    limits = SteeringLimits.of(
        robot,
        accel_rad_s2=math.radians(table.number("max_accel_deg_s2", 1000.0, min=1.0, max=100_000.0)),
        max_speed=table.number("max_speed", 1.5, min=0.0, min_exclusive=True, max=10.0),
        max_turn_rad=math.radians(table.number("max_turn_deg", 15.0, min=0.0, max=math.degrees(robot.limit_h_rad))),
    )
    serpenoid = {}
    for family in ("lateral_undulation", "sidewinding"):
        if table.raw(family, None) is not None:  # the family's own serpenoid parameters (a driven experiment's)
            sub = table.table(family)
            serpenoid[family] = serpenoid_from_table(sub, robot).params
            sub.finish()
    gaits = gait_factories(robot, limits, serpenoid)
    default_start = "sidewinding" if "sidewinding" in gaits else "lateral_undulation"
    start = table.string("start", default_start, choices=sorted(gaits))
    script = parse_commands(table.raw("commands", []), f"{table.path}.commands", sorted(gaits))
    return SteerableGait(gaits, start, limits, script)


register_gait("steerable", steerable_from_table)

__all__ = [
    "COMMANDS",
    "GAIT_NAMES",
    "DriveCommand",
    "SteerableGait",
    "SteeringLimits",
    "gait_factories",
    "parse_commands",
    "steerable_from_table",
]
