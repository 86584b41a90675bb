"""Background capture: frames grabbed in one thread, written to a lossless video in another through a bounded queue;
live frames stamped through the caller's mapping, file frames paced on the caller's clock; drops and gaps counted."""

import threading
import time

import cv2
import numpy as np
import pytest

from aiko.core.errors import ConfigError
from aiko.devices.camera.capture import BackgroundCapture, read_back
from aiko.devices.camera.source import FrameSource


class LiveCapture:
    """A stand-in for a live cv2.VideoCapture: ``n`` frames whose grey level is their index, then grabs fail."""

    def __init__(self, n: int) -> None:
        self.n, self.k = n, 0

    def isOpened(self):  # noqa: N802 (OpenCV's name)
        return True

    def set(self, *_):
        return True

    def get(self, prop):
        return 100.0 if prop == cv2.CAP_PROP_FPS else 0.0

    def grab(self):
        self.k += 1
        return self.k <= self.n

    def retrieve(self):
        return True, np.full((24, 32, 3), self.k, np.uint8)

    def release(self):
        pass


class StepClock:
    """A grab clock: 10 ms per frame, with frames 5 and 6 missing (the driver lost them) before frame 7."""

    def __init__(self) -> None:
        self.k = 0

    def __call__(self) -> int:
        self.k += 1
        return 1_000_000_000 + (self.k + (2 if self.k >= 5 else 0)) * 10_000_000


def live_source(n: int) -> FrameSource:
    return FrameSource(0, capture_factory=lambda *_: LiveCapture(n), clock_ns=StepClock(), max_failed_reads=1)


def test_live_frames_are_stamped_through_the_mapping_and_written_losslessly_with_gaps_counted(tmp_path):
    capture = BackgroundCapture(
        live_source(8), tmp_path / "v.avi", rate_hz=100.0, now_s=lambda: 0.0, stamp_ns=lambda t: t - 1_000_000_000
    ).start()
    time.sleep(0.5)  # the source fails after 8 frames: the grabber stops with the error
    frames = capture.stop()
    stats = capture.stats
    assert stats.grabbed == stats.written == 8 and stats.dropped == 0
    assert stats.gaps == 2 and "stopped delivering frames after 8 frames" in stats.error
    assert frames.stamps_ns == [k * 10_000_000 for k in (1, 2, 3, 4, 7, 8, 9, 10)]
    back = list(read_back(frames))
    assert [f.t_ns for f in back] == frames.stamps_ns  # the stamps, not the video's own frame times
    assert [int(f.image[0, 0, 0]) for f in back] == list(range(1, 9))  # FFV1: the grey levels exactly


class SlowWriter:
    """A video writer that blocks until released: the queue fills, the grabber must drop, not wait."""

    release_event = threading.Event()

    def __init__(self, *args) -> None:
        self.frames = 0

    def isOpened(self):  # noqa: N802
        return True

    def write(self, image):
        self.release_event.wait(5.0)
        self.frames += 1

    def release(self):
        pass


def test_a_writer_that_falls_behind_makes_the_grabber_drop_and_count_not_wait(tmp_path):
    SlowWriter.release_event.clear()
    capture = BackgroundCapture(
        live_source(40), tmp_path / "v.avi", rate_hz=100.0, now_s=lambda: 0.0, queue_frames=3, writer_factory=SlowWriter
    ).start()
    deadline = time.monotonic() + 5.0
    while capture.stats.grabbed < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert capture.stats.grabbed == 40  # the grabber ran through while the writer was stuck on frame 1
    SlowWriter.release_event.set()
    capture.stop()
    stats = capture.stats
    assert stats.dropped > 30 and stats.written + stats.dropped == stats.grabbed
    assert stats.written <= 1 + 3  # the one being written and the queue's three


def _film(tmp_path):
    """A 50 fps file of 10 frames whose grey level is 10 × their index."""
    path = tmp_path / "film.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FFV1"), 50.0, (32, 24))
    for i in range(10):
        writer.write(np.full((24, 32, 3), 10 * i, np.uint8))
    writer.release()
    return path


def test_file_frames_are_paced_on_the_callers_clock_and_stop_at_the_end(tmp_path):
    path = _film(tmp_path)
    run_time = {"t": 0.05}
    capture = BackgroundCapture(
        FrameSource(str(path)), tmp_path / "out.avi", rate_hz=50.0, now_s=lambda: run_time["t"], end_s=0.12
    ).start()
    time.sleep(0.3)
    assert capture.stats.grabbed == 3  # frames at 0, 20, 40 ms: the clock is at 50 ms
    run_time["t"] = 1.0
    time.sleep(0.3)
    assert capture.stats.grabbed == 7  # the rest up to end_s at once, nothing after it
    frames = capture.stop()
    assert frames.stamps_ns == [k * 20_000_000 for k in range(7)]  # the file's times, up to end_s
    assert [int(f.image[0, 0, 0]) for f in read_back(frames)] == [10 * k for k in range(7)]


def test_a_file_stopped_while_its_grabber_is_behind_still_delivers_every_frame_already_due(tmp_path):
    """On a busy machine the grabber may not have read the frames the caller's clock has passed when the run
    stops: they were filmed before the stop, so they are delivered; the first one not yet due ends the capture."""
    path = _film(tmp_path)
    run_time = {"t": 0.05}
    capture = BackgroundCapture(
        FrameSource(str(path)), tmp_path / "out.avi", rate_hz=50.0, now_s=lambda: run_time["t"]
    ).start()
    time.sleep(0.3)
    assert capture.stats.grabbed == 3
    run_time["t"] = 0.13  # frames at 60 … 120 ms are due now; 140 ms is not
    frames = capture.stop()  # at once: the grabber has not caught up yet
    assert frames.stamps_ns == [k * 20_000_000 for k in range(7)]
    assert capture.stats.grabbed == capture.stats.written == 7


def test_bad_settings_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="queue_frames must be >= 1"):
        BackgroundCapture(live_source(1), tmp_path / "v.avi", rate_hz=10.0, now_s=time.monotonic, queue_frames=0)
