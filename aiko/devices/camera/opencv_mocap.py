"""Marker tracking with OpenCV from a camera or a recorded video (or an image sequence ``frame_%04d.png``).

Each tracked body is one marker: an ArUco id (position and in-plane heading) or an HSV colour (position only).
Pixels become floor coordinates through a :class:`~aiko.devices.camera.calibration.PlaneCalibration`.

Live cameras are read on a thread (``sample`` takes the newest processed frame; latency = processing time plus
the driver's buffering, measured from grab to result). Video files are processed deterministically: the frame
shown at run time t is frame ⌊t·fps⌋, so a replay of the same file always gives the same track.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from aiko.core.errors import ConfigError, HardwareError
from aiko.core.mocap import MocapEvent, MocapSample, MotionCapture, occluded_sample
from aiko.devices.camera.calibration import PlaneCalibration
from aiko.devices.camera.markers import ArucoFinder, HsvRange, find_colour_blobs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MarkerSpec:
    """One tracked body: ``aruco_id`` or ``hsv`` (exactly one of them)."""

    name: str
    aruco_id: int | None = None
    hsv: HsvRange | None = None
    min_area_px: float = 12.0

    def __post_init__(self) -> None:
        if (self.aruco_id is None) == (self.hsv is None):
            raise ConfigError(f"marker {self.name!r}: give exactly one of aruco_id or hsv")


def yaw_quaternion_wxyz(yaw_rad: float) -> np.ndarray:
    return np.array([math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2)])


class MarkerTracker:
    """Image → positions (k, 3) m, quaternions (k, 4), occluded (k,). Pure: no camera, no threads."""

    def __init__(
        self, calibration: PlaneCalibration, markers: Sequence[MarkerSpec], aruco_dictionary: str = "DICT_4X4_50"
    ):
        if not markers:
            raise ConfigError("mocap.markers: track at least one marker")
        self.calibration = calibration
        self.markers = tuple(markers)
        self.aruco = ArucoFinder(aruco_dictionary) if any(m.aruco_id is not None for m in markers) else None

    def process(self, image_bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = len(self.markers)
        position = np.full((k, 3), np.nan)
        quaternion = np.full((k, 4), np.nan)
        occluded = np.ones(k, dtype=bool)
        found = self.aruco.find(image_bgr) if self.aruco is not None else {}
        z = self.calibration.plane_height_m
        for i, spec in enumerate(self.markers):
            if spec.aruco_id is not None:
                marker = found.get(spec.aruco_id)
                if marker is None:
                    continue
                plane = self.calibration.to_plane(np.vstack([marker.centre_px, marker.corners_px]))
                top_edge = plane[2] - plane[1]  # corner 0 → corner 1: the marker's +x axis
                position[i] = (*plane[0], z)
                quaternion[i] = yaw_quaternion_wxyz(math.atan2(top_edge[1], top_edge[0]))
                occluded[i] = False
            else:
                blobs = find_colour_blobs(image_bgr, spec.hsv, spec.min_area_px)
                if not blobs:
                    continue
                position[i] = (*self.calibration.to_plane(blobs[0].centroid_px[None])[0], z)
                occluded[i] = False
        return position, quaternion, occluded


class OpenCVMocap(MotionCapture):
    """``source``: a camera index (live), or a video file / image-sequence pattern (deterministic)."""

    def __init__(
        self,
        source: int | str,
        tracker: MarkerTracker,
        *,
        rate_hz: float = 20.0,
        stale_after_s: float = 0.25,
        capture_factory: Callable[[int | str], cv2.VideoCapture] = cv2.VideoCapture,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        video_fps: float | None = None,
    ) -> None:
        self.source = source
        self._video_fps = video_fps
        self.tracker = tracker
        self.names = tuple(m.name for m in tracker.markers)
        self.rate_hz = float(rate_hz)
        self.live = isinstance(source, int)
        self.stale_after_ns = int(stale_after_s * 1e9)
        self._capture_factory = capture_factory
        self._clock_ns = clock_ns
        self._capture: cv2.VideoCapture | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest: MocapSample | None = None
        self._events: list[MocapEvent] = []
        self._t0_ns: int | None = None
        self._frame_index = -1
        self._frame: np.ndarray | None = None
        self.fps = 0.0

    def describe(self) -> dict:
        return {
            **super().describe(),
            "source": str(self.source),
            "calibration": self.tracker.calibration.to_dict(),
            "markers": [
                {"name": m.name, "aruco_id": m.aruco_id, "hsv": None if m.hsv is None else list(vars(m.hsv).values())}
                for m in self.tracker.markers
            ],
        }

    def start(self) -> None:
        if self._capture is not None:
            return
        if not self.live and not _exists(str(self.source)):
            raise ConfigError(f"mocap.source: video file {self.source} not found")
        capture = self._capture_factory(self.source)
        if not capture.isOpened():
            raise HardwareError(f"cannot open camera/video {self.source!r} with OpenCV")
        self._capture = capture
        is_sequence = not self.live and "%" in str(self.source)
        # Image sequences report a made-up frame rate (25): one image per mocap sample unless told otherwise.
        self.fps = self._video_fps or (0.0 if is_sequence else float(capture.get(cv2.CAP_PROP_FPS) or 0.0))
        if self.live:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run_live, name="opencv-mocap", daemon=True)
            self._thread.start()
        elif self.fps <= 0:
            self.fps = self.rate_hz

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3.0)
            self._thread = None
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def pop_events(self) -> list[MocapEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def sample(self, t_ns: int) -> MocapSample:
        if self._capture is None:
            raise RuntimeError("OpenCVMocap.sample() before start()")
        if self.live:
            with self._lock:
                latest = self._latest
            if latest is None or t_ns - latest.t_ns > self.stale_after_ns:
                return occluded_sample(t_ns, self.names, -1, "opencv")
            return MocapSample(
                int(t_ns),
                latest.capture_t_ns,
                self.names,
                latest.position_m.copy(),
                latest.quaternion_wxyz.copy(),
                latest.occluded.copy(),
                latest.frame,
                "opencv",
            )
        return self._sample_file(t_ns)

    def _sample_file(self, t_ns: int) -> MocapSample:
        if self._t0_ns is None:
            self._t0_ns = int(t_ns)
        wanted = math.floor((t_ns - self._t0_ns) * 1e-9 * self.fps + 1e-9)
        while self._frame_index < wanted:
            ok, frame = self._capture.read()
            if not ok:
                if self._frame is not None and self._frame_index >= 0:
                    with self._lock:
                        self._events.append(
                            MocapEvent("mocap_video_ended", int(t_ns), {"frames": self._frame_index + 1})
                        )
                self._frame = None
                break
            self._frame = frame
            self._frame_index += 1
        capture_t_ns = self._t0_ns + round(max(self._frame_index, 0) / self.fps * 1e9)
        if self._frame is None:
            return occluded_sample(t_ns, self.names, self._frame_index, "opencv", capture_t_ns)
        position, quaternion, occluded = self.tracker.process(self._frame)
        return MocapSample(
            int(t_ns), capture_t_ns, self.names, position, quaternion, occluded, self._frame_index, "opencv"
        )

    def _run_live(self) -> None:
        frame_number = 0
        failures = 0
        while not self._stop.is_set():
            ok, frame = self._capture.read()
            grabbed = self._clock_ns()
            if not ok:
                failures += 1
                if failures == 1:
                    with self._lock:
                        self._events.append(MocapEvent("mocap_camera_lost", grabbed, {"device": str(self.source)}))
                self._stop.wait(0.05)
                continue
            if failures:
                with self._lock:
                    self._events.append(MocapEvent("mocap_camera_recovered", grabbed, {"failed_reads": failures}))
                failures = 0
            position, quaternion, occluded = self.tracker.process(frame)
            done = self._clock_ns()
            sample = MocapSample(done, grabbed, self.names, position, quaternion, occluded, frame_number, "opencv")
            with self._lock:
                self._latest = sample
            frame_number += 1


def _exists(source: str) -> bool:
    if "%" in source:  # image sequence pattern
        try:
            return Path(source % 0).exists() or Path(source % 1).exists()
        except TypeError:
            return False
    return Path(source).exists()
