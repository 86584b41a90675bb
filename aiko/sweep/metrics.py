"""The metric registry: what a sweep can record about a run, by name (as gaits are registered by kind).

A metric is a function of the finished run (:class:`RunData`: the experiment, the run summary and the run's
records, read through ``LogReader`` whether or not a log file was written) returning a number, or None where the
run cannot tell (no tracked point on the kinematic backend, no motor effort, a run that did not move). The motion
metrics reuse ``aiko.analysis.compare``: the tracked point is the one ``aiko compare`` aligns (``/mocap`` or
``/mocap/tracked_point``; link 6 on Aiko), its planar displacement from the first to the last valid sample.

``register_metric(name, function, help)`` adds one; ``aiko sweep --list-metrics`` prints them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from aiko.core.errors import ConfigError

GRAVITY_M_S2 = 9.81


@dataclass
class RunData:
    """A finished run as metrics see it."""

    experiment: Any  # aiko.robots.aiko.experiment.Experiment
    summary: dict[str, Any]
    reader: Any  # aiko.log.LogReader (a file, or the run's records in memory)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return float(self.summary.get("duration_s") or 0.0)

    @cached_property
    def displacement(self) -> dict[str, Any] | None:
        """``aiko.analysis.compare.displacement`` of the tracked point (motion capture); without one, of the tracked
        link's start and end positions in the run summary (a simulator without simulated motion capture); else None."""
        from aiko.analysis.compare import CompareError, Track, displacement, tracked_point

        try:
            track = tracked_point(self.reader)
        except CompareError:
            start, end = self.summary.get("tracked_point_start_m"), self.summary.get("tracked_point_end_m")
            if start is None or end is None:
                return None
            track = Track(np.array([0.0, self.duration_s]), np.array([start, end], dtype=np.float64), np.zeros(2, bool))
        d = displacement(track)
        return d if d["displacement_m"] is not None else None

    @cached_property
    def joint_power_w(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Times (s) and total absolute mechanical power of the joint drives Σ|τ·ω| (W), from ``/joint_feedback``."""
        if not self.reader.has("/joint_feedback"):
            return None
        fb = self.reader.channel("/joint_feedback")
        if "effort_h" not in fb or "effort_v" not in fb:
            return None
        power = np.zeros(len(fb))
        for axis in ("h", "v"):
            tau = np.asarray(fb[f"effort_{axis}"], dtype=np.float64)
            omega = np.asarray(fb[f"rate_{axis}_rad_s"], dtype=np.float64)
            if tau.shape != omega.shape:
                return None
            power += np.nansum(np.abs(tau * omega), axis=1)
        return np.asarray(fb["t_s"], dtype=np.float64), power


MetricFunction = Callable[[RunData], float | None]


@dataclass(frozen=True)
class Metric:
    name: str
    function: MetricFunction
    help: str


_METRICS: dict[str, Metric] = {}


def register_metric(name: str, function: MetricFunction, help: str) -> None:
    _METRICS[name] = Metric(name, function, help)


def metric_names() -> list[str]:
    return sorted(_METRICS)


def metric_help() -> dict[str, str]:
    return {name: _METRICS[name].help for name in metric_names()}


def check_metric_names(names: Iterable[str], where: str) -> None:
    for name in names:
        if name not in _METRICS:
            raise ConfigError(f"{where}: unknown metric {name!r}; known metrics: {', '.join(metric_names())}")


def compute_metrics(names: Iterable[str], run: RunData, problems: list[str] | None = None) -> dict[str, float | None]:
    """Each metric's value (None where unknown or not finite). A metric that raises is None, and its error goes to
    ``problems`` if given (else it propagates): one metric that cannot read a run does not lose the others."""
    out: dict[str, float | None] = {}
    for name in names:
        try:
            value = _METRICS[name].function(run)
        except Exception as exc:
            if problems is None:
                raise
            problems.append(f"metric {name}: {type(exc).__name__}: {exc}")
            value = None
        out[name] = None if value is None or not math.isfinite(float(value)) else float(value)
    return out


# --- motion of the tracked point ------------------------------------------------------------------------------
def _displacement_field(key: str, index: int | None = None) -> MetricFunction:
    def metric(run: RunData) -> float | None:
        d = run.displacement
        if d is None or d[key] is None:
            return None
        return d[key] if index is None else d[key][index]

    return metric


def _speed(run: RunData) -> float | None:
    d = run.displacement
    return d["distance_m"] / run.duration_s if d is not None and run.duration_s > 0 else None


def _yaw_change_deg(run: RunData) -> float | None:
    """The tracked body's yaw change: from the motion capture's orientation, else the simulator's link poses."""
    d = run.displacement
    if d is not None and d["yaw_change_deg"] is not None:
        return d["yaw_change_deg"]
    if not run.reader.has("/sim/link_poses"):
        return None
    from aiko.analysis.compare import yaw_rad

    poses = run.reader.channel("/sim/link_poses")
    link = int(run.summary.get("tracked_link", 6)) - 1
    if "quaternion_wxyz" in poses:  # snake3d: unit quaternions (N, links, 4)
        q = np.asarray(poses["quaternion_wxyz"], dtype=np.float64)
        yaw = yaw_rad(q[:, link, :]) if q.ndim == 3 and 0 <= link < q.shape[1] else None
    elif "theta_rad" in poses:  # planar models: heading angles (N, links)
        theta = np.asarray(poses["theta_rad"], dtype=np.float64)
        yaw = theta[:, link] if theta.ndim == 2 and 0 <= link < theta.shape[1] else None
    else:
        yaw = None
    if yaw is None or len(yaw) < 2:
        return None
    yaw = np.unwrap(yaw)
    return math.degrees(yaw[-1] - yaw[0])


def _work_j(run: RunData) -> float | None:
    power = run.joint_power_w
    if power is None or len(power[0]) < 2:
        return None
    t, p = power
    return float(np.sum(0.5 * (p[1:] + p[:-1]) * np.diff(t)))


def _cost_of_transport(run: RunData) -> float | None:
    """Mechanical cost of transport W / (m g d): joint work over weight times distance (dimensionless)."""
    work, d = _work_j(run), run.displacement
    if work is None or d is None or d["distance_m"] <= 0:
        return None
    return work / (run.experiment.robot.total_mass_kg * GRAVITY_M_S2 * d["distance_m"])


def _tracking_rms_deg(axis: str) -> MetricFunction:
    def metric(run: RunData) -> float | None:
        from aiko.analysis.compare import joint_tracking_rms

        rms = joint_tracking_rms(run.reader)
        if rms is None:
            return None
        per_joint = np.asarray(rms[f"{axis}_rad"], dtype=np.float64)
        return math.degrees(float(np.sqrt(np.nanmean(per_joint**2)))) if per_joint.size else None

    return metric


def _summary_field(key: str) -> MetricFunction:
    def metric(run: RunData) -> float | None:
        value = run.summary.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    return metric


register_metric("distance_m", _displacement_field("distance_m"), "planar distance of the tracked point, start to end")
register_metric("speed_m_s", _speed, "distance_m over the run's duration")
register_metric("heading_deg", _displacement_field("heading_deg"), "direction of the displacement (0 = +x, 90 = +y)")
register_metric("displacement_x_m", _displacement_field("displacement_m", 0), "tracked point's x displacement")
register_metric("displacement_y_m", _displacement_field("displacement_m", 1), "tracked point's y displacement")
register_metric("yaw_change_deg", _yaw_change_deg, "tracked link's yaw change (unwrapped), start to end")
register_metric("joint_work_j", _work_j, "mechanical work of the joint drives, ∫ Σ|τ·ω| dt over the feedback")
register_metric("cost_of_transport", _cost_of_transport, "joint_work_j / (total mass · g · distance_m)")
register_metric("tracking_rms_h_deg", _tracking_rms_deg("h"), "RMS of measured − reference, horizontal joints")
register_metric("tracking_rms_v_deg", _tracking_rms_deg("v"), "RMS of measured − reference, vertical joints")
for _key, _help in {
    "sim_steps": "simulator time steps",
    "newton_iterations_mean": "contact solver: mean iterations per step",
    "newton_iterations_max": "contact solver: most iterations of a step",
    "newton_retries": "contact solver: steps retried",
    "split_steps": "contact solver: steps that converged only as sub-steps",
    "max_split_depth": "contact solver: deepest step halving",
    "contact_residual_max_m_s": "contact solver: largest accepted residual",
    "realtime_factor": "simulated time over the simulator's wall time",
    "sim_wall_time_s": "wall time spent in the simulator",
}.items():
    register_metric(_key, _summary_field(_key), f"{_help} (run summary)")
