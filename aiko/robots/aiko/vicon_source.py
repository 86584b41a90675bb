"""Aiko as the subject of an emulated Vicon: one segment per link, one marker per link, poses from a running
simulation of an experiment or from a recorded log.

Robot code, so it lives outside :mod:`aiko.devices.vicon` (which never imports it). Conventions are the
motion-capture ones of :mod:`aiko.devices.mocap`: link ``k`` (1-based, as in the papers) is segment ``link{k}``,
its pose the link centre and orientation (segment → world), which ``aiko.devices.vicon.client.ViconMocap`` reads
back as metres and w, x, y, z quaternions. Link 1 is the root; link ``k`` is the child of link ``k − 1``. Marker
``link{k}_m`` sits on the link's surface at ``MARKER_OFFSET`` in the link frame.

Where the poses come from:

- ``ExperimentPoses``: the experiment runs on a backend on the wall clock (in a child process, repeated when it
  ends). Backends that report link poses (``sim``) give them directly; the others (``kinematic``) give joint
  angles, shaped into link poses by :func:`aiko.robots.aiko.shape.body_shape` and laid on the ground along world x.
- ``LogPoses``: a log of ``aiko run``: its ``/sim/link_poses`` where a simulator wrote them, else its
  ``/joint_feedback`` shaped the same way; replayed on the wall clock, from the start again when it ends.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from aiko.core.errors import ConfigError
from aiko.devices.vicon.model import MarkerSpec, SegmentSpec, SubjectFrame, SubjectSpec
from aiko.robots.aiko.description import RobotDescription

log = logging.getLogger(__name__)

MARKER_RADIUS_M = 0.007
# The kinematic placement: link frames have the centre line along their z, laid along world x (a rotation of
# +90° about y), so the link's −x points up; the marker sits on top.
GROUND_ROTATION = Rotation.from_euler("y", 90, degrees=True)


def marker_offset_m(robot: RobotDescription) -> np.ndarray:
    return np.array([-(robot.link_radius_m + MARKER_RADIUS_M), 0.0, 0.0])


def aiko_subject(robot: RobotDescription, name: str = "aiko") -> SubjectSpec:
    n = robot.n_links
    r_mm, half_mm = robot.link_radius_m * 1e3, robot.link_length_m * 500.0
    bounds = (-r_mm, -r_mm, -half_mm, r_mm, r_mm, half_mm)
    segments = tuple(SegmentSpec(f"link{k}", f"link{k - 1}" if k > 1 else None, bounds) for k in range(1, n + 1))
    markers = tuple(MarkerSpec(f"link{k}_m", f"link{k}") for k in range(1, n + 1))
    return SubjectSpec(name, segments, markers)


def shaped_poses(robot: RobotDescription, angle_h: np.ndarray, angle_v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Link poses (m, wxyz) from joint angles, link 1 at the origin lying on the ground along world x."""
    from aiko.robots.aiko.shape import body_shape

    q = GROUND_ROTATION.as_quat(scalar_first=True)
    shape = body_shape(robot, angle_h, angle_v, 1, np.array([0.0, 0.0, robot.link_radius_m]), q)
    return shape.positions_m, shape.quaternions_wxyz


class AikoFrameSource:
    """A :class:`~aiko.devices.vicon.model.FrameSource` of one subject from a pose provider."""

    def __init__(self, robot: RobotDescription, poses: PoseProvider, subject: str = "aiko") -> None:
        self.robot = robot
        self.poses = poses
        self.subject = aiko_subject(robot, subject)
        self._offset = marker_offset_m(robot)

    def subjects(self) -> Sequence[SubjectSpec]:
        return (self.subject,)

    def frame(self, t_s: float) -> Mapping[str, SubjectFrame]:
        poses = self.poses.at(t_s)
        frame = SubjectFrame()
        if poses is not None:
            positions_m, quats = poses
            rotations = Rotation.from_quat(np.asarray(quats), scalar_first=True).as_matrix()
            for k in range(min(len(positions_m), self.robot.n_links)):
                x, rot = np.asarray(positions_m[k], dtype=float), rotations[k]
                if not np.all(np.isfinite(x)):
                    continue
                frame.segments[f"link{k + 1}"] = (x * 1e3, rot)
                frame.markers[f"link{k + 1}_m"] = (x + rot @ self._offset) * 1e3
        return {self.subject.name: frame}


class PoseProvider:
    def at(self, t_s: float) -> tuple[np.ndarray, np.ndarray] | None:  # (n, 3) m, (n, 4) wxyz
        raise NotImplementedError

    def close(self) -> None:
        """Stop any thread behind the poses."""


class ExperimentPoses(PoseProvider):
    """The experiment running on ``backend`` on the wall clock, in a child process; ``at`` gives the newest poses.

    A child process, not a thread: a physics backend holds the GIL for milliseconds at a time, and in the server's
    process it starved the frame thread (measured: 74 of 100 Hz with ``--backend sim``). The child
    (``python -m aiko.robots.aiko.vicon_source``) writes one JSON line of link poses per ``rate_hz`` tick; a thread here
    keeps the newest (a blocking pipe read releases the GIL).
    """

    def __init__(self, experiment_path: str, backend: str = "kinematic", rate_hz: float = 100.0) -> None:
        from aiko.robots.aiko.experiment import load_experiment
        from aiko.robots.aiko.plugins import backend_names

        if backend not in backend_names():
            raise ConfigError(f"unknown backend {backend!r}; known backends: {', '.join(backend_names())}")
        self.experiment = load_experiment(experiment_path, {})
        self.robot = self.experiment.robot
        self.backend_name = backend
        self.rate_hz = rate_hz
        self._latest: tuple[np.ndarray, np.ndarray] | None = None
        self.error: str | None = None
        root = str(Path(__file__).resolve().parents[len(__name__.split(".")) - 1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        cmd = [sys.executable, "-m", __name__, str(experiment_path), "--backend", backend, "--rate-hz", repr(rate_hz)]
        self._child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env)
        self._closing = False
        self._thread = threading.Thread(target=self._read, name="vicon-aiko-sim", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._child.stdout is not None
        with self._child.stdout:
            for line in self._child.stdout:
                message = json.loads(line)
                self._latest = (np.asarray(message["p"], dtype=float), np.asarray(message["q"], dtype=float))
        code = self._child.wait()
        if code != 0 and not self._closing:
            self.error = f"the simulation of {self.experiment.path} exited with code {code}"
            log.error("%s; the last poses stay served", self.error)

    def at(self, t_s: float) -> tuple[np.ndarray, np.ndarray] | None:
        return self._latest

    def close(self) -> None:
        self._closing = True
        if self._child.poll() is None:
            self._child.terminate()
            try:
                self._child.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait(timeout=5.0)
        self._thread.join(timeout=5.0)


def run_experiment_poses(experiment_path: str, backend_name: str, rate_hz: float, emit, stop: threading.Event) -> None:
    """Run the experiment on the wall clock again and again until ``stop``; ``emit(positions_m, quats_wxyz)`` at
    ``rate_hz``. Backends without link poses give joint angles, shaped by :func:`shaped_poses`."""
    from aiko.core.clock import WallClock
    from aiko.core.loop import PeriodicTask
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.plugins import create_backend
    from aiko.robots.aiko.run import RunOptions, run_experiment

    experiment = load_experiment(experiment_path, {})
    while not stop.is_set():
        backend = create_backend(backend_name)

        def snapshot(_t_s: float, backend=backend) -> None:
            if stop.is_set():
                raise KeyboardInterrupt  # the loop's own way out: it deactivates the backend
            poses = backend.link_poses()
            if poses is None:
                fb = backend.read()
                poses = shaped_poses(experiment.robot, fb.angle_h_rad, fb.angle_v_rad)
            emit(np.asarray(poses[0], dtype=float), np.asarray(poses[1], dtype=float))

        run_experiment(
            experiment,
            _NullRecorder(),
            RunOptions(backend=backend_name, realtime=True),
            backend=backend,
            clock=WallClock(),
            extra_tasks=[PeriodicTask("vicon-poses", rate_hz, snapshot, priority=90)],
        )


def main(argv: list[str] | None = None) -> int:
    """The child of :class:`ExperimentPoses`: JSON lines {"p": positions_m, "q": quaternions_wxyz} on stdout."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="link poses of an experiment run on the wall clock, as JSON lines")
    parser.add_argument("experiment", help="experiment TOML file")
    parser.add_argument("--backend", default="kinematic", help="backend that runs it")
    parser.add_argument("--rate-hz", type=float, default=100.0, help="poses per second")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def emit(positions_m: np.ndarray, quats: np.ndarray) -> None:
        sys.stdout.write(json.dumps({"p": positions_m.tolist(), "q": quats.tolist()}) + "\n")
        sys.stdout.flush()

    try:
        run_experiment_poses(args.experiment, args.backend, args.rate_hz, emit, stop)
    except BrokenPipeError:  # the emulator went away
        return 0
    return 0


class _NullRecorder:
    """The emulator's own run keeps no log."""

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        pass

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        pass


class LogPoses(PoseProvider):
    """Link poses recorded by ``aiko run``, replayed on the wall clock from the log's first pose, looping."""

    def __init__(self, path: str | Path, robot: RobotDescription | None = None) -> None:
        from aiko.log import LogReader

        reader = LogReader(path)
        if robot is None:
            robot = _robot_of(reader)
        self.robot = robot
        times: list[float] = []
        positions: list[np.ndarray] = []
        quats: list[np.ndarray] = []
        if reader.has("/sim/link_poses"):
            for _, payload in reader.messages("/sim/link_poses"):
                if "quaternion_wxyz" not in payload:
                    raise ConfigError(f"{path}: /sim/link_poses has no quaternions (a planar simulator's log)")
                times.append(float(payload["t_s"]))
                positions.append(np.asarray(payload["position_m"], dtype=float).reshape(-1, 3))
                quats.append(np.asarray(payload["quaternion_wxyz"], dtype=float).reshape(-1, 4))
            self.kind = "/sim/link_poses"
        elif reader.has("/joint_feedback"):
            for _, payload in reader.messages("/joint_feedback"):
                p, q = shaped_poses(robot, np.asarray(payload["angle_h_rad"]), np.asarray(payload["angle_v_rad"]))
                times.append(float(payload["t_s"]))
                positions.append(p)
                quats.append(q)
            self.kind = "/joint_feedback"
        else:
            raise ConfigError(f"{path}: no /sim/link_poses or /joint_feedback to take link poses from")
        if len(times) < 1:
            raise ConfigError(f"{path}: the log holds no link poses")
        order = np.argsort(times, kind="stable")
        t = np.asarray(times)[order]
        self.times_s = t - t[0]
        self.positions_m = np.stack([positions[i] for i in order])
        self.quaternions_wxyz = np.stack([quats[i] for i in order])
        self.duration_s = float(self.times_s[-1])

    def at(self, t_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The recorded poses at ``t_s`` (looped), positions linear and orientations nlerp between samples."""
        if self.duration_s <= 0:
            return self.positions_m[0], self.quaternions_wxyz[0]
        period = self.duration_s + float(np.median(np.diff(self.times_s)))
        t = math.fmod(t_s, period)
        i = int(np.searchsorted(self.times_s, t, side="right")) - 1
        if i >= len(self.times_s) - 1:
            return self.positions_m[-1].copy(), self.quaternions_wxyz[-1].copy()
        t0, t1 = self.times_s[i], self.times_s[i + 1]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
        q0, q1 = self.quaternions_wxyz[i], self.quaternions_wxyz[i + 1]
        q1 = np.where((np.sum(q0 * q1, axis=1) < 0)[:, None], -q1, q1)
        q = (1 - w) * q0 + w * q1
        return (1 - w) * self.positions_m[i] + w * self.positions_m[i + 1], q / np.linalg.norm(q, axis=1)[:, None]


def _robot_of(reader) -> RobotDescription:
    """The robot a log was recorded with (from the experiment and robot description in its metadata)."""
    from aiko.robots.aiko.experiment import experiment_from_log

    return experiment_from_log(reader).robot


if __name__ == "__main__":
    sys.exit(main())
