"""Simulated motion capture from a simulator backend's link poses, with noise, latency and dropouts.

Latency is modelled as a pure delay: the pose reported at run time t is the pose at t − latency, interpolated
linearly (positions) and by normalised linear interpolation (quaternions) between the two stored poses around it.
Poses are stored every time ``sample`` is called, so a latency shorter than the sample period is still honoured
to within the motion over one period (≈ 1 mm at 20 Hz for a snake crawling at 2 cm/s).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import numpy as np

from aiko.core.mocap import MocapSample, MotionCapture, occluded_sample

PoseSource = Callable[[], "tuple[np.ndarray, np.ndarray] | None"]


class SimulatedMocap(MotionCapture):
    """``pose_source()`` returns ((n,3) positions m, (n,4) quaternions wxyz) of all links, or None.

    ``links`` are 1-based link numbers as in the paper (link 6 of Aiko's 11 by default).
    """

    def __init__(
        self,
        pose_source: PoseSource,
        links: Sequence[int] = (6,),
        *,
        rate_hz: float = 20.0,
        noise_std_m: float = 0.0,
        latency_s: float = 0.0,
        dropout_probability: float = 0.0,
        seed: int | None = 0,
    ) -> None:
        if not links:
            raise ValueError("links must name at least one link (1-based)")
        if any(int(k) < 1 for k in links):
            raise ValueError(f"links are 1-based link numbers, got {list(links)}")
        if not 0.0 <= dropout_probability < 1.0:
            raise ValueError(f"dropout_probability must be in [0, 1), got {dropout_probability}")
        if noise_std_m < 0 or latency_s < 0 or rate_hz <= 0:
            raise ValueError("noise_std_m and latency_s must be ≥ 0 and rate_hz > 0")
        self.pose_source = pose_source
        self.links = tuple(int(k) for k in links)
        self.names = tuple(f"link{k}" for k in self.links)
        self.rate_hz = float(rate_hz)
        self.noise_std_m = float(noise_std_m)
        self.latency_ns = round(latency_s * 1e9)
        self.dropout_probability = float(dropout_probability)
        self._rng = np.random.default_rng(seed)
        self._history: collections.deque[tuple[int, np.ndarray, np.ndarray]] = collections.deque()
        self._frame = 0

    def describe(self) -> dict:
        return {
            **super().describe(),
            "links": list(self.links),
            "noise_std_m": self.noise_std_m,
            "latency_s": self.latency_ns * 1e-9,
            "dropout_probability": self.dropout_probability,
        }

    def sample(self, t_ns: int) -> MocapSample:
        poses = self.pose_source()
        frame = self._frame
        self._frame += 1
        if poses is not None:
            positions, quaternions = (np.asarray(a, dtype=np.float64) for a in poses)
            idx = [k - 1 for k in self.links]
            if max(idx) >= len(positions):
                raise ValueError(f"links {self.links} out of range for a robot with {len(positions)} links")
            self._history.append((int(t_ns), positions[idx].copy(), quaternions[idx].copy()))
        capture_t_ns = int(t_ns) - self.latency_ns
        delayed = self._pose_at(capture_t_ns)
        # Draw the random numbers every call so that a dropout does not shift the noise of later samples.
        noise = self._rng.normal(0.0, self.noise_std_m, size=(len(self.links), 3)) if self.noise_std_m else 0.0
        dropped = self._rng.random(len(self.links)) < self.dropout_probability
        if delayed is None:
            return occluded_sample(t_ns, self.names, frame, "simulated", capture_t_ns)
        position, quaternion = delayed
        position = position + noise
        position[dropped] = np.nan
        quaternion = quaternion.copy()
        quaternion[dropped] = np.nan
        return MocapSample(
            t_ns=int(t_ns),
            capture_t_ns=capture_t_ns,
            names=self.names,
            position_m=position,
            quaternion_wxyz=quaternion,
            occluded=dropped,
            frame=frame,
            source="simulated",
        )

    def _pose_at(self, t_ns: int) -> tuple[np.ndarray, np.ndarray] | None:
        h = self._history
        while len(h) >= 2 and h[1][0] <= t_ns:  # drop poses no longer needed
            h.popleft()
        if not h or h[0][0] > t_ns:
            return None  # nothing captured yet at that time
        t0, p0, q0 = h[0]
        if len(h) == 1 or t0 == t_ns:
            return p0.copy(), q0.copy()
        t1, p1, q1 = h[1]
        w = (t_ns - t0) / (t1 - t0)
        q1 = np.where((np.sum(q0 * q1, axis=1) < 0)[:, None], -q1, q1)  # shortest arc
        q = (1 - w) * q0 + w * q1
        return (1 - w) * p0 + w * p1, q / np.linalg.norm(q, axis=1, keepdims=True)
