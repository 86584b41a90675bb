"""Aiko's plug-ins, imported in one place: every backend module (each registers its backend and its experiment
sections in :mod:`aiko.core.registry`) and the ``[mocap]`` section. The experiment loader and the CLI call
:func:`load_plugins` before they look a name up; nothing registers by the side effect of another import.
"""

from __future__ import annotations

import importlib
import pkgutil

from aiko.core import registry
from aiko.core.config import Table
from aiko.robots.aiko.joints import JointInterface

_loaded = False


def load_plugins() -> None:
    """Import every plug-in once. Marked loaded only after the last import: an exception part way (a sweep's run
    time limit fires inside a cold import) must leave the next call to import the rest, not a registry that knows
    only the first backend (a sweep then failed every later run with "'kinematic' is not one of: can")."""
    global _loaded
    if _loaded:
        return
    import aiko.robots.aiko.backends as backends

    for info in pkgutil.iter_modules(backends.__path__):
        importlib.import_module(f"{backends.__name__}.{info.name}")  # registering again only overwrites
    importlib.import_module("aiko.robots.aiko.mocap")
    _loaded = True


def backend_names() -> list[str]:
    load_plugins()
    return registry.backend_names()


def backend_help() -> dict[str, str]:
    load_plugins()
    return registry.backend_help()


def backend_info(name: str) -> registry.BackendInfo:
    load_plugins()
    return registry.backend_info(name)


def create_backend(name: str) -> JointInterface:
    """A fresh backend by name (``ConfigError`` naming the known ones if there is none)."""
    backend: JointInterface = backend_info(name).factory()
    return backend


def validate_backend_table(name: str, table: Table) -> object:
    """The parsed ``[backend.<name>]`` table (None for a backend that takes no keys)."""
    info = backend_info(name)
    if info.validate is None:
        table.finish()
        return None
    return info.validate(table)
