"""The protocol's acceptance rules as the firmware applies them (docs/can_protocol.md, "Rules the firmware (and the
emulator) enforce"): which parameter writes are accepted and which reference sequence numbers are.

`aiko_joint.c` states the same rules in C (``aiko_parameter_write_result``, ``aiko_sequence_is_newer``);
tests/firmware_protocol/test_c_codec.py checks both on every sequence pair and thousands of random writes.
"""

from __future__ import annotations

import numpy as np

from firmware_protocol.dbc import (
    SEQUENCE_WINDOW,
    WATCHDOG_TIMEOUT_MAX_MS,
    WATCHDOG_TIMEOUT_MIN_MS,
    ModuleState,
    Parameter,
    ParameterResult,
)

# Why a frame was rejected: the keys of the counters, in the order the firmware numbers them.
REJECTION_REASONS = (
    "wrong_dlc",
    "out_of_range",
    "stale_sequence",
    "duplicate_sequence",
    "sequence_jump",
    "bad_estop_key",
    "unknown_command",
    "reserved_bits",
    "parameter_while_enabled",
)
FIRMWARE_VERSION = 1  # Heartbeat.FirmwareVersion


# Writable parameters: (allowed range, unit conversion wire -> internal).
PARAMETER_RANGES: dict[Parameter, tuple[float, float]] = {
    Parameter.KP_H: (1.0, 5000.0),  # V/rad; below 1 the joint does not move (a stray 5.7e-22 is no gain)
    Parameter.KD_H: (0.0, 500.0),
    Parameter.KP_V: (1.0, 5000.0),
    Parameter.KD_V: (0.0, 500.0),
    Parameter.LIMIT_H_DEG: (1.0, 180.0),
    Parameter.LIMIT_V_DEG: (1.0, 180.0),
    Parameter.WATCHDOG_PERIODS: (1.0, 100.0),
    Parameter.REFERENCE_PERIOD_MS: (1.0, 1000.0),
    Parameter.FEEDBACK_RATE_HZ: (0.0, 1000.0),
}
READ_ONLY = (Parameter.TORQUE_LIMIT_H_NM, Parameter.TORQUE_LIMIT_V_NM, Parameter.FREE_PLAY_DEG)


def parameter_write_result(
    state: int, index: int, value: float, watchdog_periods: float, reference_period_ms: float
) -> ParameterResult:
    """The firmware's rule for a parameter write (aiko_parameter_write_result in aiko_joint.c, checked equal).

    Order: unknown index, read-only, locked while enabled, range (incl. the watchdog timeout floor/ceiling)."""
    try:
        parameter = Parameter(index)
    except ValueError:
        return ParameterResult.UNKNOWN_INDEX
    if parameter in READ_ONLY:
        return ParameterResult.READ_ONLY
    if state == ModuleState.ENABLED:
        return ParameterResult.LOCKED
    low, high = PARAMETER_RANGES[parameter]
    value = float(np.float32(value))  # the wire value is float32, and so is the firmware's arithmetic
    if not (low <= value <= high):  # also NaN
        return ParameterResult.OUT_OF_RANGE
    if parameter is Parameter.WATCHDOG_PERIODS:
        watchdog_periods = value
    elif parameter is Parameter.REFERENCE_PERIOD_MS:
        reference_period_ms = value
    timeout_ms = float(np.float32(watchdog_periods) * np.float32(reference_period_ms))  # float32, as the C side
    if parameter in (Parameter.WATCHDOG_PERIODS, Parameter.REFERENCE_PERIOD_MS) and not (
        WATCHDOG_TIMEOUT_MIN_MS <= timeout_ms <= WATCHDOG_TIMEOUT_MAX_MS
    ):
        return ParameterResult.OUT_OF_RANGE
    return ParameterResult.OK


def sequence_verdict(sequence: int, last: int) -> str | None:
    """None if a reference with ``sequence`` is accepted after ``last`` (-1: none since Enable), else the reason."""
    if last < 0:
        return None
    delta = (sequence - last) % 256
    if delta == 0:
        return "duplicate_sequence"
    if delta >= 128:
        return "stale_sequence"
    if delta > SEQUENCE_WINDOW:
        return "sequence_jump"
    return None
