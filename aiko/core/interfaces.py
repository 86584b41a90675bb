"""The contracts of the spine, for any robot: the recorder every record goes to, and a backend's lifecycle.

The shape follows ros2_control: a hardware interface with a lifecycle (configure → activate → deactivate) and
``write``/``read``; a mock or simulated system implements the very same interface, so the loop cannot tell the
real robot from the emulated one or the simulator. The command and observation types are each robot's own (Aiko's
joint references and feedback, the rod bench's flange poses and wrenches): anything with ``as_payload()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, Protocol, TypeVar


class Payload(Protocol):
    """A command or an observation: it says how it is logged."""

    def as_payload(self) -> dict[str, Any]: ...


class Recorder(Protocol):
    """Where every record of a run goes (the experiment log implements it; tests use an in-memory one)."""

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None: ...

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        """``kind`` and ``t_ns`` are positional-only, so an event may carry fields of any other name."""
        ...


CommandT = TypeVar("CommandT", bound=Payload)
ObservationT = TypeVar("ObservationT", bound=Payload)
ContextT = TypeVar("ContextT")


class Backend(ABC, Generic[ContextT, CommandT, ObservationT]):
    """One way of running a robot: the real hardware, emulated hardware, or a simulator."""

    name: str = "abstract"

    @abstractmethod
    def configure(self, ctx: ContextT) -> None:
        """Validate this backend's configuration and allocate resources. No motion."""

    @abstractmethod
    def activate(self) -> None:
        """Enable the drives (or start the simulation)."""

    @abstractmethod
    def write(self, command: CommandT) -> None:
        """Send a command; it holds until the next write (zero-order hold)."""

    @abstractmethod
    def read(self) -> ObservationT:
        """The latest observation."""

    def advance_to(self, t_s: float) -> None:  # noqa: B027 - hardware backends need no override
        """Simulated backends integrate up to run time ``t_s``; on hardware time passes by itself."""

    @abstractmethod
    def deactivate(self) -> None:
        """Disable the drives. Must be safe on every exit path, and when called twice."""

    def emergency_stop(self) -> None:
        """Stop all motion at once. Backends with real actuators override it with their fastest path."""
        self.deactivate()

    def summary(self) -> dict[str, Any]:
        """Backend-specific fields for the run summary (solver statistics, bus counters, ...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional
        """Release devices and files. Called once at the very end of a run."""
