"""The simulated UR3 behind the emulator: joint state, the motions URScript would run, and the safety system.

A model, not UR's controller: it reproduces what a client can observe (where the arm goes, how fast, when it
stops and why), not UR's trajectory generator. Each motion advances the joints one controller tick at a time:

* servo (servoj / servoL): first-order tracking of the joint target with time constant
  ``lookahead_time * 300 / gain`` (URScript's defaults, lookahead 0.1 s and gain 300, give 0.1 s), the joint
  speed clipped to the model's limits as a whole vector so the path keeps its direction;
* moveJ: one synchronised trapezoid in joint space (the joint with the farthest to go sets the pace);
* moveL: a trapezoid along the straight TCP line with the orientation interpolated on the same parameter,
  each tick's pose solved by the inverse kinematics seeded with the current joints;
* speedJ / speedL: joint or TCP velocity ramped towards the target at the given acceleration;
* stopJ / stopL: the current joint velocity ramped to zero (joint deceleration for stopJ, TCP deceleration for
  stopL).

The safety system checks every tick's next joint state before it is applied: a joint outside its range, a
joint faster than its limit (beyond 1 % tolerance), a TCP outside the configured workspace box or faster than
the TCP speed limit raises a protective stop: the arm holds its last safe joints, the motion is dropped and the
reason kept until ``unlock`` (which, like PolyScope, refuses during the first ``unlock_delay_s`` seconds after
the stop; UR's default is 5 s).

The speed slider (``speed_fraction``, RTDE ``speed_slider_fraction``) scales time as the controller's does: every
motion advances ``dt * speed_fraction`` of its own time per tick, so a moveJ at 20 % takes five times as long at a
fifth of the speed and a twenty-fifth of the acceleration, and a speedJ moves at a fifth of its speed.

Force mode, teach mode and freedrive (:class:`ComplianceMotion`) are an admittance of our own on the plant's flange
wrench, not UR's force controller (whose gains are not published): on each compliant axis of the task frame the
TCP moves at ``admittance * (wrench the robot should apply - wrench it applies)``, clipped to the axis' speed
limit, the velocity filtered with a time constant set by the damping. Without a plant the flange feels nothing,
so force mode moves at the commanded force's admittance speed until something stops it, as a real arm in free air
accelerates until its speed limit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from aiko.devices.ur import kinematics as kin
from aiko.devices.ur import kinematics_compiled as kc

# UR safety modes (RTDE guide, "safety_mode"): NORMAL 1, REDUCED 2, PROTECTIVE_STOP 3, ... FAULT 9.
SAFETY_NORMAL = 1
SAFETY_PROTECTIVE_STOP = 3
# UR robot modes (RTDE guide, "robot_mode"): ... POWER_OFF 3, IDLE 5, RUNNING 7.
ROBOT_MODE_RUNNING = 7

# The UR3's home pose in UR's documentation pictures: the arm up, wrist bent, TCP in front of the base.
HOME_Q = (0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0)
SPEED_TOLERANCE = 1.01
HISTORY_TICKS = 1000  # get_actual_joint_positions_history looks back at most this many ticks

PlantHook = Callable[[float, np.ndarray, np.ndarray], "Sequence[float] | None"]
"""Called once per controller tick with (time in s, flange pose [x,y,z,rx,ry,rz], flange speed [vx..wz]);
may return the wrench [Fx, Fy, Fz, Tx, Ty, Tz] (N, N m) the plant exerts on the flange, reported as
``actual_TCP_force``, or None for no contact."""


@dataclass
class SafetyConfig:
    """The emulated controller's safety limits (the ones a real UR3 would take from its safety configuration)."""

    workspace_min_m: tuple[float, float, float] = (-0.6, -0.6, -0.2)
    workspace_max_m: tuple[float, float, float] = (0.6, 0.6, 0.8)
    tcp_speed_max_m_s: float = 1.5
    unlock_delay_s: float = 5.0


@dataclass
class Trapezoid:
    """A rest-to-rest trapezoidal (or triangular) profile of a scalar from 0 to ``length``."""

    length: float
    v_max: float
    a_max: float
    t_acc: float = field(init=False)
    t_flat: float = field(init=False)
    v_peak: float = field(init=False)

    def __post_init__(self) -> None:
        v = self.v_max
        a = max(self.a_max, 1e-9)
        if v * v / a > self.length:  # triangular: never reaches v_max
            v = float(np.sqrt(self.length * a))
        self.v_peak = v
        self.t_acc = v / a if a > 0 else 0.0
        self.t_flat = (self.length - v * self.t_acc) / v if v > 0 else 0.0

    @property
    def duration_s(self) -> float:
        return 2 * self.t_acc + self.t_flat

    def at(self, t: float) -> float:
        """Distance covered at time ``t`` (clamped to the profile)."""
        a = self.v_peak / self.t_acc if self.t_acc > 0 else 0.0
        if t <= 0:
            return 0.0
        if t < self.t_acc:
            return 0.5 * a * t * t
        if t < self.t_acc + self.t_flat:
            return 0.5 * a * self.t_acc**2 + self.v_peak * (t - self.t_acc)
        if t < self.duration_s:
            td = self.duration_s - t
            return self.length - 0.5 * a * td * td
        return self.length


class Motion:
    """One running motion; ``step`` returns the next joint positions, ``done`` says it has finished."""

    done = False

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class ServoMotion(Motion):
    def __init__(self, q_target: np.ndarray, lookahead_time_s: float, gain: float) -> None:
        self.update(q_target, lookahead_time_s, gain)

    def update(self, q_target: np.ndarray, lookahead_time_s: float, gain: float) -> None:
        self.q_target = np.asarray(q_target, dtype=float)
        self.tau_s = max(lookahead_time_s, 0.0) * 300.0 / max(gain, 1.0)

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        tau = max(self.tau_s, dt)
        qd = (self.q_target - sim.q) / tau
        return sim.q + sim.clip_speed(qd) * dt


class MoveJMotion(Motion):
    def __init__(self, q0: np.ndarray, q1: np.ndarray, speed: float, accel: float) -> None:
        self.q0, self.q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
        span = float(np.max(np.abs(self.q1 - self.q0)))
        self.span = span
        self.profile = Trapezoid(span, speed, accel) if span > 0 else None
        self.t = 0.0

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        if self.profile is None:
            self.done = True
            return self.q1.copy()
        self.t += dt
        s = self.profile.at(self.t) / self.span
        if self.t >= self.profile.duration_s:
            self.done = True
        return self.q0 + s * (self.q1 - self.q0)


class MoveLMotion(Motion):
    def __init__(self, sim: ArmSim, pose1: Sequence[float], speed: float, accel: float) -> None:
        t0 = kin.pose_to_matrix(sim.tcp_pose())
        t1 = kin.pose_to_matrix(pose1)
        self.p0, self.p1 = t0[:3, 3], t1[:3, 3]
        self.slerp = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([t0[:3, :3], t1[:3, :3]])))
        dist = float(np.linalg.norm(self.p1 - self.p0))
        angle = float(Rotation.from_matrix(t1[:3, :3] @ t0[:3, :3].T).magnitude())
        # URScript's movel speed is the tool's; a pure reorientation is paced as if the angle (rad) were metres.
        self.length = dist if dist > 1e-9 else angle
        self.profile = Trapezoid(self.length, speed, accel) if self.length > 0 else None
        self.pose1 = np.asarray(pose1, dtype=float)
        self.t = 0.0

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        if self.profile is None:
            self.done = True
            return sim.ik(self.pose1)
        self.t += dt
        s = self.profile.at(self.t) / self.length
        if self.t >= self.profile.duration_s:
            self.done = True
            s = 1.0
        pose = np.concatenate([self.p0 + s * (self.p1 - self.p0), self.slerp([s]).as_rotvec()[0]])
        return sim.ik(pose)


class SpeedMotion(Motion):
    """speedJ (``tool=False``, rad/s) or speedL (``tool=True``, m/s and rad/s in the base frame)."""

    def __init__(self, target: np.ndarray, accel: float, tool: bool) -> None:
        self.update(target, accel)
        self.tool = tool
        self.velocity = np.zeros(6)

    def update(self, target: np.ndarray, accel: float) -> None:
        self.target = np.asarray(target, dtype=float)
        self.accel = max(accel, 1e-9)

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        if self.tool:
            self.velocity = sim.jacobian() @ sim.qd  # the TCP twist the joints have now
        else:
            self.velocity = sim.qd.copy()
        diff = self.target - self.velocity
        norm = float(np.linalg.norm(diff))
        max_change = self.accel * dt
        if norm > max_change:
            diff *= max_change / norm
        velocity = self.velocity + diff
        qd = np.linalg.solve(sim.jacobian(), velocity) if self.tool else velocity
        return sim.q + qd * dt


class ComplianceMotion(Motion):
    """Force mode, teach mode and freedrive: an admittance on the flange wrench (see the module docstring).

    ``frame`` is the task frame (pose in the base frame); ``selection`` marks compliant axes (1) in it; ``wrench``
    is the wrench the robot should apply to its environment on those axes (zero for teach / freedrive: the arm
    yields to whatever pushes it); ``limits`` the speed limits of the compliant axes (m/s, rad/s). Non-compliant
    axes hold still. The wrench the robot applies is minus the wrench the plant exerts on the flange.
    """

    ADMITTANCE_M_PER_N_S = 0.01  # 10 N of force error -> 0.1 m/s, at gain scaling 0.5 (the script's default)
    ADMITTANCE_RAD_PER_NM_S = 0.1

    def __init__(
        self,
        frame: Sequence[float],
        selection: Sequence[int],
        wrench: Sequence[float],
        limits: Sequence[float],
        gain_scaling: float = 0.5,
        damping: float = 0.025,
    ) -> None:
        self.update(frame, selection, wrench, limits)
        self.gain_scaling = gain_scaling
        self.damping = damping
        self.velocity = np.zeros(6)

    def update(
        self, frame: Sequence[float], selection: Sequence[int], wrench: Sequence[float], limits: Sequence[float]
    ) -> None:
        self.rotation = kin.pose_to_matrix(frame)[:3, :3]
        self.selection = np.asarray(selection, dtype=float) != 0
        self.wrench = np.asarray(wrench, dtype=float)
        self.limits = np.abs(np.asarray(limits, dtype=float))

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        r = self.rotation
        measured = sim.wrench_raw  # what the plant exerts on the flange, base frame
        applied = -np.concatenate([r.T @ measured[:3], r.T @ measured[3:]])  # what the robot exerts, task frame
        gain = np.array([self.ADMITTANCE_M_PER_N_S] * 3 + [self.ADMITTANCE_RAD_PER_NM_S] * 3) * self.gain_scaling / 0.5
        target = np.where(self.selection, np.clip(gain * (self.wrench - applied), -self.limits, self.limits), 0.0)
        tau_s = 0.01 + 0.5 * min(max(self.damping, 0.0), 1.0)
        self.velocity += (target - self.velocity) * min(dt / tau_s, 1.0)
        twist = np.concatenate([r @ self.velocity[:3], r @ self.velocity[3:]])
        return sim.q + np.linalg.solve(sim.jacobian(), twist) * dt


class StopMotion(Motion):
    """stopJ (``tool=False``, deceleration rad/s^2 of the fastest joint) or stopL (m/s^2 of the TCP)."""

    def __init__(self, decel: float, tool: bool) -> None:
        self.decel = max(decel, 1e-9)
        self.tool = tool

    def step(self, sim: ArmSim, dt: float) -> np.ndarray:
        qd = sim.qd
        if self.tool:
            speed = float(np.linalg.norm((sim.jacobian() @ qd)[:3]))
            if speed < 1e-9:
                speed = float(np.max(np.abs(qd)))
        else:
            speed = float(np.max(np.abs(qd)))
        if speed <= self.decel * dt:
            self.done = True
            return sim.q.copy()
        return sim.q + qd * ((speed - self.decel * dt) / speed) * dt


class ArmSim:
    """The UR3's joints, the motion being executed, and the safety system (one instance per emulator)."""

    def __init__(
        self,
        model: kin.URModel = kin.UR3,
        q0: Sequence[float] = HOME_Q,
        safety: SafetyConfig | None = None,
        plant: PlantHook | None = None,
    ) -> None:
        self.model = model
        self.q = np.asarray(q0, dtype=float)
        self.qd = np.zeros(6)
        self.tcp_offset = np.zeros(6)
        self.safety = safety or SafetyConfig()
        self.plant = plant
        self.motion: Motion | None = None
        self.time_s = 0.0
        self.safety_mode = SAFETY_NORMAL
        self.protective_stop_reason = ""
        self.protective_stop_time_s = 0.0
        self.wrench_raw = np.zeros(6)  # what the plant exerts on the flange (N, N m, base frame)
        self.wrench_offset = np.zeros(6)  # zero_ftsensor(): subtracted from what is reported
        self.external_wrench: np.ndarray | None = None  # ft_rtde_input_enable(): the client's own sensor instead
        self.speed_fraction = 1.0  # the speed slider
        self.step_time_s = 0.008  # the controller period (get_steptime); the emulator sets its own
        self.payload_mass_kg = 0.0
        self.payload_cog_m = np.zeros(3)
        self.history: deque[np.ndarray] = deque(maxlen=HISTORY_TICKS)  # the last joint positions, newest last
        self.speed_max = np.asarray(model.joint_speed_max_rad_s, dtype=float)
        self._kin_cache: dict[bytes, tuple[np.ndarray, ...]] = {}
        self._table = kc.model_table(model)
        kc.warm_up()  # loads (or on an empty cache compiles) the compiled kinematics now, not in a client's tick

    @property
    def wrench(self) -> np.ndarray:
        """The TCP force the controller reports (``actual_TCP_force``): the plant's wrench (or the client's own
        sensor after ``ft_rtde_input_enable``) minus the ``zero_ftsensor`` offset."""
        raw = self.wrench_raw if self.external_wrench is None else self.external_wrench
        return raw - self.wrench_offset

    def joint_positions_back(self, steps: int) -> np.ndarray:
        """``get_actual_joint_positions_history(steps)``: the joints ``steps`` controller ticks ago (0: now)."""
        if not self.history:
            return self.q.copy()
        return self.history[-1 - min(max(steps, 0), len(self.history) - 1)].copy()

    # --- kinematics on the current state -------------------------------------------------------------------
    def _kin(self, q: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """(TCP pose, flange 4x4, TCP Jacobian, TCP 4x4, elbow position, flange pose, flange Jacobian) of ``q``
        (default: the current joints), cached: one tick asks for the same joints several times (safety check,
        outputs, plant hook). Compiled (``kinematics_compiled``); callers copy what they hand out."""
        q = self.q if q is None else np.asarray(q, dtype=float)
        key = q.tobytes() + self.tcp_offset.tobytes()
        hit = self._kin_cache.get(key)
        if hit is None:
            hit = kc.forward_kinematics(self._table, q, self.tcp_offset)
            if len(self._kin_cache) > 4:
                self._kin_cache.clear()
            self._kin_cache[key] = hit
        return hit

    def tcp_rotation(self) -> np.ndarray:
        return self._kin(None)[3][:3, :3].copy()

    def elbow_position(self) -> np.ndarray:
        """The elbow joint's position in the base frame (RTDE ``elbow_position``)."""
        return self._kin(None)[4].copy()

    def tcp_pose(self, q: np.ndarray | None = None) -> np.ndarray:
        return self._kin(q)[0].copy()

    def flange_pose(self) -> np.ndarray:
        return self._kin(None)[5].copy()

    def jacobian(self, q: np.ndarray | None = None, tcp: bool = True) -> np.ndarray:
        return self._kin(q)[2 if tcp else 6]

    def tcp_speed(self) -> np.ndarray:
        return self.jacobian() @ self.qd

    def ik(self, pose: Sequence[float], q_near: np.ndarray | None = None) -> np.ndarray:
        return kc.solve_inverse(self.model, self._table, pose, self.q if q_near is None else q_near, self.tcp_offset)

    def clip_speed(self, qd: np.ndarray) -> np.ndarray:
        """Scale a joint velocity as a whole so no joint exceeds its speed limit."""
        ratio = float(np.max(np.abs(qd) / self.speed_max))
        return qd / ratio if ratio > 1.0 else qd

    @property
    def protective_stopped(self) -> bool:
        return self.safety_mode == SAFETY_PROTECTIVE_STOP

    # --- commands ------------------------------------------------------------------------------------------
    def start(self, motion: Motion | None) -> None:
        """Replace the running motion (None: hold still). Ignored while protective-stopped."""
        if self.protective_stopped:
            return
        self.motion = motion

    def protective_stop(self, reason: str) -> None:
        if self.protective_stopped:
            return
        self.safety_mode = SAFETY_PROTECTIVE_STOP
        self.protective_stop_reason = reason
        self.protective_stop_time_s = self.time_s
        self.motion = None
        self.qd = np.zeros(6)

    def unlock(self) -> tuple[bool, str]:
        """Clear a protective stop; refused within ``unlock_delay_s`` of it (PolyScope's 5 s rule)."""
        if not self.protective_stopped:
            return True, ""
        waited = self.time_s - self.protective_stop_time_s
        if waited < self.safety.unlock_delay_s:
            return False, (
                f"Cannot unlock protective stop until {self.safety.unlock_delay_s:g}s after occurrence. "
                "Always inspect cause of protective stop before unlocking"
            )
        self.safety_mode = SAFETY_NORMAL
        self.protective_stop_reason = ""
        return True, ""

    def prime_plant(self) -> None:
        """Call the plant hook once for the arm at rest at time 0, before the controller serves anyone: whatever
        the hook compiles or loads on its first call (numba kernels) happens here, not inside a tick a client
        is waiting for. The first tick then calls it at t = dt, as it would have anyway."""
        if self.plant is not None:
            wrench = self.plant(self.time_s, self.flange_pose(), np.zeros(6))
            self.wrench_raw = np.zeros(6) if wrench is None else np.asarray(wrench, dtype=float)

    # --- the controller tick -------------------------------------------------------------------------------
    def violation(self, q_next: np.ndarray, qd_next: np.ndarray) -> str:
        """Why ``q_next`` (reached at ``qd_next``) is not allowed, or '' when it is."""
        if not kin.within_joint_limits(self.model, q_next):
            worst = int(np.argmax(np.abs(q_next)))
            return f"joint {worst} position limit exceeded ({np.degrees(q_next[worst]):.1f} deg)"
        over = np.abs(qd_next) > self.speed_max * SPEED_TOLERANCE
        if np.any(over):
            j = int(np.argmax(over))
            return f"joint {j} speed limit exceeded ({np.degrees(abs(qd_next[j])):.0f} deg/s)"
        pos = self.tcp_pose(q_next)[:3]
        lo, hi = np.asarray(self.safety.workspace_min_m), np.asarray(self.safety.workspace_max_m)
        if np.any(pos < lo) or np.any(pos > hi):
            return f"TCP {np.round(pos, 4).tolist()} outside the workspace box {lo.tolist()}..{hi.tolist()}"
        tcp_speed = float(np.linalg.norm((self.jacobian(q_next) @ qd_next)[:3]))
        if tcp_speed > self.safety.tcp_speed_max_m_s:
            return f"TCP speed {tcp_speed:.2f} m/s over the {self.safety.tcp_speed_max_m_s:g} m/s limit"
        return ""

    def tick(self, dt: float) -> None:
        """Advance one controller period: run the motion, apply the safety checks, call the plant hook."""
        self.time_s += dt
        if self.motion is not None and not self.protective_stopped:
            try:
                q_next = self.motion.step(self, dt * self.speed_fraction)
            except kin.IKError as exc:
                self.protective_stop(f"inverse kinematics failed: {exc}")
                q_next = self.q
            else:
                qd_next = (q_next - self.q) / dt
                reason = self.violation(q_next, qd_next)
                if reason:
                    self.protective_stop(reason)
                else:
                    self.q, self.qd = q_next, qd_next
                    if self.motion.done:
                        self.motion = None
                        self.qd = np.zeros(6)
        else:
            self.qd = np.zeros(6)
        if self.plant is not None:
            flange_speed = self.jacobian(tcp=False) @ self.qd
            wrench = self.plant(self.time_s, self.flange_pose(), flange_speed)
            self.wrench_raw = np.zeros(6) if wrench is None else np.asarray(wrench, dtype=float)
        self.history.append(self.q)  # never mutated in place: every step assigns a new array
