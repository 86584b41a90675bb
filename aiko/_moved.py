"""Old import paths of modules moved by the regrouping into core/devices/robots/analysis (release 0.2.0).

``import aiko.experiment`` still works for one release (0.2.x; the old names go in 0.3.0): it imports the new module,
registers it under the old name too (one module object, so registries are not duplicated) and warns with a
``DeprecationWarning`` naming the new path. An import hook rather than stub files, so the old names clutter no folder
a newcomer reads.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType

MOVED = {
    "aiko.errors": "aiko.core.errors",
    "aiko.validation": "aiko.core.config",
    "aiko.clock": "aiko.core.clock",
    "aiko.loop": "aiko.core.loop",
    "aiko.progress": "aiko.core.progress",
    "aiko.recording": "aiko.core.recording",
    "aiko.interfaces": "aiko.core.interfaces",
    "aiko.runner": "aiko.robots.aiko.run",
    "aiko.session": "aiko.robots.aiko.run",
    "aiko.experiment": "aiko.robots.aiko.experiment",
    "aiko.robot": "aiko.robots.aiko.description",
    "aiko.gait": "aiko.robots.aiko.gait",
    "aiko.gaits": "aiko.robots.aiko.gaits",
    "aiko.shape": "aiko.robots.aiko.shape",
    "aiko.snake3d_runs": "aiko.robots.aiko.paper_runs",
    "aiko.backends.can_bus": "aiko.robots.aiko.backends.hil",  # split into backends.can and backends.hil
    "aiko.backends": "aiko.robots.aiko.backends",
    "aiko.rod_experiment": "aiko.robots.rod_bench.experiment",
    "aiko.replay": "aiko.analysis.replay",
    "aiko.compare": "aiko.analysis.compare",
    "aiko.plots": "aiko.analysis.plots",
    "aiko.report": "aiko.analysis.report",
    "aiko.can_driver": "aiko.devices.can",
    "aiko.can_estop": "aiko.devices.can.estop",
    "aiko.mocap.config": "aiko.robots.aiko.mocap",
    "aiko.mocap.base": "aiko.core.mocap",
    "aiko.mocap.camera": "aiko.devices.camera.calibration",
    "aiko.mocap.opencv": "aiko.devices.camera.opencv_mocap",
    "aiko.mocap.markers": "aiko.devices.camera.markers",
    "aiko.mocap.vicon": "aiko.devices.vicon.client",
    "aiko.mocap": "aiko.devices.mocap",
    "aiko.live_foxglove": "aiko.log.live_foxglove",
}


class _MovedModuleFinder:
    """A meta-path finder and loader (the protocol only; no ``importlib.abc`` import: ``aiko can estop`` must
    start in a fraction of a second)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = _new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = _new_name(spec.name)
        assert new is not None
        import warnings

        warnings.warn(f"{spec.name} moved to {new}; the old name goes in release 0.3.0", DeprecationWarning, 2)
        module = importlib.import_module(new)
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module was executed when it was imported."""


def _new_name(fullname: str) -> str | None:
    for old in sorted(MOVED, key=len, reverse=True):
        if fullname == old or fullname.startswith(old + "."):
            return MOVED[old] + fullname[len(old) :]
    return None


def install() -> None:
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())  # before PathFinder: an old package path must not load twice
