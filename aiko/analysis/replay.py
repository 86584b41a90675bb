"""Replay: re-drive a simulator with the references exactly as a log recorded them.

The replayed run uses the experiment file, robot description and overrides stored in the log's metadata (plus the
caller's ``--set`` overrides), starts from the logged initial posture, and sends at each reference instant the
reference the original run sent at that instant (same times, same float64 values: the log stores them losslessly).
Its motion capture is the simulator's ideal tracking of the same links (no noise, delay or dropouts), so
``aiko compare`` measures the model, not the tracking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError, ConfigError
from aiko.log import LogReader
from aiko.robots.aiko.experiment import Experiment, experiment_from_log
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences
from aiko.robots.aiko.mocap import mocap_settings
from aiko.robots.aiko.run import RunOptions, record_run

REFERENCES_TOPIC = "/references"
DEFAULT_REPLAY_BACKEND = "sim"


class ReplayError(AikoError):
    """The log lacks what a replay needs."""


class LoggedReferences:
    """A gait that plays back logged references with a zero-order hold (as the joint modules hold them)."""

    def __init__(
        self,
        t_s: np.ndarray,
        angle_h_rad: np.ndarray,
        angle_v_rad: np.ndarray,
        rate_h_rad_s: np.ndarray,
        rate_v_rad_s: np.ndarray,
        initial: JointReferences,
    ) -> None:
        order = np.argsort(t_s, kind="stable")
        self.t_s = np.asarray(t_s, dtype=np.float64)[order]
        self.angle_h_rad = np.asarray(angle_h_rad, dtype=np.float64)[order]
        self.angle_v_rad = np.asarray(angle_v_rad, dtype=np.float64)[order]
        self.rate_h_rad_s = np.asarray(rate_h_rad_s, dtype=np.float64)[order]
        self.rate_v_rad_s = np.asarray(rate_v_rad_s, dtype=np.float64)[order]
        self.initial = initial
        self.initial_posture_source = "given"
        self.n_joints = self.angle_h_rad.shape[1]

    def references(self, t_s: float, feedback: JointFeedback | None = None) -> JointReferences:
        # The last reference sent at or before t (tolerance: loop instants are k·T computed in float64).
        i = int(np.searchsorted(self.t_s, t_s + 1e-9, side="right")) - 1
        if i < 0:
            return JointReferences(
                t_s,
                self.initial.angle_h_rad.copy(),
                self.initial.angle_v_rad.copy(),
                np.zeros(self.n_joints),
                np.zeros(self.n_joints),
            )
        return JointReferences(
            t_s,
            self.angle_h_rad[i].copy(),
            self.angle_v_rad[i].copy(),
            self.rate_h_rad_s[i].copy(),
            self.rate_v_rad_s[i].copy(),
        )

    def initial_posture(self) -> JointReferences:
        return self.initial

    @staticmethod
    def from_log(reader: LogReader, initial_posture: str = "commanded") -> LoggedReferences:
        if not reader.has(REFERENCES_TOPIC):
            raise ReplayError(f"{reader.path} has no {REFERENCES_TOPIC} messages; nothing to replay")
        refs = reader.channel(REFERENCES_TOPIC)
        needed = ("t_s", "angle_h_rad", "angle_v_rad")
        missing = [k for k in needed if k not in refs]
        if missing:
            raise ReplayError(f"{reader.path}: {REFERENCES_TOPIC} lacks fields {missing}")
        h, v = refs["angle_h_rad"], refs["angle_v_rad"]
        zeros = np.zeros_like(h)
        rh = refs["rate_h_rad_s"] if "rate_h_rad_s" in refs else zeros
        rv = refs["rate_v_rad_s"] if "rate_v_rad_s" in refs else zeros
        initial, source = initial_posture_from_log(reader, h.shape[1], initial_posture)
        gait = LoggedReferences(refs["t_s"], h, v, rh, rv, initial)
        gait.initial_posture_source = source
        return gait


POSTURE_CHOICES = ("commanded", "measured")


def initial_posture_from_log(
    reader: LogReader, n_joints: int, prefer: str = "commanded"
) -> tuple[JointReferences, str]:
    """The posture the replay starts from, and where it came from.

    ``commanded``: the start posture stored in the metadata — where every simulator placed the robot, so a replay
    of a simulated run starts bit-identically (measured angles carry round-off, and contact dynamics amplify a
    1e-16 rad difference into millimetres over seconds). ``measured``: the joint feedback read at t = 0, for a
    real robot laid down only roughly in the start posture. Each falls back to the other, then to the first
    reference.
    """
    if prefer not in POSTURE_CHOICES:
        raise ConfigError(f"initial posture {prefer!r}: choose one of {', '.join(POSTURE_CHOICES)}")
    candidates: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    meta = reader.run_metadata.get("initial_posture")
    if isinstance(meta, dict) and len(meta.get("angle_h_rad", [])) == n_joints:
        candidates["commanded"] = (np.asarray(meta["angle_h_rad"], float), np.asarray(meta["angle_v_rad"], float))
    if reader.has("/joint_feedback"):
        fb = reader.channel("/joint_feedback")
        if "t_s" in fb and abs(float(fb["t_s"][0])) < 1e-6 and fb["angle_h_rad"].shape[1] == n_joints:
            candidates["measured"] = (fb["angle_h_rad"][0], fb["angle_v_rad"][0])
    order = [prefer, *(c for c in POSTURE_CHOICES if c != prefer)]
    source = next((c for c in order if c in candidates), "first reference")
    if source in candidates:
        h, v = candidates[source]
    else:
        refs = reader.channel(REFERENCES_TOPIC)
        h, v = refs["angle_h_rad"][0], refs["angle_v_rad"][0]
    return JointReferences(0.0, h.copy(), v.copy(), np.zeros(n_joints), np.zeros(n_joints)), source


def run_duration_s(reader: LogReader, experiment: Experiment) -> float:
    """How long the logged run went: its planned duration, or less when it ended early (Ctrl-C, the operator's stop
    of a driven run: the ``stop`` event), so a replay re-drives what was run and not an hour of a held posture."""
    starts = reader.events("start")
    planned = experiment.run.duration_s
    if starts and isinstance(starts[0].fields.get("duration_s"), int | float):
        planned = float(starts[0].fields["duration_s"])
    stops = reader.events("stop")
    if starts and stops:
        ran = (stops[-1].t_ns - starts[0].t_ns) / 1e9
        if 0 < ran < planned:
            return ran
    return planned


def replay(
    log_path: str | Path,
    out_path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    backend_name: str | None = None,
    backend: JointInterface | None = None,
    initial_posture: str = "commanded",
    progress: Callable[[float, float], None] | None = None,
) -> dict[str, Any]:
    """Replay ``log_path`` on a simulator and record ``out_path``; returns the replay's run summary."""
    if Path(out_path).resolve() == Path(log_path).resolve():
        raise ConfigError("replay --out must differ from the log being replayed")
    reader = LogReader(log_path)
    overrides = dict(overrides or {})
    name = backend_name or str(overrides.pop("backend.default", "")) or DEFAULT_REPLAY_BACKEND
    experiment = experiment_from_log(reader, overrides)
    gait = LoggedReferences.from_log(reader, initial_posture)
    if gait.n_joints != experiment.robot.n_joints:
        raise ReplayError(
            f"the log has references for {gait.n_joints} joints but robot {experiment.robot.name!r} has "
            f"{experiment.robot.n_joints}"
        )
    experiment = replace(experiment, gait=gait)
    settings = mocap_settings(experiment)
    settings = replace(settings.ideal(), links=settings.links)
    options = RunOptions(backend=name, duration_s=run_duration_s(reader, experiment))
    return record_run(
        experiment,
        out_path,
        options,
        backend=backend,
        mocap=settings,
        progress=progress,
        extra_metadata={
            **({"robot_toml": reader.run_metadata["robot_toml"]} if "robot_toml" in reader.run_metadata else {}),
            "replay_of": str(Path(log_path)),
            "replay_overrides": overrides,
            "replay_initial_posture_source": gait.initial_posture_source,
        },
    )
