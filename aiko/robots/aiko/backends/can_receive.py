"""How the CAN driver hears the joint modules: the receive modes the ``can`` and ``hil`` backends share.

A receive mode decides how frames come in and how waiting passes time: on hardware (and real-time HIL) a
python-can ``Notifier`` thread receives and waiting is sleeping (:class:`WallClockReceive`); in HIL's lockstep the
emulated modules are stepped to each instant and waiting advances them, not the wall clock
(``aiko.robots.aiko.backends.hil.LockstepReceive``). :class:`ReceiveMode` is the protocol they all implement.
"""

from __future__ import annotations

import time
from typing import Protocol


class ReceiveMode(Protocol):
    """How the driver hears the modules, and what waiting means."""

    use_notifier: bool
    """True: a python-can Notifier thread receives (the driver starts it); False: the run polls the bus."""

    def wait(self, dt_s: float) -> None:
        """Let ``dt_s`` of the modules' time pass (waiting for a reply or a confirmation)."""

    def advance_to(self, t_s: float) -> None:
        """The run reached run time ``t_s``."""

    def receive(self) -> None:
        """Deliver what the modules sent up to now, before the driver's feedback is read."""

    def start(self) -> None:
        """Start what runs beside the driver (an emulator thread), once the thread priorities are set."""

    def drain(self, frames_sent: int) -> None:
        """Let the modules handle every frame sent so far (up to a DISABLE or an e-stop)."""


class WallClockReceive:
    """How the driver hears the modules on real hardware (and in real-time HIL): a python-can ``Notifier`` thread
    receives, and waiting for an answer is sleeping. The other mode is HIL's lockstep (``backends.hil``)."""

    use_notifier = True

    def wait(self, dt_s: float) -> None:
        time.sleep(dt_s)

    def advance_to(self, t_s: float) -> None:
        """Time passes by itself."""

    def receive(self) -> None:
        """The Notifier has already delivered every frame."""

    def start(self) -> None:
        """Nothing of ours runs beside the driver."""

    def drain(self, frames_sent: int) -> None:
        """The bus delivers what was sent."""
