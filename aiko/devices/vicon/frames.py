"""Subjects and poses → the objects of one DataStream frame (ids, the static part, the per-frame part).

Ids follow the SDK's conventions (``SubjectInfoDetail.h``): segment and marker ids are positive per subject, and
``ParentID`` 0 marks a root segment. Every frame carries the static objects too (StreamInfo, ApplicationInfo,
SubjectInfo): a client that connects mid-stream needs nothing else, and the few hundred bytes do not matter on a
loopback or lab network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from aiko.devices.vicon import protocol as p
from aiko.devices.vicon.model import SubjectFrame, SubjectSpec

MARKER_RADIUS_MM = 7.0  # a 14 mm marker, Vicon's common size


@dataclass(frozen=True)
class _Ids:
    subject_id: int
    segment_ids: dict[str, int]
    marker_ids: dict[str, int]
    marker_segment: dict[str, str]


class FrameEncoder:
    """Encodes frames of fixed subjects at a fixed rate."""

    def __init__(self, subjects: Sequence[SubjectSpec], rate_hz: float) -> None:
        if not subjects:
            raise ValueError("an emulated Vicon needs at least one subject")
        self.subjects = tuple(subjects)
        self.rate_hz = float(rate_hz)
        self._ids: dict[str, _Ids] = {}
        infos = []
        for k, subject in enumerate(self.subjects, start=1):
            seg_ids = {s.name: i for i, s in enumerate(subject.segments, start=1)}
            mk_ids = {m.name: i for i, m in enumerate(subject.markers, start=1)}
            self._ids[subject.name] = _Ids(k, seg_ids, mk_ids, {m.name: m.segment for m in subject.markers})
            segments = tuple(
                p.SegmentInfo(seg_ids[s.parent] if s.parent else 0, seg_ids[s.name], tuple(s.bounds_mm), s.name)
                for s in subject.segments
            )
            markers = tuple(p.MarkerInfo(mk_ids[m.name], m.name) for m in subject.markers)
            attachments = tuple(p.Attachment(mk_ids[m.name], seg_ids[m.segment]) for m in subject.markers)
            infos.append(p.SubjectInfo(k, subject.name, segments, markers, attachments))
        self.static: tuple[p.VObject, ...] = (
            p.StreamInfo.for_rate(self.rate_hz),
            p.ApplicationInfo(p.ApplicationInfo.Z_UP),
            *infos,
        )
        self.object_types = frozenset(
            int(t)
            for t in (
                p.ObjectType.STREAM_INFO,
                p.ObjectType.APPLICATION_INFO,
                p.ObjectType.SUBJECT_INFO,
                p.ObjectType.FRAME_INFO,
                p.ObjectType.TIMECODE,
                p.ObjectType.LATENCY_INFO,
                p.ObjectType.GLOBAL_SEGMENTS,
                p.ObjectType.LOCAL_SEGMENTS,
                p.ObjectType.LABELED_RECONS,
            )
        )

    def objects(
        self,
        frame_id: int,
        t_s: float,
        data: Mapping[str, SubjectFrame],
        hidden: Mapping[str, set[str]] | None = None,
        latency_s: float = 0.0,
    ) -> list[p.VObject]:
        """The objects of frame ``frame_id`` captured at ``t_s``; ``hidden[subject]`` names unseen segments/markers."""
        hidden = hidden or {}
        out: list[p.VObject] = [*self.static, p.FrameInfo(frame_id % 0xFFFFFFFF), timecode(t_s, self.rate_hz)]
        out.append(p.LatencyInfo((p.LatencySample("Emulated delay", float(latency_s)),)))
        recons = []
        for subject in self.subjects:
            ids = self._ids[subject.name]
            frame = data.get(subject.name, SubjectFrame())
            gone = hidden.get(subject.name, set())
            seen = {name: pose for name, pose in frame.segments.items() if name not in gone and name in ids.segment_ids}
            glob, local = [], []
            for seg in subject.segments:
                if seg.name not in seen:
                    continue
                x, r = seen[seg.name]
                glob.append(_pose(ids.segment_ids[seg.name], x, r))
                if seg.parent is None:
                    local.append(_pose(ids.segment_ids[seg.name], x, r))
                elif seg.parent in seen:  # a local pose needs its parent's
                    xp, rp = seen[seg.parent]
                    local.append(_pose(ids.segment_ids[seg.name], rp.T @ (x - xp), rp.T @ r))
            out.append(p.GlobalSegments(ids.subject_id, tuple(glob)))
            out.append(p.LocalSegments(ids.subject_id, tuple(local)))
            for m in subject.markers:
                pos = frame.markers.get(m.name)
                if pos is None or m.name in gone or m.segment in gone or m.segment not in seen:
                    continue
                recons.append(p.LabeledRecon(ids.subject_id, ids.marker_ids[m.name], MARKER_RADIUS_MM, _vec(pos, 3)))
        out.append(p.LabeledRecons(tuple(recons)))
        return out


def _vec(values: np.ndarray, n: int) -> tuple[float, ...]:
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if flat.size != n or not np.all(np.isfinite(flat)):
        raise ValueError(f"expected {n} finite numbers, got {flat}")
    return tuple(float(v) for v in flat)


def _pose(segment_id: int, translation_mm: np.ndarray, rotation: np.ndarray) -> p.SegmentPose:
    return p.SegmentPose(segment_id, _vec(translation_mm, 3), _vec(rotation, 9))  # type: ignore[arg-type]


def timecode(t_s: float, rate_hz: float) -> p.Timecode:
    """A free-running timecode from the server's clock (no timecode standard, one subframe per frame)."""
    whole = int(t_s)
    return p.Timecode(
        hours=(whole // 3600) % 24,
        minutes=(whole // 60) % 60,
        seconds=whole % 60,
        frames=min(int((t_s - whole) * rate_hz), 255),
        subframes=0,
        subframes_per_frame=1,
    )
