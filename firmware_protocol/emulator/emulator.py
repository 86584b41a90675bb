"""`JointControllerEmulator`: the Python model of the joint modules' firmware on a python-can bus.

The emulator is two halves (issue 27's split): the firmware's state machine and control loop
(`modules.EmulatedModules`) and the bus side (`transport.BusTransport`: lockstep stepping, the real-time thread,
frame stamps). The same transport carries the firmware itself, running in the AVR simulator
(`firmware.FirmwareModules`). This class is the pair for the Python modules, and reads the modules' state through
(``emulator.state`` is ``emulator.modules.state``), as tests and benchmarks look at it.
"""

from __future__ import annotations

from typing import Any

import can

from firmware_protocol.emulator.config import EmulatorConfig, EmulatorConfigError
from firmware_protocol.emulator.modules import EmulatedModules, compiled_runner
from firmware_protocol.emulator.plant import JointPlant
from firmware_protocol.emulator.rules import REJECTION_REASONS, parameter_write_result, sequence_verdict
from firmware_protocol.emulator.transport import BusTransport

__all__ = [
    "REJECTION_REASONS",
    "EmulatorConfig",
    "EmulatorConfigError",
    "JointControllerEmulator",
    "compiled_runner",
    "parameter_write_result",
    "sequence_verdict",
]


class JointControllerEmulator(BusTransport):
    """Ten (configurable) emulated joint modules sharing one python-can bus and one plant."""

    modules: EmulatedModules

    def __init__(
        self,
        bus: can.BusABC,
        config: EmulatorConfig | None = None,
        plant: JointPlant | None = None,
        *,
        timestamp_offset_s: float = 0.0,
        use_reference: bool = False,
    ) -> None:
        """``use_reference``: run every tick through the readable numpy path even if the plant has a compiled step
        (``run_module_ticks``); the fast path must give the same result, bit for bit."""
        modules = EmulatedModules(config, plant, use_reference=use_reference)
        super().__init__(bus, modules, timestamp_offset_s=timestamp_offset_s)

    def __getattr__(self, name: str) -> Any:
        """The modules' state (``drive``, ``controller``, ``state``, ``reference_rad``, ...), read through."""
        if name == "modules":  # not yet set (during __init__): no recursion
            raise AttributeError(name)
        return getattr(self.modules, name)
