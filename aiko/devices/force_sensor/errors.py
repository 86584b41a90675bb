"""Errors of the force/torque sensor package, each printed as one line by the CLI."""

from __future__ import annotations

from aiko.core.errors import AikoError, HardwareError


class FrameError(AikoError):
    """Bytes that are not a valid packet / frame of the protocol (wrong length, header, command or checksum)."""


class ChecksumError(FrameError):
    """A serial frame whose header and length are right but whose checksum is not."""


class SensorTimeout(HardwareError):
    """No sensor answered (no sample arrived) within the timeout."""
