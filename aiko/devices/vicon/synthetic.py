"""A frame source of closed-form motion: subjects whose segments turn about z on circles, for tests and demos.

Every pose is a function of time alone (:func:`synthetic_pose`), so a test in another process can compute what
the client should read for any frame without talking to the server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from aiko.devices.vicon.model import MarkerSpec, SegmentSpec, SubjectFrame, SubjectSpec

MARKER_OFFSET_MM = np.array([0.0, 0.0, 25.0])  # each segment's marker, in the segment's frame


def synthetic_pose(subject_index: int, segment_index: int, t_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(translation mm, rotation segment → world) of segment ``segment_index`` of subject ``subject_index``."""
    yaw = 0.5 * t_s + 0.3 * segment_index + subject_index
    c, s = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    radius_mm = 300.0 + 100.0 * segment_index
    translation = np.array(
        [radius_mm * c + 1000.0 * subject_index, radius_mm * s, 50.0 + 10.0 * segment_index + 5.0 * math.sin(t_s)]
    )
    return translation, rotation


def segment_name(index: int) -> str:
    return f"seg{index + 1}"


def marker_name(index: int) -> str:
    return f"seg{index + 1}_m"


class SyntheticSource:
    """``n_subjects`` subjects ``subject1``… each a chain of ``n_segments`` with one marker per segment."""

    def __init__(self, n_subjects: int = 1, n_segments: int = 3) -> None:
        if n_subjects < 1 or n_segments < 1:
            raise ValueError("a synthetic Vicon needs at least one subject of one segment")
        self._subjects = tuple(
            SubjectSpec(
                f"subject{k + 1}",
                tuple(SegmentSpec(segment_name(i), segment_name(i - 1) if i else None) for i in range(n_segments)),
                tuple(MarkerSpec(marker_name(i), segment_name(i)) for i in range(n_segments)),
            )
            for k in range(n_subjects)
        )

    def subjects(self) -> Sequence[SubjectSpec]:
        return self._subjects

    def frame(self, t_s: float) -> Mapping[str, SubjectFrame]:
        out = {}
        for k, subject in enumerate(self._subjects):
            frame = SubjectFrame()
            for i, seg in enumerate(subject.segments):
                x, r = synthetic_pose(k, i, t_s)
                frame.segments[seg.name] = (x, r)
                frame.markers[marker_name(i)] = x + r @ MARKER_OFFSET_MM
            out[subject.name] = frame
        return out
