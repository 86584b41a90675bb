"""The PC side of the joint-module CAN protocol: a `JointInterface` over any python-can bus.

`CanJointDriver` streams references, collects feedback through a python-can `Notifier` (or synchronous polling
in lockstep HIL runs), tracks per-module health and always leaves the modules disabled. The backends `can` and
`hil` in `aiko.robots.aiko.backends.can` and `.hil` wrap it for `aiko run`.
"""

from aiko.devices.can.driver import CanDriverSettings, CanJointDriver
from aiko.devices.can.frame_log import SUPPORTED_LOG_SUFFIXES, open_can_log
from aiko.devices.can.health import HealthMonitor, ModuleHealth
from aiko.devices.can.shaping import ReferenceShaper

__all__ = [
    "SUPPORTED_LOG_SUFFIXES",
    "CanDriverSettings",
    "CanJointDriver",
    "HealthMonitor",
    "ModuleHealth",
    "ReferenceShaper",
    "open_can_log",
]
