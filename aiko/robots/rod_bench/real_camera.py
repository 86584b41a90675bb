"""The bench's real camera (``--backend real`` with ``[camera] source`` an OpenCV source): frames grabbed during the
run in a background thread into a lossless video beside the log, each stamped on the run's clock; after the run the
video goes through the same tracker and strain observer as HIL's synthetic frames
(:func:`aiko.robots.rod_bench.camera.observe_frames`), into ``/bench/markers`` and ``/bench/observed_strain``.

Why record and observe after the run, not track on the fly: :mod:`aiko.devices.camera.capture` (tracking and the
observer hold the interpreter for milliseconds a frame; the video keeps memory bounded and the arm's loop never
waits on the camera).

**The run's clock in another thread.** The arm backends run on the controller's clock (RTDE timestamps); reading
it means a call into ur_rtde, which belongs to the loop's thread. So at ``open`` the camera anchors the run's clock
to the host's monotonic clock once (at an edge of the controller's time, which advances in RTDE periods) and
maps every grab time through that anchor: run time = t_anchor + (monotonic − monotonic_anchor) − ``latency_s``. On
a real UR the controller's time follows the wall clock, so the mapping drifts only by the two clocks' rate
difference (ppm: well under a millisecond over a bench run).

**A video file as the source** stands in for a live camera (tests, a camera recorded by another synchronised
system): its frames are delivered when the run's time reaches their time in the file, and stamped with it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.clock import Clock
from aiko.core.config import read_config_text
from aiko.core.errors import AikoError, ConfigError
from aiko.core.interfaces import Recorder
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.camera import observe_frames, strain_pipeline
from aiko.robots.rod_bench.sensor_task import FinishedRun

log = logging.getLogger(__name__)

VIDEO_SUFFIX = ".camera.avi"


def video_path_for(log_path: str | Path) -> Path:
    """The run's video beside its log: ``run.mcap`` → ``run.camera.avi``."""
    return Path(log_path).with_suffix(VIDEO_SUFFIX)


def resolve_source(source: int | str, experiment_path: Path) -> int | str:
    """A device index or pipeline/URL as given; a relative file path from the experiment file's folder."""
    from aiko.devices.camera.source import describe_source, parse_source

    parsed = parse_source(source)
    if isinstance(parsed, str) and describe_source(parsed).startswith("video file") and not Path(parsed).is_absolute():
        return str(experiment_path.parent / parsed)
    return parsed


def load_pixels_to_world(path: Path, plane: str | None, plane_offset_m: float) -> Any:
    """Pixels → world from a calibration file: the camera emulator's (``calibration`` and ``plane``, as ``aiko
    emulate camera --calibration-out`` writes it) or a bare plane calibration (``PlaneCalibration.save``), whose
    plane then comes from ``[camera] plane`` / ``plane_offset_m`` (default: the vertical x–z plane at y = 0)."""
    from aiko.devices.camera.calibration import CalibrationError, PlaneCalibration
    from aiko.devices.camera.plane import MarkerPlane
    from aiko.devices.camera.red_markers import PixelsToWorld

    if not path.exists():
        raise CalibrationError(f"camera calibration file not found: {path}")
    try:
        data = json.loads(read_config_text(path, "camera calibration file"))
        calibration = PlaneCalibration.from_dict(data["calibration"] if "calibration" in data else data)
        own = data.get("plane")
        own_plane = None
        if own is not None:
            own_plane = MarkerPlane(*(np.asarray(own[k], dtype=float) for k in ("origin_m", "u_axis", "v_axis")))
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise CalibrationError(f"{path}: not a plane calibration ({exc})") from None
    if own_plane is not None:
        if plane is not None or plane_offset_m != 0.0:
            raise ConfigError(f"{path} carries its own plane: remove camera.plane / camera.plane_offset_m")
        return PixelsToWorld(calibration, own_plane)
    chosen = MarkerPlane.table(plane_offset_m) if plane == "table" else MarkerPlane.vertical_xz(plane_offset_m)
    return PixelsToWorld(calibration, chosen)


class RealCamera:
    """The sensor task's parts: ``open_with_clock`` starts the capture, ``close`` stops it, ``finish`` observes."""

    def __init__(self, experiment: BenchExperiment, log_path: str | Path | None) -> None:
        from aiko.devices.camera.source import FrameSource

        cam = experiment.camera
        if cam is None or cam.is_synthetic:
            raise ConfigError("the real bench films with a real camera: set camera.source to an OpenCV source")
        if log_path is None:
            raise AikoError("the real camera writes its video beside the run's log: give the log path")
        assert cam.calibration is not None  # the settings require it for a real source
        self.experiment = experiment
        self.settings = cam
        calibration = Path(cam.calibration)
        if not calibration.is_absolute():
            calibration = experiment.path.parent / calibration
        self.to_world = load_pixels_to_world(calibration, cam.plane, cam.plane_offset_m)
        self.video = video_path_for(log_path)
        # opened now, before the arm moves: an unopenable source is a one-line error before anything starts
        self.source = FrameSource(
            resolve_source(cam.source, experiment.path),
            width_px=cam.width_px,
            height_px=cam.height_px,
            fps=None if isinstance(cam.source, str) and not str(cam.source).isdigit() else cam.rate_hz,
        )
        self.capture: Any = None
        self.frames: Any = None
        self.stats: dict[str, Any] = {}
        self._anchor = (0.0, 0)

    def run_now_s(self) -> float:
        run0_s, mono0_ns = self._anchor
        return run0_s + (time.monotonic_ns() - mono0_ns) * 1e-9

    def stamp_ns(self, monotonic_ns: int) -> int:
        """A live frame's grab time (monotonic) on the run's time, less the camera's latency."""
        run0_s, mono0_ns = self._anchor
        return round((run0_s - self.settings.latency_s) * 1e9) + (monotonic_ns - mono0_ns)

    def open_with_clock(self, clock: Clock, edge_timeout_s: float = 0.05) -> None:
        from aiko.devices.camera.capture import BackgroundCapture

        first = clock.now_s()
        deadline = time.monotonic() + edge_timeout_s
        now = first
        while now == first and time.monotonic() < deadline:  # the controller's time advances in RTDE periods
            now = clock.now_s()
        self._anchor = (now, time.monotonic_ns())
        self.capture = BackgroundCapture(
            self.source,
            self.video,
            rate_hz=self.source.fps if self.source.fps > 0 else self.settings.rate_hz,
            now_s=self.run_now_s,
            stamp_ns=self.stamp_ns,
            queue_frames=self.settings.queue_frames,
        ).start()
        log.info("camera: %s → %s", self.source.description, self.video)

    def close(self) -> None:
        if self.capture is not None:
            self.frames = self.capture.stop()
        else:
            self.source.close()

    def finish(self, run: FinishedRun, recorder: Recorder, clock: Clock) -> None:
        from aiko.devices.camera.capture import read_back

        capture = self.capture.stats.as_payload() if self.capture is not None else {}
        self.stats = {"source": self.source.description, "video": str(self.video), "capture": capture}
        if self.frames is None or not self.frames.stamps_ns:
            self.stats.update(frames=0, note="no frames captured")
            return
        if not run.base_poses:
            self.stats.update(frames=0, note="no base poses observed")
            return
        wall0 = time.perf_counter()
        times = np.array([t for t, _ in run.base_poses])
        alphas = np.vstack([a for _, a in run.base_poses])

        def alpha_at(t_s: float) -> np.ndarray:
            return np.array([np.interp(t_s, times, alphas[:, j]) for j in range(6)])

        # a live camera grabs from its start to its stop, a little around the run: observe the run's frames only
        margin_s = 0.5 / self.settings.rate_hz
        inside = [(times[0] - margin_s) * 1e9 <= t <= (times[-1] + margin_s) * 1e9 for t in self.frames.stamps_ns]
        self.stats["frames_outside_run"] = inside.count(False)
        if not any(inside):
            self.stats.update(frames=0, note="no frame inside the run")
            return
        first_s = self.frames.stamps_ns[inside.index(True)] * 1e-9
        pipeline = strain_pipeline(self.experiment, self.to_world, alpha_at, first_s)
        frames = ((f, None) for f, keep in zip(read_back(self.frames), inside, strict=False) if keep)
        self.stats.update(observe_frames(frames, pipeline, recorder, clock))
        self.stats["offline_wall_s"] = time.perf_counter() - wall0

    def summary(self) -> dict[str, Any]:
        return dict(self.stats)
