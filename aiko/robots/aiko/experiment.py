"""Experiment files: one TOML file describes a run (robot, gait, timing, backend, simulator, motion capture, log).

Validation is strict and happens at load time, before anything moves: an unknown section or key names itself and
the allowed ones; an out-of-range value names the range. Sections owned by plug-ins (``sim``, ``mocap``, ``can``,
``hil``, …) register a parser in :mod:`aiko.core.registry`; each is parsed here, once, into its typed settings
(``Experiment.settings(name)``), so a typo there is caught as early as in ``gait`` and no backend reads a raw table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiko.core import registry
from aiko.core.clock import Clock
from aiko.core.config import Table, apply_overrides, parse_toml, read_toml
from aiko.core.errors import ConfigError
from aiko.core.interfaces import Recorder
from aiko.robots.aiko.description import RobotDescription, load_robot, robot_from_table
from aiko.robots.aiko.gait import gait_from_table
from aiko.robots.aiko.joints import Gait, RunContext
from aiko.robots.aiko.plugins import backend_names, load_plugins, validate_backend_table
from aiko.robots.aiko.run_settings import RunSettings

__all__ = ["Experiment", "LogSettings", "RunSettings", "experiment_from_dict", "load_experiment", "run_context"]

CORE_SECTIONS = ("description", "robot", "gait", "run", "backend", "log")


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
    backend_settings: dict[str, Any] = field(default_factory=dict)
    _settings: dict[str, Any] = field(default_factory=dict, repr=False)

    def settings(self, name: str) -> Any:
        """The typed settings of a plug-in section, parsed once: at load for a table the file has, on first use
        (its defaults) for one it has not — a default that only some backends need must not fail the others."""
        if name not in self._settings:
            self._settings[name] = self._parse(name)
        return self._settings[name]

    def _parse(self, name: str) -> Any:
        return registry.section_parser(name)(Table(self.tables.get(name, {}), name, str(self.path)), self)


def run_context(
    experiment: Experiment,
    recorder: Recorder,
    clock: Clock,
    *,
    duration_s: float | None = None,
    realtime: bool = False,
) -> RunContext:
    """What a backend of this experiment is configured with (:class:`aiko.robots.aiko.joints.RunContext`)."""
    return RunContext(
        robot=experiment.robot,
        run=experiment.run,
        source=str(experiment.path),
        recorder=recorder,
        clock=clock,
        gait=experiment.gait,
        duration_s=experiment.run.duration_s if duration_s is None else duration_s,
        realtime=realtime,
        sections=experiment.settings,
        backends=dict(experiment.backend_settings),
    )


def load_experiment(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Experiment:
    """Read, override and validate an experiment file."""
    path = Path(path)
    data, text = read_toml(path, "experiment file", overrides)
    return experiment_from_dict(data, path, text, dict(overrides or {}))


def experiment_from_dict(
    data: dict[str, Any], path: Path, text: str = "", overrides: dict[str, Any] | None = None
) -> Experiment:
    load_plugins()
    source = str(path)
    allowed = sorted({*CORE_SECTIONS, *registry.section_names()})
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
    check_duration(run.duration_s, run.reference_rate_hz, f"{source}: run.duration_s")

    log_table = top.table("log", {})
    log = LogSettings(
        directory=log_table.string("directory", "runs"),
        flush_interval_s=log_table.number("flush_interval_s", 1.0, min=0.01, max=1.0),
    )
    log_table.finish()

    backend_table = top.table("backend", {})
    names = backend_names()
    default_backend = backend_table.string("default", "kinematic", choices=names)
    backend_tables: dict[str, dict[str, Any]] = {}
    backend_settings: dict[str, Any] = {}
    for name in backend_table.keys():
        if name == "default":
            continue
        if name not in names:
            raise ConfigError(f"{source}: backend.{name}: unknown backend; known backends: {', '.join(names)}")
        backend_tables[name] = backend_table.raw(name)
        if not isinstance(backend_tables[name], dict):
            raise ConfigError(f"{source}: backend.{name}: must be a table")
        backend_settings[name] = validate_backend_table(name, Table(backend_tables[name], f"backend.{name}", source))
    backend_table.finish()

    plugin_tables = {k: v for k, v in data.items() if k in registry.section_names()}
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
        backend_settings=backend_settings,
    )
    for key in plugin_tables:
        experiment.settings(key)  # parsed (and so validated) now, before anything moves
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


def check_duration(duration_s: float, reference_rate_hz: float, what: str) -> None:
    """A run shorter than one reference period is a config error: it would enable the modules to send one
    reference (t = 0) and disable them again (``duration_s = 1e-300`` did exactly that)."""
    period_s = 1.0 / reference_rate_hz
    if duration_s < period_s:
        raise ConfigError(
            f"{what} = {duration_s:g} s is shorter than one reference period ({period_s:g} s at "
            f"run.reference_rate_hz = {reference_rate_hz:g}); a run needs at least one"
        )


class LoggedExperimentError(ConfigError):
    """A log whose metadata holds no usable experiment (not written by ``aiko run``, or damaged)."""


def experiment_from_log(reader: Any, overrides: Mapping[str, Any] | None = None) -> Experiment:
    """The experiment as it ran (file text + robot + its overrides), with ``overrides`` applied on top."""
    meta = reader.run_metadata
    text = meta.get("experiment_toml")
    if not isinstance(text, str) or not text:
        raise LoggedExperimentError(f"{reader.path} has no experiment in its metadata (was it written by `aiko run`?)")
    path = Path(str(meta.get("experiment_path", "logged_experiment.toml")))
    try:
        data = parse_toml(text, f"{reader.path}: logged experiment")
        robot_text = meta.get("robot_toml")
        if isinstance(robot_text, str) and robot_text:
            data["robot"] = parse_toml(robot_text, f"{reader.path}: logged robot description")
    except ConfigError as exc:
        raise LoggedExperimentError(str(exc)) from None
    merged = {**dict(meta.get("overrides") or {}), **dict(overrides or {})}
    apply_overrides(data, merged)
    return experiment_from_dict(data, path, text, merged)
