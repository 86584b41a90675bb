"""The joint module's status as one set of bit flags, beside the message definitions it is decoded from.

The FEEDBACK message (aiko_joint.dbc) carries the firmware's state as separate signals (Enabled, Fault, EStop,
Watchdog, AtLimit, Saturated); the PC packs them into one small integer per module so a whole run's status is one
integer array in the log. This enum is that packing: the driver, the simulators and every reader use it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class JointStatus(enum.IntFlag):
    """Per-module status bits (an emergency stop reads as FAULT: both cut the drive)."""

    ENABLED = 1
    FAULT = 2
    WATCHDOG = 4
    AT_LIMIT = 8
    SATURATED = 16

    @classmethod
    def from_feedback(cls, signals: Mapping[str, float]) -> JointStatus:
        """The flags of a decoded FEEDBACK message."""
        flags = cls(0)
        if signals["Enabled"]:
            flags |= cls.ENABLED
        if signals["Fault"] or signals["EStop"]:
            flags |= cls.FAULT
        if signals["Watchdog"]:
            flags |= cls.WATCHDOG
        if signals["AtLimit"]:
            flags |= cls.AT_LIMIT
        if signals["Saturated"]:
            flags |= cls.SATURATED
        return flags
