"""Frames grabbed in the background during a run and written to a lossless video, each with its time on the
caller's clock; the caller's own loop is never blocked.

Why a video file and not tracking on the fly: turning a frame into strains costs ~10-16 ms of CPU (tracking
and the compiled observer ~5-8 ms each: ``benchmarks/camera_observer_accuracy.py``), most of it holding the interpreter,
which would take it away from the control loop for milliseconds in every 20 ms frame period. Writing the frames
costs a few milliseconds in OpenCV's encoder (which releases the GIL), keeps memory bounded whatever the run's
length, keeps the raw evidence (the run can be tracked again, with another calibration), and lets the bench feed
the recorded video to the same pipeline the synthetic camera's frames go through, after the run.

Two threads and a bounded queue between them: the *grabber* reads the source as fast as it delivers (a live
camera's driver drops frames silently when nobody reads it) and stamps each frame; the *writer* encodes. When the
writer falls behind by ``queue_frames`` frames, the grabber drops the newest frame and counts it (``dropped``), so
memory stays bounded and no drop goes unseen. Frames the driver itself lost show as gaps between the stamps
(``gaps``: the frames missing at the nominal rate).

File sources stand in for a live camera: a frame is delivered when the caller's clock reaches the frame's time in
the file (``pace``), and its stamp is that time (the file's time 0 is the caller's time 0).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from aiko.core.errors import ConfigError
from aiko.devices.camera.source import CameraSourceError, Frame, FrameSource

log = logging.getLogger(__name__)

VIDEO_CODEC = "FFV1"  # lossless: the tracker sees the camera's pixels, not a codec's


@dataclass
class CaptureStats:
    grabbed: int = 0  # frames read from the source
    written: int = 0  # frames in the video
    dropped: int = 0  # grabbed, not written: the writer was queue_frames behind
    gaps: int = 0  # frames missing between consecutive stamps at the nominal rate (lost before OpenCV)
    late_s: float = 0.0  # file sources: the largest delay of a delivery behind its time (a loaded machine)
    error: str | None = None  # why grabbing or writing stopped early

    def as_payload(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class StampedFrames:
    """What a capture leaves: the video and, per frame in it, its stamp on the caller's clock (ns)."""

    video: Path
    stamps_ns: list[int] = field(default_factory=list)


class BackgroundCapture:
    """Grab ``source`` into ``video`` until :meth:`stop` (or, for a file, until its frames pass ``end_s``).

    ``now_s``: the caller's clock (run time, s), used to pace a file source; it must be cheap and thread-safe.
    ``stamp_ns``: a live frame's stamp from the source's grab time (the source's ``clock_ns`` value); default as is.
    ``rate_hz``: the nominal frame rate, for the video's header and the gap count.
    ``writer_factory``: ``(path, fourcc, fps, (w, h)) -> cv2.VideoWriter`` (tests inject a slow one)."""

    def __init__(
        self,
        source: FrameSource,
        video: str | Path,
        *,
        rate_hz: float,
        now_s: Callable[[], float],
        stamp_ns: Callable[[int], int] | None = None,
        end_s: float | None = None,
        queue_frames: int = 64,
        writer_factory: Callable[..., Any] = cv2.VideoWriter,
    ) -> None:
        if queue_frames < 1:
            raise ConfigError(f"capture: queue_frames must be >= 1, got {queue_frames}")
        if not rate_hz > 0:
            raise ConfigError(f"capture: rate_hz must be > 0, got {rate_hz}")
        self.source = source
        self.out = StampedFrames(Path(video))
        self.rate_hz = float(rate_hz)
        self.now_s = now_s
        self.stamp_ns = stamp_ns or (lambda t_ns: t_ns)
        self.end_s = end_s
        self.writer_factory = writer_factory
        self.stats = CaptureStats()
        self._queue: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(maxsize=queue_frames)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> BackgroundCapture:
        self._threads = [
            threading.Thread(target=self._grab, name="camera-grab", daemon=True),
            threading.Thread(target=self._write, name="camera-write", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> StampedFrames:
        """Stop grabbing, write what is queued, close the video; returns the video and the stamps."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []
        self.source.close()
        return self.out

    # ------------------------------------------------------------------------------------------------ threads
    def _grab(self) -> None:
        last_ns: int | None = None
        period_ns = 1e9 / self.rate_hz
        try:
            # A file stands in for a live camera that filmed all along: at stop, the frames whose time the caller's
            # clock has already reached are delivered too (`_wait_until` lets only those through once stopped), so
            # how many a run gets does not depend on how far the grabber had got on a busy machine.
            while not (self._stop.is_set() and (not self.source.is_file or self.stats.error is not None)):
                frame = self.source.read()
                if frame is None:
                    break  # a file ended
                if self.source.is_file:
                    t_ns = frame.t_ns
                    if self.end_s is not None and t_ns * 1e-9 > self.end_s + 1e-9:
                        break
                    if not self._wait_until(t_ns * 1e-9):
                        break
                else:
                    t_ns = self.stamp_ns(frame.t_ns)
                self.stats.grabbed += 1
                if last_ns is not None and t_ns - last_ns > 1.5 * period_ns:
                    self.stats.gaps += round((t_ns - last_ns) / period_ns) - 1
                last_ns = t_ns
                try:
                    self._queue.put_nowait((t_ns, frame.image))
                except queue.Full:
                    self.stats.dropped += 1
        except CameraSourceError as exc:
            self.stats.error = str(exc)
            log.error("camera: %s", exc)
        finally:
            self._queue.put(None)  # the writer's end (blocks until there is room: the writer is draining)

    def _wait_until(self, t_s: float) -> bool:
        """Sleep until the caller's clock reaches ``t_s`` (a file frame's time); False when stopped before it (a frame
        already due when stopped is True: it was filmed before the stop)."""
        while True:
            late = self.now_s() - t_s
            if late >= 0:
                self.stats.late_s = max(self.stats.late_s, late)
                return True
            if self._stop.is_set():
                return False
            self._stop.wait(min(-late, 0.005))  # woken early by a stop: the frame may have come due meanwhile

    def _write(self) -> None:
        writer = None
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                t_ns, image = item
                if writer is None:
                    h, w = image.shape[:2]
                    fourcc = cv2.VideoWriter_fourcc(*VIDEO_CODEC)
                    writer = self.writer_factory(str(self.out.video), fourcc, self.rate_hz, (w, h))
                    if not writer.isOpened():
                        raise CameraSourceError(f"cannot write the camera's video {self.out.video}")
                writer.write(image)
                self.out.stamps_ns.append(int(t_ns))
                self.stats.written += 1
        except Exception as exc:  # noqa: BLE001 - a writer failure ends the capture, the run goes on
            self.stats.error = f"video writer: {exc}"
            log.error("camera: %s", self.stats.error)
            self._stop.set()
            while self._queue.get() is not None:  # let the grabber finish its put
                pass
        finally:
            if writer is not None:
                writer.release()


def read_back(frames: StampedFrames) -> Iterator[Frame]:
    """The captured frames in order, read from the video, each with its stamp (not the video's own frame time)."""
    if not frames.stamps_ns:
        return
    with FrameSource(str(frames.video)) as source:
        for stamp, frame in zip(frames.stamps_ns, source, strict=False):
            yield Frame(frame.index, stamp, frame.image)
