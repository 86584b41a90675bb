"""Obstacle-aided locomotion controller in the spirit of Liljebäck et al., ICRA 2009 (ref. [15] of paper 001).

The controller is a reactive :class:`aiko.robots.aiko.gait.Gait`: it sees only what the robot's joint modules report
(angles, rates, status), as on the real robot, and produces joint-angle references.

**Leader–follower.** The body is told to slide along its own curve, like a train along a track: the shape is a
function Φ(s) of arc length s along the path, and joint i (counted from the tail; the head joint is n−1) at
distance d_i = (n−1−i)·2l behind the head joint takes the reference φ_i(t) = Φ(σ(t) − d_i), where σ advances at
``propagation_speed_m_s``. The head joint is the leader; every other joint repeats, later, what the joint ahead of
it did at the same place. Where obstacles hold the bends, the body then slides forward at the propagation speed.
The laid part of the track (s ≤ 0) is the initial shape; ahead of the head it continues as a sinusoid fitted to
that shape (amplitude, wavelength, phase by least squares), so the head keeps weaving.

**Jam detection.** When the obstacles press the body so that it cannot take the commanded shape, the joints
fall behind their references. A jam is declared when the largest tracking error stays above ``jam_error_deg``
for ``jam_time_s`` (or a joint reports torque saturation for that long). Optionally (``jam_speed_m_s`` > 0), a
body-velocity source — motion capture on the robot, the CM velocity in the simulator, fed through
:meth:`ObstacleAidedGait.observe_body_velocity` — also declares a jam when the mean forward (+x) speed over
``progress_window_s`` stays below ``jam_speed_m_s``; after such a jam the head's new path bends the other way.

**Jam resolution.** Propagation stops and the joints whose error exceeds half the threshold — those the contact
forces push against, i.e. whose obstacle forces oppose propulsion; if none lags, the third with the largest
motor effort — are relaxed: their reference becomes their
measured angle, so they comply with the obstacles for ``relax_time_s``. Then the track is re-laid from the body's
actual shape (Φ on the body := the measured angles) and propagation resumes. A jam counts as resolved when
propagation then runs ``jam_time_s`` without a new jam.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.gait import register_gait
from aiko.robots.aiko.joints import JointFeedback, JointReferences, JointStatus

# The paper's initial posture (Sec. VII): link angles θ_0 = [7, −32, −57, −46, −8, 33, 53, 45, 12, −23] deg,
# i.e. joint angles φ_0 = D θ_0.
PAPER_THETA0_DEG = (7.0, -32.0, -57.0, -46.0, -8.0, 33.0, 53.0, 45.0, 12.0, -23.0)
PAPER_PHI0_DEG = tuple(a - b for a, b in zip(PAPER_THETA0_DEG[:-1], PAPER_THETA0_DEG[1:], strict=True))


@dataclass(frozen=True)
class ObstacleAidedParams:
    initial_joint_angles_rad: tuple[float, ...]
    link_length_m: float
    propagation_speed_m_s: float = 0.1
    jam_error_rad: float = math.radians(15.0)
    jam_time_s: float = 0.5
    relax_time_s: float = 1.0
    jam_speed_m_s: float = 0.0  # > 0: forward progress below this, averaged over progress_window_s, is a jam
    progress_window_s: float = 3.0
    amplitude_rad: float | None = None  # of the head's sinusoid; None: fitted to the initial shape
    wavelength_m: float | None = None
    joint_limit_rad: float = math.radians(90.0)


def fit_sinusoid(s: np.ndarray, phi: np.ndarray, wavelength_m: float | None = None) -> tuple[float, float, float]:
    """Least-squares A sin(2π s/λ + ψ) through samples; scans λ when not given. Returns (A, λ, ψ)."""
    span = float(s.max() - s.min())
    candidates = [wavelength_m] if wavelength_m else np.linspace(0.5 * span, 4.0 * span, 400)
    best = (np.inf, 0.0, 1.0, 0.0)
    for lam in candidates:
        k = 2 * math.pi / lam
        basis = np.stack([np.sin(k * s), np.cos(k * s)], axis=1)
        coef, *_ = np.linalg.lstsq(basis, phi, rcond=None)
        err = float(np.sum((basis @ coef - phi) ** 2))
        if err < best[0]:
            best = (err, float(np.hypot(*coef)), float(lam), float(math.atan2(coef[1], coef[0])))
    return best[1], best[2], best[3]


@dataclass
class JamStatistics:
    jams_detected: int = 0
    jams_resolved: int = 0
    jam_times_s: list[float] = field(default_factory=list)


class ObstacleAidedGait:
    """Leader–follower shape propagation with jam detection and resolution (see the module docstring)."""

    def __init__(self, params: ObstacleAidedParams) -> None:
        self.params = params
        phi0 = np.asarray(params.initial_joint_angles_rad, dtype=float)
        self.n_joints = phi0.size
        if self.n_joints < 2:
            raise ConfigError("obstacle-aided gait needs at least 2 joints")
        self.link_length_m = params.link_length_m
        self._d = (self.n_joints - 1 - np.arange(self.n_joints)) * self.link_length_m  # behind the head joint
        amp, lam, _ = fit_sinusoid(-self._d, phi0, params.wavelength_m)
        self.amplitude_rad = params.amplitude_rad if params.amplitude_rad is not None else amp
        self.wavelength_m = lam
        self._lay_track(0.0, phi0)
        self.sigma_m = 0.0
        self.mode = "propagate"
        self._t_last = 0.0  # σ(t) = v t from run time 0, however sparsely the gait is sampled
        self._error_since: float | None = None
        self._relax_until = 0.0
        self._relaxed = np.zeros(self.n_joints, dtype=bool)
        self._resumed_at: float | None = None
        self._last_feedback_angles = phi0.copy()
        self._velocity: deque[tuple[float, float]] = deque()  # (t, forward speed) observations
        self._alternate_next = False
        self._watch_from = 0.0  # progress is judged only over windows that start after this
        self.stats = JamStatistics()

    # ---------------------------------------------------------------- the track Φ(s)
    def _lay_track(self, sigma: float, body_angles: np.ndarray, alternate: bool = False) -> None:
        """The body's current joint angles become the track behind σ. Ahead, the sinusoid continues with the
        phase that keeps the path's mean heading equal to the body's own mean heading (both measured relative
        to the head link, which the joint angles alone determine), so the snake keeps its direction instead of
        drifting sideways; the angle mismatch at the head is blended out over one link length."""
        self._laid_s = sigma - self._d  # increasing arc length, tail joint first
        self._laid_phi = np.asarray(body_angles, dtype=float).copy()
        self._sigma_laid = sigma
        k = 2 * math.pi / self.wavelength_m
        body = np.asarray(body_angles, dtype=float)
        # link headings relative to the head link: θ_i − θ_n = Σ_{j ≥ i} φ_j
        body_heading = float(np.mean(np.r_[np.cumsum(body[::-1])[::-1], 0.0]))
        n_ahead = max(2, round(3 * self.wavelength_m / self.link_length_m))
        s_ahead = sigma + self.link_length_m * np.arange(1, n_ahead + 1)
        psi = np.linspace(-math.pi, math.pi, 721)[:, None]
        mismatch = body[-1] - self.amplitude_rad * np.sin(k * sigma + psi)
        blend = np.clip(1.0 - (s_ahead - sigma) / self.link_length_m, 0.0, 1.0)[None, :]
        phi_ahead = self.amplitude_rad * np.sin(k * s_ahead[None, :] + psi) + mismatch * blend
        heading_ahead = -np.cumsum(phi_ahead, axis=1)  # θ_{n+m} − θ_n
        cost = np.abs(heading_ahead.mean(axis=1) - body_heading) + 0.2 * np.abs(mismatch[:, 0])
        if alternate and hasattr(self, "_psi"):
            # after a jam without progress, the head bends the other way than the path it was blocked on
            old_sign = math.copysign(1.0, math.cos(k * sigma + self._psi))
            cost = np.where(np.sign(np.cos(k * sigma + psi[:, 0])) == old_sign, np.inf, cost)
        best = int(np.argmin(cost))
        self._psi = float(psi[best, 0])
        self._head_mismatch = float(mismatch[best, 0])

    def track(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Φ(s) and dΦ/ds."""
        s = np.asarray(s, dtype=float)
        k = 2 * math.pi / self.wavelength_m
        ahead = s > self._sigma_laid
        laid_val = np.interp(s, self._laid_s, self._laid_phi)
        segment = np.clip(np.searchsorted(self._laid_s, s) - 1, 0, self._laid_s.size - 2)
        seg_slope = np.diff(self._laid_phi) / np.diff(self._laid_s)
        inside = (s > self._laid_s[0]) & (s < self._laid_s[-1])
        laid_slope = np.where(inside, seg_slope[segment], 0.0)  # derivative of the linear interpolation
        blend = np.clip(1.0 - (s - self._sigma_laid) / self.link_length_m, 0.0, 1.0)
        sin_val = self.amplitude_rad * np.sin(k * s + self._psi) + self._head_mismatch * blend
        sin_slope = self.amplitude_rad * k * np.cos(k * s + self._psi) - np.where(
            blend > 0, self._head_mismatch / self.link_length_m, 0.0
        )
        value = np.where(ahead, sin_val, laid_val)
        slope = np.where(ahead, sin_slope, laid_slope)
        limit = self.params.joint_limit_rad
        return np.clip(value, -limit, limit), slope

    # ---------------------------------------------------------------- Gait protocol
    def initial_posture(self) -> JointReferences:
        phi = np.asarray(self.params.initial_joint_angles_rad, dtype=float)
        zeros = np.zeros(self.n_joints)
        return JointReferences(0.0, phi.copy(), zeros, zeros.copy(), zeros.copy())

    def references(self, t_s: float, feedback: JointFeedback | None = None) -> JointReferences:
        dt = max(0.0, t_s - self._t_last)
        self._t_last = t_s
        p = self.params
        if self.mode == "propagate":
            self.sigma_m += p.propagation_speed_m_s * dt
        refs, slope = self.track(self.sigma_m - self._d)
        if feedback is not None:
            self._supervise(t_s, feedback, refs)
        zeros = np.zeros(self.n_joints)
        if self.mode == "relax":
            measured = self._last_feedback_angles
            refs = np.where(self._relaxed, measured, refs)
            rates = zeros.copy()
        else:
            rates = slope * p.propagation_speed_m_s
        return JointReferences(t_s, refs, zeros, rates, zeros.copy())

    # ---------------------------------------------------------------- supervisor
    def observe_body_velocity(self, t_s: float, velocity_xy_m_s: np.ndarray) -> None:
        """Body (CM) velocity from motion capture or a simulator; its +x component measures progress."""
        self._velocity.append((t_s, float(velocity_xy_m_s[0])))
        while self._velocity and self._velocity[0][0] < t_s - self.params.progress_window_s:
            self._velocity.popleft()

    def _progress_stalled(self, t_s: float) -> bool:
        p = self.params
        if (
            p.jam_speed_m_s <= 0.0
            or not self._velocity
            or t_s - max(self._watch_from, self._velocity[0][0]) < 0.95 * p.progress_window_s
        ):
            return False
        speeds = [v for t, v in self._velocity if t >= self._watch_from]
        return bool(speeds) and float(np.mean(speeds)) < p.jam_speed_m_s

    def _supervise(self, t_s: float, feedback: JointFeedback, refs: np.ndarray) -> None:
        p = self.params
        measured = np.asarray(feedback.angle_h_rad, dtype=float)
        self._last_feedback_angles = measured
        if self.mode == "relax":
            if t_s >= self._relax_until:
                # re-lay the track along the body's actual shape
                self._lay_track(self.sigma_m, measured, alternate=self._alternate_next)
                self.mode = "propagate"
                self._resumed_at = t_s
                self._watch_from = t_s
                self._error_since = None
            return
        error = np.abs(refs - measured)
        saturated = (np.asarray(feedback.status, dtype=int) & int(JointStatus.SATURATED)) != 0
        error_jam = bool(error.max() > p.jam_error_rad or saturated.any())
        stalled = self._progress_stalled(t_s)
        if not error_jam:
            self._error_since = None
        elif self._error_since is None:
            self._error_since = t_s
        jam = stalled or (self._error_since is not None and t_s - self._error_since >= p.jam_time_s)
        if not jam:
            settle = p.progress_window_s if p.jam_speed_m_s > 0.0 and self._velocity else p.jam_time_s
            if self._resumed_at is not None and t_s - self._resumed_at >= settle and not error_jam:
                self.stats.jams_resolved += 1
                self._resumed_at = None
            return
        self.stats.jams_detected += 1
        self.stats.jam_times_s.append(round(t_s, 4))
        self.mode = "relax"
        self._relax_until = t_s + p.relax_time_s
        relaxed = (error > 0.5 * p.jam_error_rad) | saturated
        if not relaxed.any() and feedback.effort_h is not None:
            # no joint lags: relax those working hardest against the obstacles (largest third of |effort|)
            effort = np.abs(np.asarray(feedback.effort_h, dtype=float))
            relaxed = effort >= np.sort(effort)[-max(1, self.n_joints // 3)]
        self._relaxed = relaxed
        self._alternate_next = stalled
        self._resumed_at = None

    def statistics(self) -> dict:
        return {
            "jams_detected": self.stats.jams_detected,
            "jams_resolved": self.stats.jams_resolved,
            "jam_times_s": list(self.stats.jam_times_s),
            "propagated_m": self.sigma_m,
            "head_wave_amplitude_deg": math.degrees(self.amplitude_rad),
            "head_wavelength_m": self.wavelength_m,
        }


def obstacle_aided_from_table(table: Table, robot: RobotDescription) -> ObstacleAidedGait:
    """``[gait] kind = "obstacle_aided"``; every key optional, defaults from paper 001 Sec. VII."""
    n = robot.n_joints
    default_phi = list(PAPER_PHI0_DEG) if n == len(PAPER_PHI0_DEG) else None
    phi_deg = table.number_list("initial_joint_angles_deg", default_phi, length=n, min=-180.0, max=180.0)
    if phi_deg is None:
        raise ConfigError(f"{table.path}.initial_joint_angles_deg: required for a robot with {n} joints")
    limit = robot.limit_h_rad
    if max(abs(math.radians(a)) for a in phi_deg) > limit + 1e-12:
        raise ConfigError(
            f"{table.path}.initial_joint_angles_deg: beyond the joint limit {math.degrees(limit):.3g} deg"
        )
    amplitude = table.number("amplitude_deg", None, min=0.0, max=math.degrees(limit))
    wavelength = table.number("wavelength_m", None, min=0.0, min_exclusive=True, max=100.0)
    params = ObstacleAidedParams(
        initial_joint_angles_rad=tuple(math.radians(a) for a in phi_deg),
        link_length_m=robot.link_length_m,
        propagation_speed_m_s=table.number("propagation_speed_m_s", 0.1, min=0.0, min_exclusive=True, max=5.0),
        jam_error_rad=math.radians(table.number("jam_error_deg", 15.0, min=0.0, min_exclusive=True, max=90.0)),
        jam_time_s=table.number("jam_time_s", 0.5, min=0.0, min_exclusive=True, max=60.0),
        relax_time_s=table.number("relax_time_s", 1.0, min=0.0, min_exclusive=True, max=60.0),
        jam_speed_m_s=table.number("jam_speed_m_s", 0.0, min=0.0, max=5.0),
        progress_window_s=table.number("progress_window_s", 3.0, min=0.0, min_exclusive=True, max=600.0),
        amplitude_rad=math.radians(amplitude) if amplitude is not None else None,
        wavelength_m=wavelength,
        joint_limit_rad=limit,
    )
    return ObstacleAidedGait(params)


register_gait("obstacle_aided", obstacle_aided_from_table)
