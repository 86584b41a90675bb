"""The bench's camera in HIL: the rod plant's true states are filmed by the synthetic side camera, tracked by the
red-marker tracker and turned into strains by the strain observer — after the run.

Why after the run: rendering a frame, tracking it and running the observer take ~20 ms of CPU per frame (render,
tracking and the compiled observer ~7-8 ms each: ``benchmarks/camera_observer_accuracy.py --fps 50``), a whole
50 Hz frame period of one of the bench PC's two cores, where the UR3 emulator's 200 Hz tick and the bench's loop
run; inside the plant's tick that would stop the rod's real time (and with it the arm's), inside the bench's loop
it would miss deadlines. The plant therefore writes its true states (``/sim/rod/state``: ``q`` at the experiment's
log rate, with the controller's time) to the side file it already writes, and the bench renders, tracks and
observes them once the arm has stopped. The frames' times are the states' times, so ``/bench/markers`` and
``/bench/observed_strain`` sit on the run's clock as if a camera had filmed it live. The camera's rate in HIL is
therefore at most the experiment's log rate. Rendering, tracking and observing run in three threads
(`observe_frames`), which on two cores takes ~0.6 of their sum. Filming starts as soon as the loop has ended and
the arm is deactivated, in a background thread, while the backend closes (ur_rtde's disconnects and the
emulator's exit are ~1 s of waiting); ``finish`` then records what was filmed, or films again if the states it
is given are not the ones filmed (a state line the emulator had not yet written).

What the pipeline is given is what a real bench has: pixels, the plane calibration of the camera (here the exact
one of the synthetic camera) and the base pose (here the plant's, which is the flange pose the arm reports through
the mount). The truth (bead positions, strains) is logged beside the estimates, so the pipeline's own error is
measured on every run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from aiko.core.clock import Clock
from aiko.core.errors import ConfigError
from aiko.core.interfaces import Recorder
from aiko.core.messages import XYZ, Channel, Message, booleans, integer, number, numbers, vectors
from aiko.core.read_ahead import read_ahead
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.messages import STRAIN_AXES
from aiko.robots.rod_bench.sensor_task import FinishedRun

log = logging.getLogger(__name__)

MARKERS = Channel("/bench/markers", Message(
    "aiko.bench.Markers",
    "The camera's red beads on the rod, one message per frame: where the tracker saw them (null where unseen).",
    {
        "t_s": number("run time of the frame", "s"),
        "pixels": vectors("bead centres in the image; null where unseen", ("u", "v"), "px"),
        "visible": booleans("the tracker saw the bead"),
        "world_m": vectors("bead centres on the calibrated plane, world frame; null where unseen", XYZ, "m"),
        "true_m": vectors("the beads' true centres (HIL: from the plant)", XYZ, "m", optional=True),
    },
))  # fmt: skip
OBSERVED_STRAIN = Channel("/bench/observed_strain", Message(
    "aiko.bench.ObservedStrain",
    "The strain observer's estimate from one frame's beads (paper 004, X).",
    {
        "t_s": number("run time of the frame", "s"),
        "strain": vectors("estimated nodal strains [kappa; eps], base first", STRAIN_AXES, "1/m, 1"),
        "centreline_m": vectors("the observer's rod centreline, world frame", XYZ, "m", optional=True),
        "true_strain": vectors("the plant's true nodal strains (HIL)", STRAIN_AXES, "1/m, 1", optional=True),
        "markers_seen": integer("beads seen in the frame"),
        "iterations": integer("observer iterations"),
        "base_alpha": numbers(
            "the base pose the observer clamped the rod at (the arm's, at the frame's time) [rotation vector (rad); "
            "position (m)], world frame",
            optional=True,
        ),
    },
))  # fmt: skip
MARKER_COMPLIANCE_M_PER_N = 1e-3  # as the camera's own end-to-end test (tests/aiko/devices/camera/test_emulator.py)


def marker_arcs(experiment: BenchExperiment) -> np.ndarray:
    cam = experiment.camera
    assert cam is not None
    if cam.marker_arc_m is not None:
        return np.asarray(cam.marker_arc_m, dtype=float)
    return np.linspace(0.1, 0.975, cam.markers) * experiment.scenario.model.rod.length_m


def strain_pipeline(experiment: BenchExperiment, to_world: Any, alpha_at: Callable[[float], np.ndarray], t0_s: float):
    """The tracker and the observer of the experiment's rod and beads; ``alpha_at(run time)`` the base pose, ``t0_s``
    the first frame's run time (the pipeline counts time from its first frame)."""
    from aiko.devices.camera.pipeline import StrainPipeline, observer_model
    from aiko.devices.camera.red_markers import RedMarkerSettings, RedMarkerTracker

    model = experiment.scenario.model
    arc = marker_arcs(experiment)
    tracker = RedMarkerTracker(RedMarkerSettings(len(arc)), marker_arc_m=arc, to_world=to_world)
    return StrainPipeline(
        tracker,
        observer_model(model.rod, model.n_sections, arc, model.gravity_m_s2),
        arc,
        lambda t_s: alpha_at(t0_s + t_s),
        marker_compliance_m_per_n=MARKER_COMPLIANCE_M_PER_N,
    )


def _or_none(values: np.ndarray) -> list:
    return np.where(np.isfinite(values), values, None).tolist()


class RecordSink(Protocol):
    """Where `observe_frames` puts its records: the run's recorder, or a list kept for later (`_KeptRecords`)."""

    def record(self, channel: Any, t_ns: int, payload: dict[str, Any]) -> None: ...


def observe_frames(
    frames: Iterable[tuple[Any, tuple[np.ndarray, np.ndarray] | None]],
    pipeline: Any,
    recorder: RecordSink,
    clock: Clock,
) -> dict[str, Any]:
    """Each (frame, truth) through the pipeline into ``/bench/markers`` and ``/bench/observed_strain``, stamped at
    the frame's run time (``frame.t_ns``); ``truth`` (the beads' true centres (k, 3), the true strains (n+1, 6)) is
    logged beside the estimates and measured against them when given (HIL), None on a real bench.

    Three stages, each in its own thread and in frame order: the frames (HIL renders them; a real bench decodes its
    video), tracking, and the observer here. Each holds the interpreter only briefly (OpenCV on whole images, the
    compiled observer releases it), so on two cores the three take ~0.6 of the time they take one after the other,
    with the same records: every stage sees the frames in the same order as before (`read_ahead`)."""
    n, failed, marker_err, strain_err = 0, 0, [], []
    framed = read_ahead(frames, name="camera-frames")
    for frame, truth, (obs, alpha) in read_ahead(_tracked(framed, pipeline), name="camera-tracking"):
        n += 1
        t_s = frame.t_ns * 1e-9
        est = pipeline.observe(obs, alpha)
        seen = obs.visible & np.all(np.isfinite(obs.world_m), axis=1)
        markers = {"t_s": t_s, "pixels": _or_none(obs.pixels), "visible": obs.visible.tolist()}
        markers["world_m"] = _or_none(obs.world_m)
        if truth is not None:
            markers["true_m"] = truth[0].tolist()
            if seen.any():
                marker_err.append(float(np.max(np.linalg.norm(obs.world_m[seen] - truth[0][seen], axis=1))))
        recorder.record(MARKERS, clock.stamp_ns(t_s), markers)
        if est.strain_nodes is None:
            failed += 1
            continue
        strain = {"t_s": t_s, "strain": est.strain_nodes.tolist()}
        if est.centreline_m is not None:
            strain["centreline_m"] = est.centreline_m.tolist()  # the observer's rod, for the dashboard
        if truth is not None:
            strain["true_strain"] = truth[1].tolist()
            strain_err.append(float(np.max(np.abs(est.strain_nodes[:, 1] - truth[1][:, 1]))))
        strain.update(markers_seen=int(seen.sum()), iterations=est.iterations)
        if est.base_alpha is not None:
            strain["base_alpha"] = est.base_alpha.tolist()
        recorder.record(OBSERVED_STRAIN, clock.stamp_ns(t_s), strain)
    return {
        "frames": n,
        "observer_failed": failed,
        "markers": pipeline.tracker.settings.n_markers,
        "marker_error_max_mm": 1e3 * max(marker_err) if marker_err else None,
        "kappa_y_error_max_per_m": max(strain_err) if strain_err else None,
    }


def _tracked(frames: Iterable[tuple[Any, Any]], pipeline: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(frame, truth, (markers, base pose)): `observe_frames`' tracking stage."""
    for frame, truth in frames:
        yield frame, truth, pipeline.track(frame)


class _KeptRecords:
    """A recorder that keeps what it is given (the frames filmed in a background thread, recorded by `finish`)."""

    def __init__(self) -> None:
        self.records: list[tuple[Any, int, dict[str, Any]]] = []

    def record(self, channel: Any, t_ns: int, payload: dict[str, Any]) -> None:
        self.records.append((channel, t_ns, payload))


@dataclass(frozen=True)
class _Filmed:
    chosen: list[tuple[float, np.ndarray]]
    records: list[tuple[Any, int, dict[str, Any]]]
    stats: dict[str, Any]

    def films(self, chosen: list[tuple[float, np.ndarray]]) -> bool:
        """These are the states filmed, to the last bit."""
        return len(chosen) == len(self.chosen) and all(
            t == t_filmed and np.array_equal(q, q_filmed)
            for (t, q), (t_filmed, q_filmed) in zip(chosen, self.chosen, strict=True)
        )


class HilCamera:
    """Films the plant's states once the loop has ended (see the module doc); ``finish`` records the two channels.

    Whatever filming needs besides the states is loaded in a background thread from construction until ``open``
    (called before the run's time 0, once the emulator runs): the camera's modules (~0.5 s of imports) and the
    compiled kernels the film and the observer load from numba's cache (~0.4 s), by one frame of the initial state
    through a pipeline that is thrown away. The bench's main thread spends that time waiting for the UR3 emulator to
    start and for the approach move, so the work after the run is that much shorter; nothing of it reaches the
    log."""

    def __init__(self, experiment: BenchExperiment) -> None:
        if experiment.camera is None:
            raise ConfigError("the bench camera needs a [camera] table")
        if not experiment.camera.is_synthetic:
            raise ConfigError('HIL films the plant with the synthetic camera: set camera.source = "synthetic"')
        self.experiment = experiment
        self.stats: dict[str, Any] = {}
        self._filming: threading.Thread | None = None  # `start_finish`'s
        self._filmed: _Filmed | None = None
        self._warm_up_thread = threading.Thread(target=self._warm_up, name="camera-warm-up", daemon=True)
        self._warm_up_thread.start()

    def _warm_up(self) -> None:
        try:
            q = np.asarray(self.experiment.scenario.initial_state.q, dtype=float)
            _film, _camera, pipeline, frames = self._film([(0.0, q)])
            for frame, _truth in frames:
                pipeline.process(frame)
        except Exception:  # noqa: BLE001  (finish does the same work and reports what fails there)
            log.debug("camera warm-up failed; the kernels load after the run instead", exc_info=True)

    def open(self) -> None:
        """Before the run's time 0: the warm-up is over (it must not share the interpreter with the loop)."""
        self._warm_up_thread.join()

    def _film(self, chosen: list[tuple[float, np.ndarray]]) -> tuple[Any, Any, Any, Iterator[tuple[Any, Any]]]:
        """The side camera framed on the states ``chosen`` ((run time, q) at the camera's rate), its pipeline, and
        the frames with their truths (the beads' true centres, the true nodal strains)."""
        from aiko.devices.camera.calibration import CameraIntrinsics
        from aiko.devices.camera.plane import calibration_from_pose
        from aiko.devices.camera.red_markers import PixelsToWorld
        from aiko.devices.camera.rod_film import RodFilm, frame_side_camera
        from aiko.devices.camera.source import Frame
        from aiko.devices.camera.synthetic import SyntheticCamera, SyntheticCameraSettings

        cam = self.experiment.camera
        assert cam is not None
        model = self.experiment.scenario.model
        film = RodFilm(model.rod, model.n_sections, marker_arcs(self.experiment))
        intrinsics = CameraIntrinsics(np.array([[800.0, 0, 320], [0, 800, 240], [0, 0, 1]]), np.zeros(5), (640, 480))
        everything = np.vstack([film.scene(q).centreline_m for _, q in chosen[:: max(len(chosen) // 20, 1)]])
        pose, plane = frame_side_camera(everything, intrinsics)
        camera = SyntheticCamera(intrinsics, pose, SyntheticCameraSettings(fps=cam.rate_hz, noise_sigma=cam.noise))
        to_world = PixelsToWorld(calibration_from_pose(intrinsics, pose, plane), plane)
        frames_q = {round(t * 1e9): q for t, q in chosen}
        pipeline = strain_pipeline(self.experiment, to_world, lambda t_s: self._alpha_at(frames_q, t_s), chosen[0][0])

        def frames() -> Iterator[tuple[Any, Any]]:
            for index, (t_s, q) in enumerate(chosen):
                k = min(index + 1, len(chosen) - 1)
                scenes = film.exposure(chosen[max(index - 1, 0)][1], q, chosen[k][1], cam.blur_samples)
                yield Frame(index, round(t_s * 1e9), camera.render(scenes)), (film.markers_m(q), film.strain_nodes(q))

        return film, camera, pipeline, frames()

    def _chosen(self, run: FinishedRun) -> list[tuple[float, np.ndarray]]:
        """The states filmed: (run time, q) at the camera's rate, from the states (at the log rate)."""
        cam = self.experiment.camera
        assert cam is not None
        period_s = 1.0 / cam.rate_hz
        chosen: list[tuple[float, np.ndarray]] = []
        for t_s, payload in run.rod_states:
            if not chosen or t_s - chosen[-1][0] >= period_s - 1e-6:
                chosen.append((t_s, np.asarray(payload["q"], dtype=float)))
        return chosen

    def _observe(self, chosen: list[tuple[float, np.ndarray]], clock: Clock) -> _Filmed:
        """Film, track and observe ``chosen``; the two channels' records are kept, not yet recorded."""
        kept = _KeptRecords()
        _film, _camera, pipeline, frames = self._film(chosen)
        return _Filmed(chosen, kept.records, observe_frames(frames, pipeline, kept, clock))

    def start_finish(self, run: FinishedRun, clock: Clock) -> None:
        """After the loop, before the backend closes: film ``run``'s states in a background thread (the close
        is mostly waiting), for `finish` to record."""
        self._warm_up_thread.join()
        chosen = self._chosen(run)
        if not chosen:
            return

        def film() -> None:
            try:
                self._filmed = self._observe(chosen, clock)
            except Exception:  # noqa: BLE001  (finish films again and reports what fails there)
                log.debug("filming while the backend closed failed; filming after it", exc_info=True)

        self._filming = threading.Thread(target=film, name="camera-film", daemon=True)
        self._filming.start()

    def finish(self, run: FinishedRun, recorder: Recorder, clock: Clock) -> None:
        self._warm_up_thread.join()  # a run that ended before open (a failed start): still one pipeline at a time
        if not run.rod_states:
            self.stats = {"frames": 0, "note": "the plant wrote no rod states"}
            return
        wall0 = time.perf_counter()
        if self._filming is not None:
            self._filming.join()
        chosen = self._chosen(run)
        filmed, early = self._filmed, True
        if filmed is None or not filmed.films(chosen):
            filmed, early = self._observe(chosen, clock), False
        for channel, t_ns, payload in filmed.records:
            recorder.record(channel, t_ns, payload)
        cam = self.experiment.camera
        assert cam is not None
        self.stats = dict(filmed.stats)
        self.stats.update(rate_hz=cam.rate_hz, offline_wall_s=time.perf_counter() - wall0, filmed_while_closing=early)

    @staticmethod
    def _alpha_at(frames_q: dict[int, np.ndarray], t_s: float) -> np.ndarray:
        """The base pose at a frame's run time (from the nearest state filmed)."""
        key = round(t_s * 1e9)
        nearest = min(frames_q, key=lambda k: abs(k - key))
        return frames_q[nearest][0:6]

    def summary(self) -> dict[str, Any]:
        return dict(self.stats)
