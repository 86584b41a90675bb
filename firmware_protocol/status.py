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
        return cls(feedback_status_bits(signals))


def feedback_status_bits(signals: Mapping[str, float]) -> int:
    """``int(JointStatus.from_feedback(signals))`` without building enum members (the driver decodes thousands of
    feedback frames per second in lockstep HIL)."""
    return (
        (1 if signals["Enabled"] else 0)
        | (2 if signals["Fault"] or signals["EStop"] else 0)
        | (4 if signals["Watchdog"] else 0)
        | (8 if signals["AtLimit"] else 0)
        | (16 if signals["Saturated"] else 0)
    )
