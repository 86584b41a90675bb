"""The two plug-in registries of an experiment file: its sections (``[sim]``, ``[can]``, ``[mocap]``, …) and its
backends. They import nothing: a backend or section module registers itself when it is imported, and whoever
composes the program (the CLI, a robot's ``plugins`` module) imports the plug-ins. python-can's interface registry
is the model.

A section is parsed once, when the experiment file is loaded, into a typed settings object; backends receive that
object (``RunContext.settings``), never the raw table, so a key is read and range-checked in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiko.core.config import Table
from aiko.core.errors import ConfigError

SectionParser = Callable[[Table, Any], Any]
"""``parse(table, experiment) -> settings``: must consume every key it allows and call ``table.finish()``."""


@dataclass(frozen=True)
class SectionInfo:
    name: str
    parse: SectionParser


_SECTIONS: dict[str, SectionInfo] = {}


def register_section(name: str, parse: SectionParser) -> None:
    """Let a plug-in own a top-level table of the experiment file; an absent table is parsed as ``{}`` (defaults)."""
    _SECTIONS[name] = SectionInfo(name, parse)


def section_names() -> list[str]:
    return sorted(_SECTIONS)


def section_parser(name: str) -> SectionParser:
    return _SECTIONS[name].parse


BackendValidator = Callable[[Table], None]


@dataclass(frozen=True)
class BackendInfo:
    """A backend by name. ``wall_clock_only``: it drives real hardware, so its run is always on the wall clock.
    ``capabilities``: what else callers may ask of it (e.g. ``can_bus``: CAN-log and priority flags apply). The spine
    and the CLI ask these, never the backend's name."""

    name: str
    factory: Callable[[], Any]
    help: str
    validate: BackendValidator | None = None
    wall_clock_only: bool = False
    capabilities: frozenset[str] = frozenset()


_BACKENDS: dict[str, BackendInfo] = {}


def register_backend(
    name: str,
    factory: Callable[[], Any],
    help: str,
    validate: BackendValidator | None = None,
    *,
    wall_clock_only: bool = False,
    capabilities: frozenset[str] | set[str] = frozenset(),
) -> None:
    """``validate`` parses the experiment's ``[backend.<name>]`` table at load time (and must call ``finish``); what
    it returns reaches the backend as ``RunContext.backend_settings``."""
    _BACKENDS[name] = BackendInfo(name, factory, help, validate, wall_clock_only, frozenset(capabilities))


def unregister_backend(name: str) -> None:
    """For tests that register a backend of their own."""
    _BACKENDS.pop(name, None)


def backend_info(name: str) -> BackendInfo:
    if name not in _BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; known backends: {', '.join(sorted(_BACKENDS))}")
    return _BACKENDS[name]


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def backend_help() -> dict[str, str]:
    return {name: info.help for name, info in sorted(_BACKENDS.items())}
