"""What an emulated Vicon tracks: subjects (segments in a tree, markers on segments) and a source of their poses.

The server (:mod:`aiko.devices.vicon.server`) knows nothing about any robot: a :class:`FrameSource` names the
subjects once and returns their poses at a time. Units are Vicon's: millimetres, rotation matrices segment → world.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from aiko.core.errors import ConfigError


@dataclass(frozen=True)
class SegmentSpec:
    name: str
    parent: str | None = None  # None: a root segment
    bounds_mm: tuple[float, float, float, float, float, float] = (0.0,) * 6  # the SDK's box; display only


@dataclass(frozen=True)
class MarkerSpec:
    name: str
    segment: str  # the segment it is attached to (an occluded segment hides its markers too)


@dataclass(frozen=True)
class SubjectSpec:
    name: str
    segments: tuple[SegmentSpec, ...]
    markers: tuple[MarkerSpec, ...] = ()

    def __post_init__(self) -> None:
        names = [s.name for s in self.segments]
        if not names:
            raise ConfigError(f"vicon subject {self.name!r}: needs at least one segment")
        if len(set(names)) != len(names):
            raise ConfigError(f"vicon subject {self.name!r}: segment names repeat")
        for s in self.segments:
            if s.parent is not None and s.parent not in names:
                raise ConfigError(f"vicon subject {self.name!r}: segment {s.name!r} has unknown parent {s.parent!r}")
        marker_names = [m.name for m in self.markers]
        if len(set(marker_names)) != len(marker_names):
            raise ConfigError(f"vicon subject {self.name!r}: marker names repeat")
        for m in self.markers:
            if m.segment not in names:
                raise ConfigError(f"vicon subject {self.name!r}: marker {m.name!r} on unknown segment {m.segment!r}")


@dataclass
class SubjectFrame:
    """One subject's poses at one instant. A segment or marker missing from the dicts is not seen (occluded)."""

    segments: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name → (mm (3,), R (3, 3))
    markers: dict[str, np.ndarray] = field(default_factory=dict)  # name → mm (3,)


class FrameSource(Protocol):
    """Where the emulated tracker's poses come from (a simulation, a recorded log, a test's function)."""

    def subjects(self) -> Sequence[SubjectSpec]:
        """The subjects, fixed for the server's lifetime (sent to clients as SubjectInfo)."""
        ...

    def frame(self, t_s: float) -> Mapping[str, SubjectFrame]:
        """Poses by subject name at ``t_s`` seconds since the server started."""
        ...
