"""The ``[run]`` table of an experiment file, parsed: how long a run lasts and at which rates its loop runs.

A leaf module (it imports nothing of the robot) so that the run context (:mod:`aiko.robots.aiko.joints`) can carry
it without importing the experiment loader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSettings:
    duration_s: float
    reference_rate_hz: float
    feedback_rate_hz: float
    # keep running when a module reports ESTOP, WATCHDOG or a fault (default: such a run stops at once)
    allow_degraded: bool = False
