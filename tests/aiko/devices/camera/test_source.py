"""OpenCV frame source: video files give their frames with the file's frame times; bad sources fail in one line."""

import cv2
import numpy as np
import pytest

from aiko.core.errors import HardwareError
from aiko.devices.camera.source import CameraSourceError, FrameSource, parse_source


def write_video(path, n_frames: int, fps: float) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (64, 48))
    assert writer.isOpened()
    for i in range(n_frames):
        writer.write(np.full((48, 64, 3), 20 * i, np.uint8))
    writer.release()


def test_video_file_frames_with_file_times(tmp_path):
    path = tmp_path / "run.avi"
    write_video(path, 7, 50.0)
    with FrameSource(str(path)) as source:
        assert source.fps == pytest.approx(50.0)
        frames = list(source)
    assert [f.index for f in frames] == list(range(7))
    assert [f.t_ns for f in frames] == [i * 20_000_000 for i in range(7)]
    means = [float(f.image.mean()) for f in frames]
    assert np.allclose(means, [20 * i for i in range(7)], atol=3)  # MJPG is lossy, but not that lossy
    assert all(f.image.shape == (48, 64, 3) and f.image.dtype == np.uint8 for f in frames)


def test_missing_file_is_one_clear_line(tmp_path):
    with pytest.raises(CameraSourceError, match=r"cannot open video file .*nope\.avi: no such file") as info:
        FrameSource(str(tmp_path / "nope.avi"))
    assert "\n" not in str(info.value)
    assert isinstance(info.value, HardwareError)


def test_file_that_is_not_a_video(tmp_path):
    path = tmp_path / "notes.avi"
    path.write_text("not a video")
    with pytest.raises(CameraSourceError, match="cannot open video file .*notes.avi with OpenCV"):
        FrameSource(str(path))


class _Capture:
    """A stand-in for cv2.VideoCapture: opens, delivers ``good`` frames, then fails every grab."""

    def __init__(self, opened: bool = True, good: int = 0) -> None:
        self.opened, self.good, self.released = opened, good, False

    def isOpened(self):  # noqa: N802 (OpenCV's name)
        return self.opened

    def set(self, *_):
        return True

    def get(self, prop):
        return 30.0 if prop == cv2.CAP_PROP_FPS else 0.0

    def grab(self):
        self.good -= 1
        return self.good >= 0

    def retrieve(self):
        return True, np.zeros((4, 4, 3), np.uint8)

    def release(self):
        self.released = True


def test_device_that_does_not_open():
    with pytest.raises(CameraSourceError, match="^cannot open camera device 3 with OpenCV$"):
        FrameSource(3, capture_factory=lambda *_: _Capture(opened=False))


def test_live_source_that_stops_delivering_raises_after_max_failed_reads():
    clock = iter(range(1000, 10**6, 1000))
    capture = _Capture(good=2)
    source = FrameSource(
        "rtsp://127.0.0.1/cam", capture_factory=lambda *_: capture, clock_ns=lambda: next(clock), max_failed_reads=5
    )
    first, second = source.read(), source.read()
    assert (first.index, second.index) == (0, 1)
    assert second.t_ns > first.t_ns  # monotonic clock at grab
    with pytest.raises(CameraSourceError, match=r"URL rtsp://127.0.0.1/cam stopped delivering frames after 2 frames"):
        source.read()
    source.close()
    assert capture.released


def test_gstreamer_pipeline_is_opened_with_the_gstreamer_backend():
    seen = []

    def factory(*args):
        seen.append(args)
        return _Capture(opened=False)

    with pytest.raises(CameraSourceError, match="cannot open GStreamer pipeline"):
        FrameSource("videotestsrc ! appsink", capture_factory=factory)
    assert seen == [("videotestsrc ! appsink", cv2.CAP_GSTREAMER)]


def test_parse_source():
    assert parse_source("0") == 0 and parse_source(" 12 ") == 12
    assert parse_source("run.mp4") == "run.mp4"
