"""Experiment files: one TOML file describes a run (robot, gait, timing, backend, simulator, motion capture, log).

Validation is strict and happens at load time, before anything moves: an unknown section or key names itself and
the allowed ones; an out-of-range value names the range. Sections owned by plug-ins (``sim``, ``mocap``, ``can``,
``hil``, …) register a validator with :func:`register_section`, so a typo there is caught as early as in ``gait``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiko.errors import ConfigError
from aiko.gait import Gait, gait_from_table
from aiko.robot import RobotDescription, load_robot, robot_from_table
from aiko.validation import Table, read_toml

SectionValidator = Callable[[Table, "Experiment"], None]
_SECTION_VALIDATORS: dict[str, SectionValidator] = {}
CORE_SECTIONS = ("description", "robot", "gait", "run", "backend", "log")


def register_section(name: str, validator: SectionValidator) -> None:
    """Let a plug-in own a top-level table. ``validator`` must consume every key it allows and call ``finish``."""
    _SECTION_VALIDATORS[name] = validator


@dataclass(frozen=True)
class RunSettings:
    duration_s: float
    reference_rate_hz: float
    feedback_rate_hz: float
    # keep running when a module reports ESTOP, WATCHDOG or a fault (default: such a run stops at once)
    allow_degraded: bool = False


@dataclass(frozen=True)
class LogSettings:
    directory: str
    flush_interval_s: float


@dataclass
class Experiment:
    """A validated experiment. Plug-in sections stay as raw tables; read them with :meth:`section`."""

    path: Path
    name: str
    description: str
    robot: RobotDescription
    gait: Gait
    run: RunSettings
    log: LogSettings
    default_backend: str
    backend_tables: dict[str, dict[str, Any]]
    tables: dict[str, dict[str, Any]]
    text: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> Table:
        """A fresh strict view of a plug-in section (empty if the file has none)."""
        return Table(self.tables.get(name, {}), name, str(self.path))

    def backend_section(self, backend: str) -> Table:
        return Table(self.backend_tables.get(backend, {}), f"backend.{backend}", str(self.path))


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a dotted key and a TOML value (bare words are taken as strings)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. sim.mu_transversal=0.2")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return key, parsed


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {dotted}: {part} is not a table")
            node = child
        node[parts[-1]] = value


def load_experiment(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Experiment:
    """Read, override and validate an experiment file."""
    path = Path(path)
    data, text = read_toml(path, "experiment file")
    apply_overrides(data, overrides or {})
    return experiment_from_dict(data, path, text, dict(overrides or {}))


def experiment_from_dict(
    data: dict[str, Any], path: Path, text: str = "", overrides: dict[str, Any] | None = None
) -> Experiment:
    _load_plugins()
    source = str(path)
    allowed = sorted({*CORE_SECTIONS, *_SECTION_VALIDATORS})
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{source}: {key}: unknown section; allowed sections: {', '.join(allowed)}")
    top = Table(data, "", source)
    description = top.string("description", "")
    robot = _load_robot_entry(top.raw("robot", None), path)
    gait = gait_from_table(top.table("gait"), robot)

    run_table = top.table("run")
    run = RunSettings(
        duration_s=run_table.number("duration_s", 15.0, min=0.0, min_exclusive=True, max=86400.0),
        reference_rate_hz=run_table.number("reference_rate_hz", 10.0, min=0.0, min_exclusive=True, max=1000.0),
        feedback_rate_hz=run_table.number("feedback_rate_hz", 100.0, min=0.0, min_exclusive=True, max=10000.0),
        allow_degraded=run_table.boolean("allow_degraded", False),
    )
    run_table.finish()

    log_table = top.table("log", {})
    log = LogSettings(
        directory=log_table.string("directory", "runs"),
        flush_interval_s=log_table.number("flush_interval_s", 1.0, min=0.01, max=1.0),
    )
    log_table.finish()

    from aiko.backends import backend_names, validate_backend_table

    backend_table = top.table("backend", {})
    names = backend_names()
    default_backend = backend_table.string("default", "kinematic", choices=names)
    backend_tables: dict[str, dict[str, Any]] = {}
    for name in backend_table.keys():
        if name == "default":
            continue
        if name not in names:
            raise ConfigError(f"{source}: backend.{name}: unknown backend; known backends: {', '.join(names)}")
        backend_tables[name] = backend_table.raw(name)
        if not isinstance(backend_tables[name], dict):
            raise ConfigError(f"{source}: backend.{name}: must be a table")
        validate_backend_table(name, Table(backend_tables[name], f"backend.{name}", source))
    backend_table.finish()

    plugin_tables = {k: v for k, v in data.items() if k in _SECTION_VALIDATORS}
    for key in plugin_tables:
        top.raw(key)
    top.finish()

    experiment = Experiment(
        path=path,
        name=path.stem,
        description=description,
        robot=robot,
        gait=gait,
        run=run,
        log=log,
        default_backend=default_backend,
        backend_tables=backend_tables,
        tables=plugin_tables,
        text=text,
        overrides=overrides or {},
    )
    for key in plugin_tables:
        _SECTION_VALIDATORS[key](experiment.section(key), experiment)
    return experiment


def _load_robot_entry(entry: Any, experiment_path: Path) -> RobotDescription:
    if entry is None:
        raise ConfigError(f'{experiment_path}: robot: missing; give a robot file (robot = "robots/aiko.toml")')
    if isinstance(entry, str):
        if not entry.strip():
            raise ConfigError(
                f'{experiment_path}: robot: empty file name; give a robot file (robot = "robots/aiko.toml")'
            )
        robot_path = Path(entry)
        if not robot_path.is_absolute():
            robot_path = experiment_path.parent / robot_path
            if not robot_path.exists():
                raise ConfigError(
                    f"{experiment_path}: robot = {entry!r}: robot description not found: {robot_path} "
                    f"(a relative path is read from the experiment file's folder, {experiment_path.parent or '.'})"
                )
        return load_robot(robot_path)
    if isinstance(entry, dict):
        return robot_from_table(Table(entry, "robot", str(experiment_path)))
    raise ConfigError(f"{experiment_path}: robot: expected a file path or a table, got {entry!r}")


def _load_plugins() -> None:
    """Backends and plug-in sections register themselves on import."""
    from aiko.backends import backend_names

    backend_names()  # imports every backend module, which registers its sections ([sim], [hil], ...)
    import aiko.mocap.config  # noqa: F401  (registers [mocap])
