"""Plant hooks for the UR3 emulator: what the flange touches.

A plant hook is a callable ``hook(t_s, flange_pose, flange_speed) -> wrench | None`` that the emulator calls
once per controller tick (:data:`aiko.devices.ur.arm_sim.PlantHook`): ``flange_pose`` is the flange (tool0)
``[x, y, z, rx, ry, rz]`` in the base frame, ``flange_speed`` its twist ``[vx, vy, vz, wx, wy, wz]``. A
returned wrench ``[Fx, Fy, Fz, Tx, Ty, Tz]`` (N, N m, base frame) is what the emulator reports as
``actual_TCP_force``. A later slice drives the Cosserat rod simulator's clamped base from this pose and
returns the rod's base reaction. ``aiko emulate ur3 --plant MODULE:FACTORY`` imports ``FACTORY`` and calls it
with no arguments to get the hook.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from aiko.core.errors import ConfigError


@dataclass
class SpringFloor:
    """A horizontal spring floor at ``z_m``: below it the flange is pushed up with ``stiffness_n_m`` per metre."""

    z_m: float = 0.10
    stiffness_n_m: float = 2000.0

    def __call__(self, t_s: float, flange_pose: np.ndarray, flange_speed: np.ndarray) -> list[float] | None:
        depth = self.z_m - float(flange_pose[2])
        if depth <= 0:
            return None
        return [0.0, 0.0, self.stiffness_n_m * depth, 0.0, 0.0, 0.0]


def spring_floor() -> SpringFloor:
    """The default spring floor (z = 0.10 m, 2000 N/m), for ``--plant aiko.devices.ur.plants:spring_floor``."""
    return SpringFloor()


def load_plant(spec: str):
    """``MODULE:FACTORY`` -> ``FACTORY()``, with one-line errors for a bad spec."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--plant must look like MODULE:FACTORY, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--plant: cannot import {module_name}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"--plant: {module_name} has no callable {attr}")
    hook = factory()
    if not callable(hook):
        raise ConfigError(f"--plant: {spec}() did not return a callable")
    return hook
