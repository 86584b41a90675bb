"""Backends by name: every way of running a gait implements :class:`aiko.interfaces.JointInterface`.

Modules in this package register themselves on import (python-can's interface registry is the model): a new
backend is one new module, with no central list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from aiko.errors import ConfigError
from aiko.interfaces import JointInterface
from aiko.validation import Table

BackendFactory = Callable[[], JointInterface]
BackendValidator = Callable[[Table], None]


@dataclass(frozen=True)
class BackendInfo:
    name: str
    factory: BackendFactory
    help: str
    validate: BackendValidator | None = None


_BACKENDS: dict[str, BackendInfo] = {}
_loaded = False


def register_backend(name: str, factory: BackendFactory, help: str, validate: BackendValidator | None = None) -> None:
    """``validate`` checks the experiment's ``[backend.<name>]`` table at load time (and must call ``finish``)."""
    _BACKENDS[name] = BackendInfo(name, factory, help, validate)


def validate_backend_table(name: str, table: Table) -> None:
    _load_all()
    info = _BACKENDS[name]
    if info.validate is not None:
        info.validate(table)


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def backend_names() -> list[str]:
    _load_all()
    return sorted(_BACKENDS)


def backend_help() -> dict[str, str]:
    _load_all()
    return {name: info.help for name, info in sorted(_BACKENDS.items())}


def create_backend(name: str) -> JointInterface:
    _load_all()
    if name not in _BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; known backends: {', '.join(sorted(_BACKENDS))}")
    return _BACKENDS[name].factory()
