"""Back-to-back comparison of two runs (the paper's Figs. 7, 10 and 11, with numbers).

Alignment in time: both runs' clocks start at their ``start`` event (the first reference sent). Motion capture on
the real robot starts logging 50–150 ms late (paper 000, Sec. VIII-F), so the tracked points are then aligned by
cross-correlating their velocities (position offsets and steady drift drop out of a velocity) over lags within
±``max_lag_s``, with sub-sample resolution from linear interpolation. ``time_offset_s`` > 0 means run B's tracked
point lags run A's: B(t + offset) ≈ A(t) + position offset.

Alignment in space: the runs start wherever the robot was put down, so B is translated by ``position_offset_m``, the
mean difference over the first ``start_window_s`` of the aligned overlap. ``rms_position_error_m`` is the RMS
distance in the floor plane (x, y) after both alignments. Occluded samples (NaN or flagged) are skipped and
counted; interpolation never bridges an occluded sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.core.mocap import MOCAP_TOPIC
from aiko.log import LogReader


class CompareError(AikoError):
    """The logs cannot be compared (no tracked point, no overlap, ...)."""


@dataclass(frozen=True)
class Track:
    """A run's tracked point: capture times from the run start (s), positions (N, 3) NaN where occluded."""

    t_s: np.ndarray
    position_m: np.ndarray
    occluded: np.ndarray
    name: str = ""
    quaternion_wxyz: np.ndarray | None = None  # (N, 4), NaN where unknown

    @property
    def valid(self) -> np.ndarray:
        return ~self.occluded


def run_start_ns(reader: LogReader) -> int:
    starts = reader.events("start")
    if starts:
        return starts[0].t_ns
    if reader.has("/references"):
        return int(reader.channel("/references").t_ns[0])
    span = reader.time_range_ns()
    if span is None:
        raise CompareError(f"{reader.path} is empty")
    return span[0]


TRACKED_POINT_TOPICS = (MOCAP_TOPIC, "/mocap/tracked_point")


def tracked_point(reader: LogReader, body: int = 0, topic: str | None = None) -> Track:
    """The tracked point from ``topic`` (default: the first of ``/mocap``, ``/mocap/tracked_point`` present)."""
    if topic is None:
        topic = next((t for t in TRACKED_POINT_TOPICS if reader.has(t)), MOCAP_TOPIC)
    if not reader.has(topic):
        raise CompareError(f"{reader.path} has no {topic} messages (channels: {', '.join(reader.topics)})")
    mocap = reader.channel(topic)
    if "position_m" not in mocap:
        raise CompareError(f"{reader.path}: {topic} is not a tracked-point channel (it has no position_m field)")
    position = np.asarray(mocap["position_m"], dtype=np.float64)
    if position.ndim == 2:  # a single body logged as (N, 3)
        position = position[:, None, :]
    if not 0 <= body < position.shape[1]:
        raise CompareError(f"{reader.path}: {topic} has {position.shape[1]} bodies; body {body} requested")
    t_ns = mocap["capture_t_ns"] if "capture_t_ns" in mocap else mocap.t_ns
    flags = np.asarray(mocap["occluded"], dtype=bool) if "occluded" in mocap else np.zeros(position.shape[:2], bool)
    flags = flags.reshape(len(position), -1)[:, body]
    p = position[:, body, :].copy()
    occluded = flags | np.isnan(p).any(axis=1)
    p[occluded] = np.nan
    order = np.argsort(t_ns, kind="stable")
    t_s = (np.asarray(t_ns, dtype=np.int64)[order] - run_start_ns(reader)) * 1e-9
    names = mocap["names"] if "names" in mocap else None
    name = str(names[0][body]) if names is not None and len(names) and names.ndim == 2 else ""
    quaternion = None
    if "quaternion_wxyz" in mocap:
        q = np.asarray(mocap["quaternion_wxyz"], dtype=np.float64)
        q = q[:, None, :] if q.ndim == 2 else q
        if q.ndim == 3 and q.shape[1] > body and q.shape[2] == 4:
            quaternion = q[:, body, :].copy()
            quaternion[occluded] = np.nan
            quaternion = quaternion[order]
    return Track(t_s, p[order], occluded[order], name, quaternion)


def yaw_rad(quaternion_wxyz: np.ndarray) -> np.ndarray:
    """Heading of the body's x axis in the floor plane (rotation about z), from unit quaternions (w, x, y, z)."""
    w, x, y, z = (quaternion_wxyz[..., i] for i in range(4))
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def sample_track(track: Track, t_s: np.ndarray) -> np.ndarray:
    """Positions at ``t_s`` by linear interpolation, NaN outside the track or next to an occluded sample."""
    out = np.full((len(t_s), 3), np.nan)
    if len(track.t_s) < 2:
        return out
    bad = track.occluded.astype(np.float64)
    filled = np.where(track.occluded[:, None], 0.0, track.position_m)
    inside = (t_s >= track.t_s[0]) & (t_s <= track.t_s[-1])
    touching_bad = np.interp(t_s, track.t_s, bad) > 1e-12
    ok = inside & ~touching_bad
    for k in range(3):
        out[ok, k] = np.interp(t_s[ok], track.t_s, filled[:, k])
    return out


def _velocities(t_s: np.ndarray, xy: np.ndarray) -> np.ndarray:
    return np.diff(xy, axis=0) / np.diff(t_s)[:, None]


def estimate_time_offset(
    a: Track, b: Track, max_lag_s: float = 0.5, step_s: float | None = None
) -> tuple[float, float]:
    """Lag (s) maximising the correlation of the planar velocities of A and of B shifted; returns (lag, score)."""
    for name, track in (("A", a), ("B", b)):
        if int(track.valid.sum()) < 10:
            raise CompareError(
                f"run {name} has {int(track.valid.sum())} valid tracked-point samples of {len(track.t_s)} (need ≥ 10); "
                "all occluded? (a backend without link poses, e.g. kinematic, gives no simulated motion capture)"
            )
    dt = float(np.median(np.diff(a.t_s)))
    step_s = step_s or dt / 20.0
    va = _velocities(a.t_s, a.position_m[:, :2])
    va = va - np.nanmean(va, axis=0)
    best = (0.0, -math.inf)
    for lag in np.arange(-max_lag_s, max_lag_s + 0.5 * step_s, step_s):
        pb = sample_track(b, a.t_s + lag)[:, :2]
        vb = _velocities(a.t_s, pb)
        ok = np.isfinite(va).all(axis=1) & np.isfinite(vb).all(axis=1)
        if ok.sum() < 10:
            continue
        x, y = va[ok], vb[ok] - vb[ok].mean(axis=0)
        denom = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
        score = float((x * y).sum()) / denom if denom > 0 else -math.inf
        if score > best[1]:
            best = (float(lag), score)
    if not math.isfinite(best[1]):
        raise CompareError("the runs' tracked points do not overlap enough to be aligned (need ≥ 10 valid samples)")
    return best


def joint_tracking_rms(reader: LogReader) -> dict[str, list[float]] | None:
    """Per-joint RMS of measured − reference (reference held until the next one), over the run's feedback."""
    if not (reader.has("/references") and reader.has("/joint_feedback")):
        return None
    refs, fb = reader.channel("/references"), reader.channel("/joint_feedback")
    index = np.searchsorted(refs["t_s"], fb["t_s"] + 1e-9, side="right") - 1
    use = index >= 0
    out = {}
    for axis in ("h", "v"):
        err = fb[f"angle_{axis}_rad"][use] - refs[f"angle_{axis}_rad"][index[use]]
        out[f"{axis}_rad"] = [float(x) for x in np.sqrt(np.nanmean(err**2, axis=0))]
    return out


def joint_difference_rms(a: LogReader, b: LogReader) -> dict[str, list[float]] | None:
    """Per-joint RMS of the measured angles of B − A at A's feedback times (B interpolated)."""
    if not (a.has("/joint_feedback") and b.has("/joint_feedback")):
        return None
    fa, fb = a.channel("/joint_feedback"), b.channel("/joint_feedback")
    out = {}
    for axis in ("h", "v"):
        qa, qb = fa[f"angle_{axis}_rad"], fb[f"angle_{axis}_rad"]
        if qa.shape[1] != qb.shape[1]:
            return None
        inside = (fa["t_s"] >= fb["t_s"][0]) & (fa["t_s"] <= fb["t_s"][-1])
        qbi = np.column_stack([np.interp(fa["t_s"][inside], fb["t_s"], qb[:, j]) for j in range(qb.shape[1])])
        out[f"{axis}_rad"] = [float(x) for x in np.sqrt(np.nanmean((qbi - qa[inside]) ** 2, axis=0))]
    return out


def displacement(track: Track) -> dict[str, Any]:
    valid = np.flatnonzero(track.valid & (track.t_s >= 0))
    if len(valid) < 2:
        return {
            "start_m": None,
            "end_m": None,
            "displacement_m": None,
            "distance_m": 0.0,
            "heading_deg": None,
            "yaw_change_deg": None,
        }
    start, end = track.position_m[valid[0]], track.position_m[valid[-1]]
    d = end - start
    out = {
        "start_m": start.tolist(),
        "end_m": end.tolist(),
        "displacement_m": d.tolist(),
        "distance_m": float(np.hypot(d[0], d[1])),
        "heading_deg": math.degrees(math.atan2(d[1], d[0])),
        "yaw_change_deg": None,
    }
    if track.quaternion_wxyz is not None:
        q = track.quaternion_wxyz[valid]
        ok = np.isfinite(q).all(axis=1)
        if ok.sum() >= 2:
            yaw = np.unwrap(yaw_rad(q[ok]))  # the body may turn more than half a turn over a run
            out["yaw_change_deg"] = math.degrees(yaw[-1] - yaw[0])
    return out


@dataclass
class Comparison:
    result: dict[str, Any]
    a: Track
    b: Track
    a_reader: LogReader
    b_reader: LogReader

    @property
    def time_offset_s(self) -> float:
        return self.result["time_offset_s"]


def compare_logs(
    a_path: Any,
    b_path: Any,
    *,
    max_lag_s: float = 0.5,
    start_window_s: float = 0.5,
    body: int = 0,
    topic: str | None = None,
) -> Comparison:
    ra, rb = LogReader(a_path), LogReader(b_path)
    a, b = tracked_point(ra, body, topic), tracked_point(rb, body, topic)
    offset, score = estimate_time_offset(a, b, max_lag_s)
    b_on_a = sample_track(b, a.t_s + offset)
    both = a.valid & np.isfinite(b_on_a).all(axis=1)
    if both.sum() < 2:
        raise CompareError("after alignment the runs share fewer than 2 valid tracked-point samples")
    first = a.t_s[both][0]
    window = both & (a.t_s <= first + start_window_s)
    position_offset = np.mean(b_on_a[window] - a.position_m[window], axis=0)
    residual = (b_on_a - position_offset - a.position_m)[both]
    rms = float(np.sqrt(np.mean(np.sum(residual[:, :2] ** 2, axis=1))))
    da, db = displacement(a), displacement(b)
    result = {
        "a": str(ra.path),
        "b": str(rb.path),
        "tracked_point": a.name or f"body {body}",
        "time_offset_s": offset,
        "alignment_correlation": score,
        "position_offset_m": position_offset.tolist(),
        "rms_position_error_m": rms,
        "max_position_error_m": float(np.max(np.linalg.norm(residual[:, :2], axis=1))),
        "samples_compared": int(both.sum()),
        "occluded_samples": {"a": int(a.occluded.sum()), "b": int(b.occluded.sum())},
        "run_a": da,
        "run_b": db,
        "distance_ratio": (db["distance_m"] / da["distance_m"]) if da["distance_m"] > 0 else None,
        "joint_tracking_rms_rad": {"a": joint_tracking_rms(ra), "b": joint_tracking_rms(rb)},
        "joint_angle_rms_between_runs_rad": joint_difference_rms(ra, rb),
    }
    return Comparison(result, a, b, ra, rb)
