"""Emulated ATmega128 joint controllers on a python-can bus (in-process, or as a process speaking slcan)."""

from firmware_protocol.emulator.config import EmulatorConfig, EmulatorConfigError
from firmware_protocol.emulator.controller import ControllerGains
from firmware_protocol.emulator.drive import DriveParams
from firmware_protocol.emulator.emulator import JointControllerEmulator
from firmware_protocol.emulator.plant import IndependentInertiaParams, IndependentInertiaPlant, JointPlant
from firmware_protocol.emulator.rules import REJECTION_REASONS


def main(argv: list[str] | None = None) -> int:
    """Console script `aiko-emulator` (same as `python -m firmware_protocol.emulator`)."""
    from firmware_protocol.emulator.cli import main as cli_main

    return cli_main(argv)


__all__ = [
    "REJECTION_REASONS",
    "ControllerGains",
    "DriveParams",
    "EmulatorConfig",
    "EmulatorConfigError",
    "IndependentInertiaParams",
    "IndependentInertiaPlant",
    "JointControllerEmulator",
    "JointPlant",
    "main",
]
