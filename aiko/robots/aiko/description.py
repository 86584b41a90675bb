"""Robot descriptions: the physical facts about a snake robot that every backend shares.

A description is loaded from TOML (``experiments/robots/aiko.toml``) and validated strictly. Any n-link snake can be
described: links are identical cylinders (the papers' uniform-link assumption) joined by ``cardan`` joints (two axes,
as on Aiko) or ``yaw`` joints (one axis, for planar snakes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aiko.core.config import Table, read_toml
from aiko.core.errors import ConfigError

JOINT_TYPES = ("cardan", "yaw")


@dataclass(frozen=True)
class ModuleSettings:
    """The joint modules' own settings as this robot's modules are tuned: the PD gains of each axis (the firmware's
    controller, volts per radian of error) and the rate of their feedback. A run writes them to every module and
    reads each back before it enables (aiko.devices.can.parameters): what the description says is what drives.
    Defaults: the firmware's (400 V/rad with the 300:1, 7.9 Ω drive: ~8 Hz, ζ ≈ 0.7)."""

    kp_h_v_per_rad: float = 400.0
    kd_h_v_s_per_rad: float = 6.0
    kp_v_v_per_rad: float = 400.0
    kd_v_v_s_per_rad: float = 6.0
    feedback_rate_hz: float = 100.0

    @property
    def gains_v(self) -> tuple[float, float, float, float]:
        """(KpH, KdH, KpV, KdV), the order of the protocol's parameters 1-4."""
        return (self.kp_h_v_per_rad, self.kd_h_v_s_per_rad, self.kp_v_v_per_rad, self.kd_v_v_s_per_rad)


@dataclass(frozen=True)
class RobotDescription:
    """An n-link snake with identical links. Angles in radians, lengths in metres."""

    name: str
    n_links: int
    link_length_m: float
    link_radius_m: float
    link_mass_kg: float
    contact_sphere_offset_m: float
    inertia_transverse_kg_m2: float
    inertia_axial_kg_m2: float
    joint_type: str
    limit_h_rad: float
    limit_v_rad: float
    free_play_rad: float
    yaw_pitch_offset_m: float
    can_node_ids: tuple[int, ...]
    source: str = ""
    # the fastest joint motion the modules track (their slew limit): a gait that needs more is a config error
    max_joint_rate_rad_s: float = math.radians(180.0)
    modules: ModuleSettings = field(default_factory=ModuleSettings)

    @property
    def n_joints(self) -> int:
        return self.n_links - 1

    @property
    def has_vertical_axis(self) -> bool:
        return self.joint_type == "cardan"

    @property
    def total_mass_kg(self) -> float:
        return self.n_links * self.link_mass_kg

    def clamp(self, angle_h_rad: np.ndarray, angle_v_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint angles clamped to the mechanical limits (what the driver and every backend enforce)."""
        return (
            np.clip(angle_h_rad, -self.limit_h_rad, self.limit_h_rad),
            np.clip(angle_v_rad, -self.limit_v_rad, self.limit_v_rad),
        )


def load_robot(path: str | Path) -> RobotDescription:
    """Read and validate a robot description file."""
    path = Path(path)
    data, _ = read_toml(path, "robot description")
    return robot_from_table(Table(data, "", str(path)))


def robot_from_table(table: Table) -> RobotDescription:
    """Validate a robot description given as a TOML table (a file, or a ``[robot]`` table inline)."""
    name = table.string("name")
    n_links = table.integer("n_links", min=2, max=64)
    link = table.table("link")
    length = link.number("length_m", min=0.0, min_exclusive=True, max=10.0)
    radius = link.number("radius_m", min=0.0, min_exclusive=True, max=10.0)
    mass = link.number("mass_kg", min=0.0, min_exclusive=True, max=1000.0)
    sphere = link.number(
        "contact_sphere_offset_m", length / 2 - radius if length / 2 > radius else 0.0, min=0.0, max=length / 2
    )
    cylinder_transverse = mass * (3 * radius**2 + length**2) / 12
    transverse = link.number("inertia_transverse_kg_m2", cylinder_transverse, min=0.0, min_exclusive=True)
    axial = link.number("inertia_axial_kg_m2", mass * radius**2 / 2, min=0.0, min_exclusive=True)
    link.finish()

    joints = table.table("joints", {})
    joint_type = joints.string("type", "cardan", choices=JOINT_TYPES)
    limit_h = math.radians(joints.number("limit_h_deg", 45.0, min=0.0, min_exclusive=True, max=180.0))
    limit_v = math.radians(joints.number("limit_v_deg", 45.0 if joint_type == "cardan" else 0.0, min=0.0, max=180.0))
    free_play = math.radians(joints.number("free_play_deg", 0.0, min=0.0, max=20.0))
    offset = joints.number("yaw_pitch_offset_m", 0.0, min=0.0, max=length)
    # JointReference.RateH/RateV end at 511.75 deg/s (aiko_joint.dbc): no module can be asked for more
    max_rate = math.radians(joints.number("max_rate_deg_s", 180.0, min=0.0, min_exclusive=True, max=511.75))
    default_ids = list(range(1, n_links))
    ids = joints.raw("can_node_ids", default_ids)
    joints.finish()
    if (
        not isinstance(ids, list)
        or len(ids) != n_links - 1
        or any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= 31 for i in ids)
    ):
        raise ConfigError(f"{_src(table)}joints.can_node_ids: expected {n_links - 1} integers in [1, 31], got {ids!r}")
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{_src(table)}joints.can_node_ids: node ids must be unique, got {ids!r}")
    if joint_type == "yaw" and limit_v != 0.0:
        raise ConfigError(f"{_src(table)}joints.limit_v_deg: a yaw-only robot has no vertical axis; omit it")
    modules = _module_settings(table.table("modules", {}))
    table.finish()
    return RobotDescription(
        name=name,
        n_links=n_links,
        link_length_m=length,
        link_radius_m=radius,
        link_mass_kg=mass,
        contact_sphere_offset_m=sphere,
        inertia_transverse_kg_m2=transverse,
        inertia_axial_kg_m2=axial,
        joint_type=joint_type,
        limit_h_rad=limit_h,
        limit_v_rad=limit_v,
        free_play_rad=free_play,
        yaw_pitch_offset_m=offset,
        can_node_ids=tuple(ids),
        source=table.source,
        max_joint_rate_rad_s=max_rate,
        modules=modules,
    )


def _module_settings(table: Table) -> ModuleSettings:
    """The optional ``[modules]`` table, in the ranges the firmware accepts (docs/can_protocol.md)."""
    d = ModuleSettings()
    settings = ModuleSettings(
        kp_h_v_per_rad=table.number("kp_h_v_per_rad", d.kp_h_v_per_rad, min=1.0, max=5000.0),
        kd_h_v_s_per_rad=table.number("kd_h_v_s_per_rad", d.kd_h_v_s_per_rad, min=0.0, max=500.0),
        kp_v_v_per_rad=table.number("kp_v_v_per_rad", d.kp_v_v_per_rad, min=1.0, max=5000.0),
        kd_v_v_s_per_rad=table.number("kd_v_v_s_per_rad", d.kd_v_v_s_per_rad, min=0.0, max=500.0),
        # 0 (feedback only on request) is the firmware's, not a run's: a run without feedback stops as stale
        feedback_rate_hz=table.number("feedback_rate_hz", d.feedback_rate_hz, min=0.0, min_exclusive=True, max=1000.0),
    )
    table.finish()
    return settings


def _src(table: Table) -> str:
    return f"{table.source}: " if table.source else ""
