"""Frames from any OpenCV video source, each with the time it was taken.

``cv2.VideoCapture`` opens camera indices (V4L2, …), video files and image sequences (FFmpeg), network URLs and
GStreamer pipelines (when the OpenCV build has GStreamer; ``opencv-python-headless`` wheels do not). Timestamps:

* live sources (a device index, a URL, a pipeline): ``time.monotonic_ns()`` taken right after ``grab()`` returns,
  before the (slow) decode in ``retrieve()``; the driver's own buffering latency is not visible to OpenCV;
* files: the frame's presentation time in the file (``CAP_PROP_POS_MSEC`` after the read), so replays are exact;
  when the container does not report it, index / fps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from aiko.core.errors import ConfigError, HardwareError


class CameraSourceError(HardwareError):
    """A video source that does not open, or that stops delivering frames."""


@dataclass(frozen=True)
class Frame:
    index: int  # 0, 1, … in delivery order
    t_ns: int  # monotonic ns at grab (live) or the frame's time in the file (files)
    image: np.ndarray  # BGR uint8 (H, W, 3)


_URL_PREFIXES = ("rtsp://", "rtmp://", "http://", "https://", "udp://", "tcp://")


def describe_source(source: int | str) -> str:
    """``device 0``, ``file run.mp4``, ``GStreamer pipeline …``, ``URL …``: for messages."""
    if isinstance(source, int):
        return f"camera device {source}"
    if "!" in source:
        return f"GStreamer pipeline {source!r}"
    if source.startswith(_URL_PREFIXES):
        return f"URL {source}"
    return f"video file {source}"


def parse_source(text: str | int) -> int | str:
    """A command-line source: digits are a device index, anything else a file, URL or GStreamer pipeline."""
    if isinstance(text, int):
        return text
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() else stripped


class FrameSource:
    """Iterate over :class:`Frame` objects of one OpenCV source; a context manager that releases it.

    ``max_failed_reads``: a live source that fails this many reads in a row raises :class:`CameraSourceError`
    (a camera unplugged, a stream gone); a file simply ends (the iteration stops)."""

    def __init__(
        self,
        source: int | str,
        *,
        width_px: int | None = None,
        height_px: int | None = None,
        fps: float | None = None,
        max_failed_reads: int = 20,
        capture_factory: Callable[..., cv2.VideoCapture] = cv2.VideoCapture,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.source = parse_source(source)
        self.description = describe_source(self.source)
        self.is_file = (
            isinstance(self.source, str) and "!" not in self.source and not self.source.startswith(_URL_PREFIXES)
        )
        if max_failed_reads < 1:
            raise ConfigError(f"max_failed_reads must be >= 1, got {max_failed_reads}")
        self.max_failed_reads = int(max_failed_reads)
        self._clock_ns = clock_ns
        if self.is_file and "%" not in self.source and not Path(self.source).exists():
            raise CameraSourceError(f"cannot open {self.description}: no such file")
        if isinstance(self.source, str) and "!" in self.source:
            capture = capture_factory(self.source, cv2.CAP_GSTREAMER)
        else:
            capture = capture_factory(self.source)
        if not capture.isOpened():
            hint = " (this OpenCV build has no GStreamer)" if "!" in str(self.source) and not _has_gstreamer() else ""
            raise CameraSourceError(f"cannot open {self.description} with OpenCV{hint}")
        self._capture = capture
        for prop, value in ((cv2.CAP_PROP_FRAME_WIDTH, width_px), (cv2.CAP_PROP_FRAME_HEIGHT, height_px)):
            if value is not None:
                capture.set(prop, float(value))
        if fps is not None:
            capture.set(cv2.CAP_PROP_FPS, float(fps))
        reported = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
        self.fps = reported if reported > 0 else (fps or 0.0)
        self._index = 0

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def __iter__(self) -> Iterator[Frame]:
        while True:
            frame = self.read()
            if frame is None:
                return
            yield frame

    def read(self) -> Frame | None:
        """The next frame; None at the end of a file; raises when a live source stops delivering."""
        if self._capture is None:
            raise CameraSourceError(f"{self.description} is closed")
        failures = 0
        while True:
            grabbed = self._capture.grab()
            t_ns = self._clock_ns()
            if grabbed:
                ok, image = self._capture.retrieve()
                if ok and image is not None:
                    break
            if self.is_file:
                return None
            failures += 1
            if failures >= self.max_failed_reads:
                raise CameraSourceError(
                    f"{self.description} stopped delivering frames after {self._index} frames "
                    f"({failures} failed reads in a row)"
                )
        if self.is_file:
            t_ns = self._file_time_ns()
        frame = Frame(self._index, int(t_ns), image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2BGR))
        self._index += 1
        return frame

    def _file_time_ns(self) -> int:
        # POS_MSEC after a read is the time of the *next* frame for some backends and of this one for others;
        # FFmpeg (the wheels' backend) reports this frame's presentation time. Fall back to index / fps.
        msec = float(self._capture.get(cv2.CAP_PROP_POS_MSEC) or 0.0)
        if msec > 0 or self._index == 0:
            return round(msec * 1e6)
        if self.fps > 0:
            return round(self._index / self.fps * 1e9)
        raise CameraSourceError(f"{self.description} reports neither frame times nor a frame rate")


def _has_gstreamer() -> bool:
    info = cv2.getBuildInformation()
    for line in info.splitlines():
        if "GStreamer" in line:
            return "YES" in line
    return False
