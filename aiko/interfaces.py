"""The contracts every backend and every gait share (see DESIGN.md: "The one idea").

The shape follows ros2_control: a hardware interface with a lifecycle (configure → activate → deactivate) and
``write``/``read``; a mock or simulated system implements the very same interface, so the control loop cannot tell
the real robot from the emulated one or the simulator.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from aiko.clock import Clock
    from aiko.experiment import Experiment
    from aiko.robot import RobotDescription


class JointStatus(enum.IntFlag):
    """Per-module status bits, as the joint-controller firmware reports them."""

    ENABLED = 1
    FAULT = 2
    WATCHDOG = 4
    AT_LIMIT = 8
    SATURATED = 16


@dataclass(frozen=True)
class JointReferences:
    """One sample of the gait for every joint module (horizontal and vertical axis), with feed-forward rates."""

    t_s: float
    angle_h_rad: np.ndarray
    angle_v_rad: np.ndarray
    rate_h_rad_s: np.ndarray
    rate_v_rad_s: np.ndarray

    @property
    def n_joints(self) -> int:
        return len(self.angle_h_rad)

    def as_payload(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "angle_h_rad": self.angle_h_rad.tolist(),
            "angle_v_rad": self.angle_v_rad.tolist(),
            "rate_h_rad_s": self.rate_h_rad_s.tolist(),
            "rate_v_rad_s": self.rate_v_rad_s.tolist(),
        }


@dataclass(frozen=True)
class JointFeedback:
    """What the joint modules report: measured angles and rates, status flags, and motor effort when known."""

    t_s: float
    angle_h_rad: np.ndarray
    angle_v_rad: np.ndarray
    rate_h_rad_s: np.ndarray
    rate_v_rad_s: np.ndarray
    status: np.ndarray
    effort_h: np.ndarray | None = None
    effort_v: np.ndarray | None = None

    @property
    def n_joints(self) -> int:
        return len(self.angle_h_rad)

    def as_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "t_s": self.t_s,
            "angle_h_rad": self.angle_h_rad.tolist(),
            "angle_v_rad": self.angle_v_rad.tolist(),
            "rate_h_rad_s": self.rate_h_rad_s.tolist(),
            "rate_v_rad_s": self.rate_v_rad_s.tolist(),
            "status": [int(s) for s in self.status],
        }
        if self.effort_h is not None:
            payload["effort_h"] = self.effort_h.tolist()
        if self.effort_v is not None:
            payload["effort_v"] = self.effort_v.tolist()
        return payload


class Recorder(Protocol):
    """Where every record of a run goes (the experiment log implements it; tests use an in-memory one)."""

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None: ...

    def event(self, kind: str, t_ns: int, **fields: Any) -> None: ...


@dataclass
class RunContext:
    """Everything a backend may need when it is configured."""

    robot: RobotDescription
    experiment: Experiment
    recorder: Recorder
    clock: Clock
    gait: Any = None
    options: dict[str, Any] = field(default_factory=dict)


class JointInterface(ABC):
    """A backend: the real robot over CAN, emulated joint modules, or a simulator."""

    name: str = "abstract"

    @abstractmethod
    def configure(self, ctx: RunContext) -> None:
        """Validate this backend's configuration and allocate resources. No motion."""

    @abstractmethod
    def activate(self) -> None:
        """Enable the drives (or start the simulation)."""

    @abstractmethod
    def write(self, refs: JointReferences) -> None:
        """Send references; they hold until the next write (zero-order hold, as on Aiko)."""

    @abstractmethod
    def read(self) -> JointFeedback:
        """The latest feedback of every joint module."""

    def advance_to(self, t_s: float) -> None:  # noqa: B027 - hardware backends need no override
        """Simulated backends integrate up to run time ``t_s``; on hardware time passes by itself."""

    @abstractmethod
    def deactivate(self) -> None:
        """Disable the drives. Must be safe on every exit path, and when called twice."""

    def emergency_stop(self) -> None:
        """Stop all motion at once. Backends with real actuators override it with their fastest path."""
        self.deactivate()

    def link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Link centre positions (n, 3) in m and orientations (n, 4) as unit quaternions (w, x, y, z), if known."""
        return None

    def summary(self) -> dict[str, Any]:
        """Backend-specific fields for the run summary (steps, solver statistics, ...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional
        """Release devices and files. Called once at the very end of a run."""
