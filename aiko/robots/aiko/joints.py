"""Aiko's command and observation types (two-axis joint references and feedback), the gait protocol that produces
the references, the run context its backends are configured with, and the backend interface they implement.

This module imports nothing of the experiment loader (the run context is built from an experiment by
:func:`aiko.robots.aiko.experiment.run_context`): the loader imports the gaits, which import these types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from aiko.core.clock import Clock
from aiko.core.interfaces import Backend, Recorder
from aiko.core.messages import Channel, Message, integers, number, numbers
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.run_settings import RunSettings
from firmware_protocol.status import JointStatus

__all__ = [
    "FEEDBACK_CHANNEL",
    "Gait",
    "REFERENCES_CHANNEL",
    "JointFeedback",
    "JointInterface",
    "JointReferences",
    "JointStatus",
    "RunContext",
]

_ANGLES = {
    "t_s": number("run time of the sample", "s"),
    "angle_h_rad": numbers("horizontal (yaw) joint angles, joint 1 (next to the head) first", "rad"),
    "angle_v_rad": numbers("vertical (pitch) joint angles, joint 1 first", "rad"),
    "rate_h_rad_s": numbers("horizontal joint rates", "rad/s"),
    "rate_v_rad_s": numbers("vertical joint rates", "rad/s"),
}
REFERENCES_CHANNEL = Channel("/references", Message(
    "aiko.JointReferences",
    "The joint references sent to every joint module at the reference rate (10 Hz on Aiko); the rates are the "
    "gait's feed-forward.",
    _ANGLES,
))  # fmt: skip
FEEDBACK_CHANNEL = Channel("/joint_feedback", Message(
    "aiko.JointFeedback",
    "What the joint modules report, read at the feedback rate: measured angles and rates, status, effort.",
    {
        **_ANGLES,
        "status": integers("status flags per module: 1 ENABLED, 2 FAULT, 4 WATCHDOG, 8 AT_LIMIT, 16 SATURATED "
                           "(firmware_protocol.status.JointStatus)"),
        "effort_h": numbers("horizontal motor effort where known: PWM duty -1..1 from the joint modules (can, hil), "
                            "joint torque in N m from the simulators", optional=True),
        "effort_v": numbers("vertical motor effort, as effort_h", optional=True),
    },
))  # fmt: skip


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


class Gait(Protocol):
    """Joint references as a function of time and, for reactive gaits, of the latest feedback."""

    n_joints: int

    def references(self, t_s: float, feedback: JointFeedback | None = None) -> JointReferences: ...

    def initial_posture(self) -> JointReferences:
        """The joint angles a run starts from (what a simulator places the robot in at t = 0)."""
        ...


@dataclass
class RunContext:
    """What a backend is configured with: the robot, the run's settings, and each experiment section already
    parsed into its typed settings (``settings("can")``) — never the raw tables, which are read once, at load.

    The sections are the plug-ins' own types (``CanSection``, ``SimSettings``, …), so ``settings`` and
    ``backend_settings`` return ``Any``: the backend that owns a section annotates what it reads
    (``section: CanSection = ctx.settings("can")``)."""

    robot: RobotDescription
    run: RunSettings
    source: str  # the experiment file, for messages
    recorder: Recorder
    clock: Clock
    gait: Gait | None = None
    duration_s: float = 0.0
    realtime: bool = False
    sections: Callable[[str], Any] | None = None  # section name -> its typed settings (Experiment.settings)
    backends: dict[str, Any] = field(default_factory=dict)  # parsed [backend.<name>] tables, by backend name

    def backend_settings(self, backend: str) -> Any:
        """The parsed ``[backend.<backend>]`` table; None if the file has none (the backend's defaults apply)."""
        return self.backends.get(backend)

    def settings(self, section: str) -> Any:
        """The typed settings of an experiment section (parsed once, when the file was loaded)."""
        if self.sections is None:
            raise RuntimeError("RunContext without sections")
        return self.sections(section)


class JointInterface(Backend[RunContext, "JointReferences", "JointFeedback"]):
    """An Aiko backend: the real robot over CAN, emulated joint modules, or a simulator."""

    def link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Link centre positions (n, 3) in m and orientations (n, 4) as unit quaternions (w, x, y, z), if known."""
        return None

    def stale_modules(self) -> list[int]:
        """Modules whose feedback is older than the backend's timeout (a backend on a bus tracks it)."""
        return []

    def disabled_modules(self) -> list[int]:
        """Modules that were enabled and then disabled by something other than this run."""
        return []

    def streaming(self) -> bool:
        """False while the run holds its references back (``aiko drive`` after a lost input): the control loop then
        neither sends nor logs them, and the modules' watchdog stops the robot."""
        return True
