"""The bench's backends by name: ``sim``, ``hil``, ``real``.

A registry of the bench's own, not :mod:`aiko.core.registry`'s: that one is the namespace of ``aiko run`` (Aiko's
experiment files, ``RunContext``, joint references); a bench backend takes a :class:`BenchContext` and flange
targets, so listed there it would be offered to ``aiko run`` and fail there. The entries reuse the spine's
:class:`aiko.core.registry.BackendInfo` record (name, factory, help, ``wall_clock_only``) so they read the same.
The modules register themselves when imported; :func:`load_backends` imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from aiko.core.errors import ConfigError
from aiko.core.registry import BackendInfo

_BACKENDS: dict[str, BackendInfo] = {}
_MODULES = ("aiko.robots.rod_bench.backends.sim", "aiko.robots.rod_bench.backends.arm")


def register_bench_backend(name: str, factory: Callable[[], Any], help: str, *, wall_clock_only: bool) -> None:
    _BACKENDS[name] = BackendInfo(name, factory, help, wall_clock_only=wall_clock_only)


def load_backends() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def bench_backend_names() -> list[str]:
    load_backends()
    return sorted(_BACKENDS)


def bench_backend_info(name: str) -> BackendInfo:
    load_backends()
    if name not in _BACKENDS:
        raise ConfigError(f"unknown bench backend {name!r}; known: {', '.join(sorted(_BACKENDS))}")
    return _BACKENDS[name]


def create_bench_backend(name: str) -> Any:
    return bench_backend_info(name).factory()
