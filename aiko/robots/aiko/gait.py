"""Gaits: the one piece of code that produces joint references for the robot and for every simulator.

The serpenoid gait is eq. 70–71 of Transeth et al. (paper 000), for joint i = 1 … n−1:

    α_h,i,r(t) = A_h sin(ω_h t + (i−1) δ_h) + ψ_h
    α_v,i,r(t) = A_v sin(ω_v t + (i−1) δ_v + δ_0) + ψ_v

with the soft start of Sec. VIII-E: each axis of each joint is held at 0 until its reference first satisfies
|α_r| ≤ 3°, then follows it. The release instant is computed in closed form, so the gait stays a pure function of
time: sampling it at 10 Hz or at 4 kHz gives the same values at the same instants.

A reactive gait (e.g. the obstacle-aided controller) implements the same :class:`Gait` protocol and may use the
feedback it is handed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.joints import Gait as Gait  # the protocol lives beside the references; gaits import it here
from aiko.robots.aiko.joints import JointFeedback, JointReferences


@dataclass(frozen=True)
class SerpenoidParams:
    """Parameters of eq. 70–71 in SI units. ``planar`` fixes the vertical wave to zero (planar robots)."""

    amplitude_h_rad: float
    omega_h_rad_s: float
    delta_h_rad: float
    offset_h_rad: float = 0.0
    amplitude_v_rad: float = 0.0
    omega_v_rad_s: float = 0.0
    delta_v_rad: float = 0.0
    delta_0_rad: float = 0.0
    offset_v_rad: float = 0.0
    soft_start: bool = False
    soft_start_threshold_rad: float = math.radians(3.0)
    planar: bool = False


def _deg(x: float) -> float:
    return math.radians(x)


# The paper's three runs (Sec. VIII-B, VIII-D, VIII-E; parameters and errata: docs/snake3d.md).
PRESETS: dict[str, SerpenoidParams] = {
    "lateral_undulation_orthotropic": SerpenoidParams(_deg(30), _deg(80), _deg(-50)),
    "lateral_undulation_isotropic": SerpenoidParams(_deg(40), _deg(80), _deg(-50)),
    "sidewinding": SerpenoidParams(
        _deg(30), _deg(80), _deg(-50), 0.0, _deg(10), _deg(80), _deg(-50), _deg(90), 0.0, soft_start=True
    ),
}


def first_entry_time(amplitude: float, omega: float, phase: float, offset: float, threshold: float) -> float:
    """First t ≥ 0 with |amplitude·sin(omega·t + phase) + offset| ≤ threshold (``inf`` if never).

    Outside the band at t = 0, the reference enters it by crossing one of the two band edges, so the answer is the
    earliest crossing of sin(x) = (±threshold − offset)/amplitude after x = phase.
    """
    value0 = amplitude * math.sin(phase) + offset
    if abs(value0) <= threshold:
        return 0.0
    if amplitude == 0.0 or omega <= 0.0:
        return math.inf
    best = math.inf
    for edge in (threshold, -threshold):
        s = (edge - offset) / amplitude
        if abs(s) > 1.0:
            continue
        base = math.asin(s)
        for root in (base, math.pi - base):
            # smallest root + 2πk strictly after `phase`
            k = math.ceil((phase - root) / (2 * math.pi))
            x = root + 2 * math.pi * k
            if x <= phase:
                x += 2 * math.pi
            best = min(best, (x - phase) / omega)
    return best


class SerpenoidGait:
    """Eq. 70–71 with optional soft start; a pure function of time."""

    def __init__(self, params: SerpenoidParams, n_joints: int) -> None:
        if n_joints < 1:
            raise ConfigError(f"a gait needs at least one joint, got n_joints={n_joints}")
        self.params = params
        self.n_joints = n_joints
        index = np.arange(n_joints, dtype=float)
        p = params
        self._phase_h = index * p.delta_h_rad
        self._phase_v = index * p.delta_v_rad + p.delta_0_rad
        self.release_h_s = np.zeros(n_joints)
        self.release_v_s = np.zeros(n_joints)
        if p.soft_start:
            thr = p.soft_start_threshold_rad
            self.release_h_s = np.array(
                [first_entry_time(p.amplitude_h_rad, p.omega_h_rad_s, ph, p.offset_h_rad, thr) for ph in self._phase_h]
            )
            if not p.planar:
                self.release_v_s = np.array(
                    [
                        first_entry_time(p.amplitude_v_rad, p.omega_v_rad_s, ph, p.offset_v_rad, thr)
                        for ph in self._phase_v
                    ]
                )
            stuck = np.flatnonzero(~np.isfinite(np.concatenate([self.release_h_s, self.release_v_s])))
            if stuck.size:
                axis = "h" if stuck[0] < n_joints else "v"
                raise ConfigError(
                    f"soft start would hold joint {stuck[0] % n_joints + 1} ({axis} axis) at 0 forever: its "
                    f"reference never comes within {math.degrees(thr):.1f} deg of zero; reduce the offset"
                )

    def raw_references(self, t_s: float) -> JointReferences:
        """Eq. 70–71 without the soft start."""
        p = self.params
        arg_h = p.omega_h_rad_s * t_s + self._phase_h
        angle_h = p.amplitude_h_rad * np.sin(arg_h) + p.offset_h_rad
        rate_h = p.amplitude_h_rad * p.omega_h_rad_s * np.cos(arg_h)
        if p.planar:
            zeros = np.zeros(self.n_joints)
            return JointReferences(t_s, angle_h, zeros, rate_h, zeros.copy())
        arg_v = p.omega_v_rad_s * t_s + self._phase_v
        angle_v = p.amplitude_v_rad * np.sin(arg_v) + p.offset_v_rad
        rate_v = p.amplitude_v_rad * p.omega_v_rad_s * np.cos(arg_v)
        return JointReferences(t_s, angle_h, angle_v, rate_h, rate_v)

    def references(self, t_s: float, feedback: JointFeedback | None = None) -> JointReferences:
        raw = self.raw_references(t_s)
        if not self.params.soft_start:
            return raw
        held_h = t_s < self.release_h_s
        held_v = t_s < self.release_v_s
        return JointReferences(
            t_s,
            np.where(held_h, 0.0, raw.angle_h_rad),
            np.where(held_v, 0.0, raw.angle_v_rad),
            np.where(held_h, 0.0, raw.rate_h_rad_s),
            np.where(held_v, 0.0, raw.rate_v_rad_s),
        )

    def initial_posture(self) -> JointReferences:
        return self.references(0.0)

    def peak_rate_rad_s(self) -> float:
        """The fastest any joint of this gait moves (amplitude x angular frequency, either axis)."""
        p = self.params
        return max(abs(p.amplitude_h_rad * p.omega_h_rad_s), abs(p.amplitude_v_rad * p.omega_v_rad_s))

    def with_turn(self, offset_h_rad: float) -> SerpenoidGait:
        """The same gait steering through ψ_h (a constant offset on every horizontal joint bends the path)."""
        return SerpenoidGait(replace(self.params, offset_h_rad=offset_h_rad), self.n_joints)


MAX_OMEGA_RAD_S = math.radians(3600.0)  # 10 Hz


def validate_serpenoid(params: SerpenoidParams, robot: RobotDescription, where: str = "gait") -> None:
    """Reject gaits the robot cannot follow: amplitudes beyond the joint limits, bad frequencies, wrong axes."""
    p = params
    if not math.isfinite(p.omega_h_rad_s) or p.omega_h_rad_s <= 0:
        raise ConfigError(
            f"{where}.frequency_h_deg_s: must be finite and positive, got {math.degrees(p.omega_h_rad_s)}"
        )
    if p.amplitude_v_rad != 0.0 and (not math.isfinite(p.omega_v_rad_s) or p.omega_v_rad_s <= 0):
        raise ConfigError(
            f"{where}.frequency_v_deg_s: must be finite and positive when amplitude_v_deg is not 0, "
            f"got {math.degrees(p.omega_v_rad_s)}"
        )
    for name, omega in (("frequency_h_deg_s", p.omega_h_rad_s), ("frequency_v_deg_s", p.omega_v_rad_s)):
        if abs(omega) > MAX_OMEGA_RAD_S:
            raise ConfigError(
                f"{where}.{name}: {math.degrees(omega):.6g} deg/s is out of range (0, "
                f"{math.degrees(MAX_OMEGA_RAD_S):g}] (a 10 Hz wave is already beyond what joint modules follow)"
            )
    for name, angle in (
        ("phase_step_h_deg", p.delta_h_rad),
        ("phase_step_v_deg", p.delta_v_rad),
        ("phase_v0_deg", p.delta_0_rad),
    ):
        if not math.isfinite(angle) or abs(angle) > 2 * math.pi + 1e-12:
            raise ConfigError(f"{where}.{name}: {math.degrees(angle):.6g} deg is out of range [-360, 360]")
    for axis, amplitude, omega in (
        ("h", p.amplitude_h_rad, p.omega_h_rad_s),
        ("v", p.amplitude_v_rad, p.omega_v_rad_s),
    ):
        peak = abs(amplitude) * abs(omega)  # the fastest a sine of this amplitude and frequency moves
        if peak > robot.max_joint_rate_rad_s * (1 + 1e-9):
            raise ConfigError(
                f"{where}: amplitude_{axis}_deg x frequency_{axis}_deg_s asks the joints for "
                f"{math.degrees(peak):.4g} deg/s, more than the {math.degrees(robot.max_joint_rate_rad_s):.4g} deg/s "
                f"the joint modules of {robot.name} track (joints.max_rate_deg_s); lower the amplitude or frequency"
            )
    reach_h = abs(p.amplitude_h_rad) + abs(p.offset_h_rad)
    if reach_h > robot.limit_h_rad + 1e-12:
        raise ConfigError(
            f"{where}: |amplitude_h_deg| + |offset_h_deg| = {math.degrees(reach_h):.3g} deg exceeds the "
            f"horizontal joint limit {math.degrees(robot.limit_h_rad):.3g} deg of {robot.name}"
        )
    reach_v = abs(p.amplitude_v_rad) + abs(p.offset_v_rad)
    if p.planar and reach_v > 0:
        raise ConfigError(f"{where}: a planar gait has no vertical wave; remove amplitude_v_deg and offset_v_deg")
    if not robot.has_vertical_axis and not p.planar:
        raise ConfigError(f"{where}.planar: {robot.name} has yaw joints only; set planar = true")
    if reach_v > robot.limit_v_rad + 1e-12:
        raise ConfigError(
            f"{where}: |amplitude_v_deg| + |offset_v_deg| = {math.degrees(reach_v):.3g} deg exceeds the "
            f"vertical joint limit {math.degrees(robot.limit_v_rad):.3g} deg of {robot.name}"
        )


def serpenoid_from_table(table: Table, robot: RobotDescription) -> SerpenoidGait:
    """Build a serpenoid gait from a ``[gait]`` table: a preset, optionally with any parameter overridden."""
    preset_name = table.string("preset", None, choices=sorted(PRESETS))
    base = PRESETS[preset_name] if preset_name else None

    def angle(key: str, attr: str, required: bool = False) -> float:
        default = math.degrees(getattr(base, attr)) if base else (None if required else 0.0)
        value = table.number(key, default) if default is not None else table.number(key)
        return math.radians(value)

    params = SerpenoidParams(
        amplitude_h_rad=angle("amplitude_h_deg", "amplitude_h_rad", True),
        omega_h_rad_s=angle("frequency_h_deg_s", "omega_h_rad_s", True),
        delta_h_rad=angle("phase_step_h_deg", "delta_h_rad", True),
        offset_h_rad=angle("offset_h_deg", "offset_h_rad"),
        amplitude_v_rad=angle("amplitude_v_deg", "amplitude_v_rad"),
        omega_v_rad_s=angle("frequency_v_deg_s", "omega_v_rad_s"),
        delta_v_rad=angle("phase_step_v_deg", "delta_v_rad"),
        delta_0_rad=angle("phase_v0_deg", "delta_0_rad"),
        offset_v_rad=angle("offset_v_deg", "offset_v_rad"),
        soft_start=table.boolean("soft_start", base.soft_start if base else False),
        soft_start_threshold_rad=math.radians(table.number("soft_start_threshold_deg", 3.0, min=0.0, max=90.0)),
        planar=table.boolean("planar", not robot.has_vertical_axis),
    )
    validate_serpenoid(params, robot, table.path)
    return SerpenoidGait(params, robot.n_joints)


GaitFactory = Callable[[Table, RobotDescription], Gait]
_GAITS: dict[str, GaitFactory] = {"serpenoid": serpenoid_from_table}


def register_gait(kind: str, factory: GaitFactory) -> None:
    """Make a gait kind available to experiment files (``[gait] kind = "…"``)."""
    _GAITS[kind] = factory


def gait_from_table(table: Table, robot: RobotDescription) -> Gait:
    """Build and validate the gait an experiment's ``[gait]`` table describes; rejects unknown keys."""
    _load_plugin_gaits()
    kind = table.string("kind", "serpenoid", choices=sorted(_GAITS))
    gait = _GAITS[kind](table, robot)
    table.finish()
    if gait.n_joints != robot.n_joints:
        raise ConfigError(f"{table.path}: the gait drives {gait.n_joints} joints but {robot.name} has {robot.n_joints}")
    return gait


def _load_plugin_gaits() -> None:
    """Import every module of ``aiko.robots.aiko.gaits`` so reactive gaits register themselves."""
    import importlib
    import pkgutil

    try:
        package = importlib.import_module("aiko.robots.aiko.gaits")
    except ModuleNotFoundError:
        return
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"aiko.robots.aiko.gaits.{info.name}")
