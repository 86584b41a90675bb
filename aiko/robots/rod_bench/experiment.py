"""Rod experiment files (`experiments/rod/*.toml`) -> `sim.cosserat.scenario.Scenario`.

Every table is validated strictly (unknown keys are named with the allowed ones; out-of-range values name the
range). The file format is documented in docs/cosserat.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.config import Table, read_toml
from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.settings import BENCH_SECTIONS
from sim.cosserat import (
    ContactSettings,
    Core,
    CurvedTube,
    Cylinder,
    Material,
    NewtonSettings,
    Plane,
    PointConstraint,
    RodDescription,
    RodParameterError,
    Smoothing,
    build_model,
    initial_state,
)
from sim.cosserat.scenario import BaseMotion, Scenario
from sim.cosserat.slack import SMOOTHINGS
from sim.lie import exp_so3


def load_rod_experiment(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read and validate a rod experiment; `overrides` maps dotted keys (``contact.friction_coefficient``)."""
    path = Path(path)
    data, _ = read_toml(path, "rod experiment file", overrides)
    try:
        return scenario_from_dict(data, str(path))
    except RodParameterError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _material(t: Table) -> Material:
    return Material(
        t.number("young_modulus_pa", min=0, min_exclusive=True),
        t.number("poisson_ratio", 0.45, min=-0.99, max=0.4999),
        t.number("density_kg_m3", min=0, min_exclusive=True),
    )


def _rod(t: Table) -> RodDescription:
    length = t.number("length_m", min=0, min_exclusive=True)
    r0 = t.number("radius_base_m", min=0, min_exclusive=True)
    r1 = t.number("radius_tip_m", r0, min=0, min_exclusive=True)
    damping = t.number("damping_time_s", 0.0, min=0)
    material = _material(t)
    core = None
    if "core" in t:
        c = t.table("core")
        core = Core(c.number("radius_m", min=0, min_exclusive=True), _material(c))
        c.finish()
    t.finish()
    return RodDescription(length, r0, r1, material, core, damping)


def _or_inf(value: float | None) -> float:
    return math.inf if value is None else value


def _obstacle(raw: Any, i: int, source: str):
    t = Table(raw, f"obstacle[{i}]", source)
    kind = t.string("type", choices=("plane", "cylinder", "tube"))
    if kind == "plane":
        ob = Plane(
            tuple(t.number_list("point_m", [0.0, 0.0, 0.0], length=3)),
            tuple(t.number_list("normal", [0.0, 0.0, 1.0], length=3)),
        )
    elif kind == "cylinder":
        ob = Cylinder(
            tuple(t.number_list("center_m", length=3)),
            tuple(t.number_list("axis", [0.0, 1.0, 0.0], length=3)),
            t.number("radius_m", min=0, min_exclusive=True),
            _or_inf(t.number("half_length_m", None, min=0, min_exclusive=True)),
        )
    else:
        ob = CurvedTube(
            t.number("inner_radius_m", min=0, min_exclusive=True),
            t.number("straight_length_m", min=0, min_exclusive=True),
            t.number("bend_radius_m", min=0, min_exclusive=True),
            math.radians(t.number("bend_angle_deg", 90.0, min=0, min_exclusive=True, max=180.0)),
            t.number("exit_length_m", 0.05, min=0),
            t.number("mouth_radius_m", 1e-3, min=0, min_exclusive=True),
        )
    t.finish()
    return ob


def _constraint(raw: Any, i: int, source: str) -> PointConstraint:
    t = Table(raw, f"constraint[{i}]", source)
    kind = t.string("type", choices=("position", "fixed"))
    x = t.number("x_m", min=0, min_exclusive=True)
    position = tuple(t.number_list("position_m", length=3))
    rotation_deg = t.number_list("rotation_deg", [0.0, 0.0, 0.0], length=3)
    t.finish()
    if kind == "position" and any(rotation_deg):
        raise ConfigError(f'{source}: constraint[{i}].rotation_deg applies only to type = "fixed"')
    return PointConstraint(x, kind, position, exp_so3(np.radians(rotation_deg)))


def scenario_from_dict(data: Mapping[str, Any], source: str = "") -> Scenario:
    """A rod experiment from its parsed file: one reader per table, each strict about its keys."""
    root = Table(data, "", source)
    for section in BENCH_SECTIONS:  # the bench's tables ([bench], [ur3]): validated by bench_experiment, not here
        root.raw(section, None)
    name = _name(root.table("experiment", {}), source)
    rod = _rod(root.table("rod"))
    m = root.table("model", {})
    n = m.integer("n_sections", 20, min=1, max=200)
    base = m.string("base", "clamped", choices=("clamped", "free"))
    gravity = m.number_list("gravity_m_s2", [0.0, 0.0, -9.81], length=3)
    strain = m.number_list("reference_strain", [0.0, 0.0, 0.0, 1.0, 0.0, 0.0], length=6)
    tip_force = m.number_list("tip_force_n", [0.0, 0.0, 0.0], length=3)
    m.finish()
    contact = _contact(root, n, source)
    constraints_raw = root.raw("constraint", [])
    if not isinstance(constraints_raw, list):
        raise ConfigError(f"{source}: [[constraint]] must be an array of tables")
    constraints = tuple(_constraint(raw, i, source) for i, raw in enumerate(constraints_raw))
    model = build_model(
        rod,
        n,
        base=base,
        gravity_m_s2=tuple(gravity),
        contact=contact,
        reference_strain=np.array(strain),
        tip_force_n=tuple(tip_force),
        constraints=constraints,
    )
    state = _initial(root.table("initial", {}), model)
    motion = _base_motion(root.table("base_motion"), source) if "base_motion" in root else None
    run = root.table("run", {})
    dt = run.number("dt_s", 0.005, min=0, min_exclusive=True, max=1.0)
    duration = run.number("duration_s", 1.0, min=0, min_exclusive=True)
    release = run.number("release_at_s", None, min=0)
    tolerance = run.number("newton_tolerance", 1e-8, min=0, min_exclusive=True, max=1e-2)
    refresh_ratio = run.number("newton_refresh_ratio", NewtonSettings.refresh_ratio, min=0, min_exclusive=True, max=1)
    max_halvings = run.integer("max_halvings", 5, min=0, max=12)
    run.number("log_rate_hz", 50.0, min=0, min_exclusive=True)
    run.finish()
    root.finish()
    if release is not None and base != "clamped" and not constraints:
        raise ConfigError(f'{source}: run.release_at_s needs model.base = "clamped" or a [[constraint]] to release')
    return Scenario(
        name,
        model,
        state,
        dt,
        duration,
        motion,
        release,
        NewtonSettings(tolerance=tolerance, refresh_ratio=refresh_ratio),
        max_halvings,
    )


def _name(exp: Table, source: str) -> str:
    name = exp.string("name", Path(source).stem if source else "rod")
    exp.string("description", "")
    exp.finish()
    return name


def _contact(root: Table, n_sections: int, source: str) -> ContactSettings | None:
    """``[contact]`` and the ``[[obstacle]]`` list (either implies the other)."""
    obstacles_raw = root.raw("obstacle", [])
    if not isinstance(obstacles_raw, list):
        raise ConfigError(f"{source}: [[obstacle]] must be an array of tables")
    if "contact" not in root and not obstacles_raw:
        return None
    c = root.table("contact", {})
    mu = c.number("friction_coefficient", 0.0, min=0)
    m_sections = c.integer("m_sections", n_sections, min=1, max=200)
    smoothing = Smoothing(
        c.string("smoothing", "sigmoid", choices=SMOOTHINGS),
        c.number("sharpness", 50.0, min=0, min_exclusive=True),
    )
    # Upper bounds: a scale beyond these makes the smoothed laws so wide that contact silently stops acting
    # (the sigmoid lets a node penetrate 0.28·σ_δ/c and creep at 0.28·σ_v·|u_t|/c).
    force_scale = c.number("force_scale_n", None, min=0, max=1e6, min_exclusive=True)
    gap_scale = c.number("gap_scale_m", None, min=0, max=1.0, min_exclusive=True)
    slip_scale = c.number("slip_scale_m_s", None, min=0, max=100.0, min_exclusive=True)
    c.finish()
    obstacles = tuple(_obstacle(raw, i, source) for i, raw in enumerate(obstacles_raw))
    if not obstacles:
        raise ConfigError(f"{source}: [contact] needs at least one [[obstacle]]")
    return ContactSettings(
        obstacles,
        friction_coefficient=mu,
        m_sections=m_sections,
        smoothing=smoothing,
        force_scale_n=force_scale,
        gap_scale_m=gap_scale,
        slip_scale_m_s=slip_scale,
    )


def _initial(ini: Table, model: Any):
    rot_deg = ini.number_list("base_rotation_deg", [0.0, 0.0, 0.0], length=3)
    pos = ini.number_list("base_position_m", [0.0, 0.0, 0.0], length=3)
    vel = ini.number_list("base_velocity", [0.0] * 6, length=6)
    touching = ini.boolean("start_in_contact", False)
    ini.finish()
    state = initial_state(model, tuple(np.radians(rot_deg)), tuple(pos), np.array(vel))
    if touching:
        state.slack[:, 0] = 1.0
    return state


def _base_motion(bm: Table, source: str) -> BaseMotion:
    times = bm.number_list("times_s")
    positions = bm.raw("positions_m")
    rotations = bm.raw("rotations_deg", None)
    bm.finish()
    try:
        return BaseMotion(
            tuple(times),
            tuple(tuple(float(x) for x in p) for p in positions),
            None if rotations is None else tuple(tuple(math.radians(x) for x in r) for r in rotations),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: base_motion: {exc}") from None


def log_rate_hz(path: str | Path) -> float:
    data, _ = read_toml(path, "rod experiment file")
    return float(data.get("run", {}).get("log_rate_hz", 50.0))
