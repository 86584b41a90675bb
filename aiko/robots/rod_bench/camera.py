"""The bench's camera in HIL: the rod plant's true states are filmed by the synthetic side camera, tracked by the
red-marker tracker and turned into strains by the strain observer — live, beside the run, in a process of its own.

Why not in the loop: rendering a frame, tracking it and running the observer take ~14 ms of CPU per frame (render
~3, track ~7, observe ~4 ms here), most of a 50 Hz frame period of one of the bench PC's two cores, where the UR3
emulator's 200 Hz tick and the bench's loop run; inside the plant's tick that would stop the rod's real time (and
with it the arm's), inside the bench's loop it would miss deadlines. The plant writes its true states
(``/sim/rod/state``: ``q`` at the experiment's log rate, with the controller's time) to the side file it already
writes, and `camera_worker` films them from there as they are written, at a lower priority than the emulator and
the loop: when the arm stops, only the last frames are left (0.45 s after the close for bench_stick, against 1.5-2
s when filming started after the loop). The frames' times are the states' times, so ``/bench/markers`` and
``/bench/observed_strain`` sit on the run's clock as a camera filming it would. The camera's rate in HIL is
therefore at most the experiment's log rate, and the camera is framed before the run, on the experiment's own
simulation (`framing_states`).

Filming in this process remains, with the same records to the last bit: when the worker fails, or filmed other
states than the run's final ones (``finish`` checks), the bench films the states itself (`observe_frames`: render,
track and observe in three threads, ~0.6 of their sum on two cores), and without a worker (``live=False``) filming
starts when the loop has ended, in a background thread, while the backend closes.

What the pipeline is given is what a real bench has: pixels, the plane calibration of the camera (here the exact
one of the synthetic camera) and the base pose (here the plant's, which is the flange pose the arm reports through
the mount). The truth (bead positions, strains) is logged beside the estimates, so the pipeline's own error is
measured on every run.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from aiko.core.clock import Clock
from aiko.core.errors import ConfigError
from aiko.core.interfaces import Recorder
from aiko.core.messages import XYZ, Channel, Message, booleans, integer, number, numbers, vectors
from aiko.core.read_ahead import read_ahead
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.messages import STRAIN_AXES
from aiko.robots.rod_bench.sensor_task import FinishedRun

if TYPE_CHECKING:
    from aiko.robots.rod_bench.camera_worker_client import CameraWorker

log = logging.getLogger(__name__)
T = TypeVar("T")

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


FRAMING_SAMPLES = 21  # the simulated states the side camera is framed on, evenly over the experiment


def framing_states(experiment: BenchExperiment) -> list[np.ndarray]:
    """The rod's configurations q over the experiment as the simulator runs it (`RodStepper`, the file's base
    motion): what the side camera is framed on before the run. ~0.3 s of CPU for a 4 s bench file."""
    from aiko.robots.rod_bench.rod_stepper import RodStepper

    stepper = RodStepper(experiment.scenario)
    states = [stepper.state.q.copy()]
    for t_s in np.linspace(0.0, experiment.scenario.duration_s, FRAMING_SAMPLES)[1:]:
        stepper.advance_to(float(t_s))
        states.append(stepper.state.q.copy())
    return states


def _with_neighbours(items: Iterable[T]) -> Iterator[tuple[T, T, T]]:
    """(previous, item, next) of each item in order, the first's previous and the last's next being itself: each
    comes once the next is known."""
    iterator = iter(items)
    try:
        current = next(iterator)
    except StopIteration:
        return
    previous = current
    for following in iterator:
        yield previous, current, following
        previous, current = current, following
    yield previous, current, current


class _BasePoses:
    """The base pose at each frame's time (its state's q[0:6]), filled as the frames are made; `at` is the
    pipeline's lookup (time since the first frame), answered from the nearest state filmed so far — the frame's
    own, which is added before the frame is tracked. The frames are made in one thread and tracked in another
    (`observe_frames`), so both go through a lock (without it, a lookup met a frame being added: "dictionary
    changed size during iteration", seen beside two busy loops)."""

    def __init__(self) -> None:
        self._by_ns: dict[int, np.ndarray] = {}
        self._t0_s: float | None = None
        self._lock = threading.Lock()

    def add(self, t_s: float, q: np.ndarray) -> None:
        with self._lock:
            if self._t0_s is None:
                self._t0_s = t_s
            self._by_ns[round(t_s * 1e9)] = q[0:6]

    def at(self, t_since_first_s: float) -> np.ndarray:
        with self._lock:
            assert self._t0_s is not None
            key = round((self._t0_s + t_since_first_s) * 1e9)
            return self._by_ns[min(self._by_ns, key=lambda k: abs(k - key))]


class HilCamera:
    """Films the plant's states (see the module doc); ``finish`` records the two channels. ``live``: a worker
    process films them during the run (`camera_worker`), started here so that it is warm by the run's start.

    Without a worker, whatever filming needs besides the states is loaded in a background thread from construction
    until ``open`` (called before the run's time 0, once the emulator runs): the camera's modules (~0.5 s of
    imports), the framing (`framing_states`) and the compiled kernels the film and the observer load from numba's
    cache (~0.4 s), by one frame of the initial state through a pipeline that is thrown away. The bench's main
    thread spends that time waiting for the UR3 emulator to start and for the approach move; nothing of it reaches
    the log."""

    def __init__(self, experiment: BenchExperiment, *, live: bool = False) -> None:
        if experiment.camera is None:
            raise ConfigError("the bench camera needs a [camera] table")
        if not experiment.camera.is_synthetic:
            raise ConfigError('HIL films the plant with the synthetic camera: set camera.source = "synthetic"')
        self.experiment = experiment
        self.stats: dict[str, Any] = {}
        self._filming: threading.Thread | None = None  # `start_finish`'s
        self._filmed: _Filmed | None = None
        self._worker: CameraWorker | None = None
        if live:  # the worker warms up in its own process; this one loads the camera only if it has to film
            from aiko.robots.rod_bench.camera_worker_client import CameraWorker

            self._worker = CameraWorker(experiment)
        self._warm_up_thread = threading.Thread(
            target=self._warm_up if not live else lambda: None, name="camera-warm-up", daemon=True
        )
        self._warm_up_thread.start()

    def _warm_up(self) -> None:
        try:
            q = np.asarray(self.experiment.scenario.initial_state.q, dtype=float)
            pipeline, frames = self._film([(0.0, q)])
            for frame, _truth in frames:
                pipeline.process(frame)
        except Exception:  # noqa: BLE001  (finish does the same work and reports what fails there)
            log.debug("camera warm-up failed; the kernels load after the run instead", exc_info=True)

    def open(self) -> None:
        """Before the run's time 0: the warm-up is over (it must not share the interpreter with the loop)."""
        self._warm_up_thread.join()

    def follow(self, side_file: Path, clock: Clock, duration_s: float) -> None:
        """Once the run's clock is known (before its time 0): the live camera films the plant's states from its
        side file as they are written (`camera_worker`). Without a worker (not ``live``), nothing."""
        if self._worker is not None:
            self._worker.follow(side_file, float(getattr(clock, "zero_s", 0.0)), duration_s)

    def close(self) -> None:
        """After the backend closed (the plant's file is complete): the live camera films its last states."""
        if self._worker is not None:
            self._worker.end()

    def _film(self, chosen: Iterable[tuple[float, np.ndarray]]) -> tuple[Any, Iterator[tuple[Any, Any]]]:
        """The pipeline of the side camera (`_framed`) and the frames of the states ``chosen`` ((run time, q) at
        the camera's rate, in order; any iterable: the worker's grows as the plant writes) with their truths (the
        beads' true centres, the true nodal strains). A frame's motion blur takes its neighbours' states, so each
        frame comes once the next state is known (or the states end)."""
        from aiko.devices.camera.source import Frame
        from aiko.devices.camera.synthetic import SyntheticCamera, SyntheticCameraSettings

        cam = self.experiment.camera
        assert cam is not None
        film, intrinsics, pose, to_world = self._framed
        # a camera of its own for each film: its grey-level noise starts from its seed every time
        camera = SyntheticCamera(intrinsics, pose, SyntheticCameraSettings(fps=cam.rate_hz, noise_sigma=cam.noise))
        poses = _BasePoses()
        pipeline = strain_pipeline(self.experiment, to_world, poses.at, 0.0)

        def frames() -> Iterator[tuple[Any, Any]]:
            for index, (before, (t_s, q), after) in enumerate(_with_neighbours(chosen)):
                poses.add(t_s, q)
                scenes = film.exposure(before[1], q, after[1], cam.blur_samples)
                yield Frame(index, round(t_s * 1e9), camera.render(scenes)), (film.markers_m(q), film.strain_nodes(q))

        return pipeline, frames()

    @functools.cached_property
    def _framed(self) -> tuple[Any, Any, Any, Any]:
        """The rod's film, the side camera's intrinsics and pose, and its pixel-to-world map: the camera framed
        before the run on the experiment's own simulation (`framing_states`), since a camera filming live cannot
        wait for the run's states; the HIL plant follows the simulation closely (the frame keeps a 30 % margin)."""
        from aiko.devices.camera.calibration import CameraIntrinsics
        from aiko.devices.camera.plane import calibration_from_pose
        from aiko.devices.camera.red_markers import PixelsToWorld
        from aiko.devices.camera.rod_film import RodFilm, frame_side_camera

        model = self.experiment.scenario.model
        film = RodFilm(model.rod, model.n_sections, marker_arcs(self.experiment))
        intrinsics = CameraIntrinsics(np.array([[800.0, 0, 320], [0, 800, 240], [0, 0, 1]]), np.zeros(5), (640, 480))
        everything = np.vstack([film.scene(q).centreline_m for q in framing_states(self.experiment)])
        pose, plane = frame_side_camera(everything, intrinsics)
        return film, intrinsics, pose, PixelsToWorld(calibration_from_pose(intrinsics, pose, plane), plane)

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
        pipeline, frames = self._film(chosen)
        return _Filmed(chosen, kept.records, observe_frames(frames, pipeline, kept, clock))

    def start_finish(self, run: FinishedRun, clock: Clock) -> None:
        """After the loop, before the backend closes: film ``run``'s states in a background thread (the close
        is mostly waiting), for `finish` to record."""
        self._warm_up_thread.join()
        if self._worker is not None and self._worker.following:
            return  # filming live already
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
        chosen = self._chosen(run)
        filmed, when = self._filmed_live(clock, len(chosen)), "live"
        if filmed is None:
            if self._filming is not None:
                self._filming.join()
            filmed, when = self._filmed, "while closing"
        if filmed is None or not filmed.films(chosen):
            filmed, when = self._observe(chosen, clock), "after the close"
        for channel, t_ns, payload in filmed.records:
            recorder.record(channel, t_ns, payload)
        cam = self.experiment.camera
        assert cam is not None
        self.stats = dict(filmed.stats)
        self.stats.update(rate_hz=cam.rate_hz, offline_wall_s=time.perf_counter() - wall0, filmed=when)
        if self._worker is not None and when != "live":
            self.stats["live_camera"] = self._worker.outcome

    def _filmed_live(self, clock: Clock, frames: int) -> _Filmed | None:
        """What the live camera filmed, its records stamped on the run's clock (from their run times), or None
        (no worker, it failed, or filming the run's ``frames`` here is sooner than waiting for it)."""
        if self._worker is None:
            return None
        done = self._worker.results(frames)
        if done is None:
            return None
        channels = {MARKERS.topic: MARKERS, OBSERVED_STRAIN.topic: OBSERVED_STRAIN}
        records = [(channels[topic], clock.stamp_ns(payload["t_s"]), payload) for topic, payload in done["records"]]
        chosen = [(float(t_s), np.asarray(q, dtype=float)) for t_s, q in done["chosen"]]
        return _Filmed(chosen, records, done["stats"])

    def summary(self) -> dict[str, Any]:
        return dict(self.stats)
