"""The ``[mocap]`` table of an experiment file, and the motion-capture task it puts into the control loop.

```toml
[mocap]
source = "simulated"          # simulated | vicon | opencv | none
rate_hz = 20.0
links = [6]                   # simulated: 1-based link numbers (the first one is the run's tracked point)
noise_std_m = 0.0005          # simulated
latency_s = 0.0               # simulated: pure delay
dropout_probability = 0.0     # simulated: per sample and body
seed = 0                      # simulated
host = "192.168.10.1:801"     # vicon
subject = "aiko"              # vicon
segments = ["link6"]          # vicon
stale_after_s = 0.25          # vicon/opencv: an older frame reads as occluded
camera = 0                    # opencv: a camera index, or
video = "run.mp4"             # opencv: a video file / image sequence "frames/%04d.png"
calibration = "camera.json"   # opencv: PlaneCalibration saved by aiko.devices.camera.calibration
aruco_dictionary = "DICT_4X4_50"
markers = [{ name = "link6", aruco_id = 7 }, { name = "head", hsv = [170, 10, 80, 255, 60, 255] }]
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from aiko.core.clock import Clock
from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.core.interfaces import Recorder
from aiko.core.loop import PeriodicTask
from aiko.core.mocap import MocapTask, MotionCapture
from aiko.core.registry import register_section
from aiko.robots.aiko.description import RobotDescription


class Experiment(Protocol):
    """What this section needs of the experiment it belongs to (:class:`aiko.robots.aiko.experiment.Experiment`,
    which imports the plug-ins: a protocol here, so the section does not import its loader back)."""

    robot: RobotDescription
    tables: dict[str, dict[str, Any]]

    def settings(self, name: str) -> Any: ...


SOURCES = ("simulated", "vicon", "opencv", "none")


@dataclass(frozen=True)
class MocapSettings:
    source: str = "none"
    rate_hz: float = 20.0
    links: tuple[int, ...] = (6,)
    noise_std_m: float = 0.0
    latency_s: float = 0.0
    dropout_probability: float = 0.0
    seed: int = 0
    host: str = ""
    subject: str = "aiko"
    segments: tuple[str, ...] = ("link6",)
    stale_after_s: float = 0.25
    camera: int | None = None
    video: str | None = None
    calibration: str | None = None
    aruco_dictionary: str = "DICT_4X4_50"
    markers: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    base_dir: str = "."

    def ideal(self) -> MocapSettings:
        """The same tracking from a simulator, without noise, delay or dropouts (replays use it)."""
        return replace(self, source="simulated", noise_std_m=0.0, latency_s=0.0, dropout_probability=0.0)


def parse_mocap(table: Table, experiment: Experiment | None = None) -> MocapSettings:
    source = table.string("source", "simulated", choices=SOURCES)
    n_links = experiment.robot.n_links if experiment is not None else 64
    links_raw = table.number_list("links", [6], min=1, max=n_links)
    if any(v != int(v) for v in links_raw) or not links_raw:
        raise ConfigError(f"{table.source}: mocap.links: give 1-based link numbers (1..{n_links}), e.g. [6]")
    segments = table.raw("segments", ["link6"])
    if not isinstance(segments, list) or not segments or not all(isinstance(s, str) for s in segments):
        raise ConfigError(f'{table.source}: mocap.segments: expected a list of segment names, e.g. ["link6"]')
    markers = table.raw("markers", [])
    if not isinstance(markers, list) or not all(isinstance(m, dict) for m in markers):
        raise ConfigError(f"{table.source}: mocap.markers: expected a list of tables {{ name = ..., aruco_id = ... }}")
    settings = MocapSettings(
        source=source,
        rate_hz=table.number("rate_hz", 20.0, min=0.0, min_exclusive=True, max=1000.0),
        links=tuple(int(v) for v in links_raw),
        noise_std_m=table.number("noise_std_m", 0.0, min=0.0, max=1.0),
        latency_s=table.number("latency_s", 0.0, min=0.0, max=5.0),
        dropout_probability=table.number("dropout_probability", 0.0, min=0.0, max=0.99),
        seed=table.integer("seed", 0, min=0),
        host=table.string("host", ""),
        subject=table.string("subject", "aiko"),
        segments=tuple(segments),
        stale_after_s=table.number("stale_after_s", 0.25, min=0.0, min_exclusive=True, max=10.0),
        camera=table.integer("camera", None, min=0),
        video=table.string("video", None),
        calibration=table.string("calibration", None),
        aruco_dictionary=table.string("aruco_dictionary", "DICT_4X4_50"),
        markers=tuple(markers),
        base_dir=str(Path(table.source).parent) if table.source else ".",
    )
    table.finish()
    if source == "vicon" and not settings.host:
        raise ConfigError(f'{table.source}: mocap.host: required for source = "vicon" (e.g. "192.168.10.1:801")')
    if source == "opencv":
        if (settings.camera is None) == (settings.video is None):
            raise ConfigError(f"{table.source}: mocap: give exactly one of camera (index) or video (file)")
        if not settings.calibration:
            raise ConfigError(f'{table.source}: mocap.calibration: required for source = "opencv"')
        if not settings.markers:
            raise ConfigError(f'{table.source}: mocap.markers: required for source = "opencv"')
    return settings


def parse_mocap_section(table: Table, experiment: Experiment) -> MocapSettings:
    """An experiment without ``[mocap]`` has no motion capture (source = "none"); an empty one, the simulated."""
    if "mocap" not in experiment.tables:
        return MocapSettings(source="none")
    return parse_mocap(table, experiment)


register_section("mocap", parse_mocap_section)


def mocap_settings(experiment: Experiment) -> MocapSettings:
    """The experiment's motion-capture settings (parsed once, when the file was loaded)."""
    settings: MocapSettings = experiment.settings("mocap")
    return settings


def create_mocap(settings: MocapSettings, backend: Any = None, clock_ns: Any = None) -> MotionCapture | None:
    """The motion-capture source the settings describe (None for ``source = "none"``)."""
    if settings.source == "none":
        return None
    if settings.source == "simulated":
        from aiko.devices.mocap.simulated import SimulatedMocap

        if backend is None:
            raise ConfigError('mocap.source = "simulated" needs a simulator backend that reports link poses')
        return SimulatedMocap(
            backend.link_poses,
            settings.links,
            rate_hz=settings.rate_hz,
            noise_std_m=settings.noise_std_m,
            latency_s=settings.latency_s,
            dropout_probability=settings.dropout_probability,
            seed=settings.seed,
        )
    if settings.source == "vicon":
        from aiko.devices.vicon.client import ViconBody, ViconMocap

        kwargs = {"clock_ns": clock_ns} if clock_ns is not None else {}
        return ViconMocap(
            settings.host,
            [ViconBody(settings.subject, s) for s in settings.segments],
            rate_hz=settings.rate_hz,
            stale_after_s=settings.stale_after_s,
            **kwargs,
        )
    from aiko.devices.camera.calibration import PlaneCalibration
    from aiko.devices.camera.markers import HsvRange
    from aiko.devices.camera.opencv_mocap import MarkerSpec, MarkerTracker, OpenCVMocap

    calibration = PlaneCalibration.load(_resolve(settings.base_dir, settings.calibration))
    specs = []
    for i, m in enumerate(settings.markers):
        t = Table(m, f"mocap.markers[{i}]")
        hsv = t.number_list("hsv", None, length=6, min=0, max=255)
        specs.append(
            MarkerSpec(
                t.string("name"),
                t.integer("aruco_id", None, min=0),
                HsvRange(*(int(v) for v in hsv)) if hsv else None,
                t.number("min_area_px", 12.0, min=0.0),
            )
        )
        t.finish()
    source: int | str = settings.camera if settings.camera is not None else _resolve(settings.base_dir, settings.video)
    kwargs = {"clock_ns": clock_ns} if clock_ns is not None else {}
    return OpenCVMocap(
        source,
        MarkerTracker(calibration, specs, settings.aruco_dictionary),
        rate_hz=settings.rate_hz,
        stale_after_s=settings.stale_after_s,
        **kwargs,
    )


def _resolve(base_dir: str, path: str | None) -> str:
    p = Path(path or "")
    return str(p if p.is_absolute() else Path(base_dir) / p)


def mocap_task(
    settings: MocapSettings, backend: Any, recorder: Recorder, clock: Clock
) -> tuple[PeriodicTask | None, MocapTask | None]:
    """A ``PeriodicTask`` for ``aiko.core.loop.ControlLoop`` (None without motion capture), and its MocapTask.

    The source is started here; call ``task_state.source.stop()`` when the run ends.
    """
    source = create_mocap(settings, backend, clock.now_ns if hasattr(clock, "now_ns") else None)
    if source is None:
        return None, None
    source.start()
    state = MocapTask(source, recorder)

    def sample(t_s: float) -> None:
        state(clock.now_ns())

    return PeriodicTask("mocap", settings.rate_hz, sample, priority=30), state
