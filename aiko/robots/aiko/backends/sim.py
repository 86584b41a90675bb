"""The ``sim`` backend: runs the experiment on the simulator its ``[sim] model`` names.

Simulator models register here (``register_sim_model``) from their own modules in this package, with a validator
for their keys of the ``[sim]`` table, so a typo in ``[sim]`` is caught when the experiment file is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.core.registry import register_backend, register_section
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, RunContext

DEFAULT_MODEL = "snake3d"


@dataclass(frozen=True)
class SimModelInfo:
    name: str
    factory: Callable[[], JointInterface]
    parse: Callable[[Table, Any], Any]
    help: str


_MODELS: dict[str, SimModelInfo] = {}


def register_sim_model(
    name: str,
    factory: Callable[[], JointInterface],
    parse: Callable[[Table, Any], Any],
    help: str,
) -> None:
    """``parse(table, experiment)`` gets the whole ``[sim]`` table, returns the model's typed settings (found by the
    model's backend with ``ctx.settings("sim")``) and must call ``finish``."""
    _MODELS[name] = SimModelInfo(name, factory, parse, help)


def sim_model_names() -> list[str]:
    return sorted(_MODELS)


def _model_of(table: Table) -> SimModelInfo:
    name = table.string("model", DEFAULT_MODEL)
    if name not in _MODELS:
        known = ", ".join(sorted(_MODELS)) or "(none installed)"
        raise ConfigError(f"{table.source}: sim.model: unknown simulator {name!r}; known simulators: {known}")
    return _MODELS[name]


@dataclass(frozen=True)
class SimSettings:
    """The parsed ``[sim]`` section: which model, and that model's own typed settings."""

    model: str
    model_settings: Any


def parse_sim_section(table: Table, experiment: Any) -> SimSettings:
    info = _model_of(table)
    return SimSettings(info.name, info.parse(table, experiment))


register_section("sim", parse_sim_section)


class SimBackend(JointInterface):
    """Delegates every call to the simulator model the experiment chooses."""

    name = "sim"

    def __init__(self) -> None:
        self.inner: JointInterface | None = None

    def configure(self, ctx: RunContext) -> None:
        self.inner = _MODELS[ctx.settings("sim").model].factory()
        self.inner.configure(ctx)

    def _model(self) -> JointInterface:
        if self.inner is None:
            raise RuntimeError("sim backend used before configure()")
        return self.inner

    def activate(self) -> None:
        self._model().activate()

    def write(self, refs: JointReferences) -> None:
        self._model().write(refs)

    def read(self) -> JointFeedback:
        return self._model().read()

    def advance_to(self, t_s: float) -> None:
        self._model().advance_to(t_s)

    def deactivate(self) -> None:
        if self.inner is not None:
            self.inner.deactivate()

    def emergency_stop(self) -> None:
        if self.inner is not None:
            self.inner.emergency_stop()

    def link_poses(self) -> Any:
        return self._model().link_poses()

    def summary(self) -> dict[str, Any]:
        return {"sim_model": type(self._model()).__name__, **self._model().summary()}

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


register_backend("sim", SimBackend, "physics simulator chosen by [sim] model (snake3d, planar_snake, ...)")
