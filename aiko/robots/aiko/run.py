"""One experiment run of Aiko, end to end, on one path: choose the backend and clock, configure, run the control
loop with motion capture from ``[mocap]``, always leave the robot disabled, and — for a recorded run — write the
log with everything a replay needs (experiment text, robot description, initial posture) and the summary at its end.

``aiko run``, ``aiko replay``, ``aiko sweep``, the benchmarks and the tests all run through here, so a replay log
has exactly the layout of the log it replays and ``aiko compare`` can put them side by side.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiko.core.clock import Clock, SimulatedClock, WallClock
from aiko.core.interfaces import Recorder
from aiko.core.loop import PeriodicTask, ProgressCallback
from aiko.core.provenance import provenance
from aiko.core.recording import FanOutRecorder
from aiko.log import McapRecorder
from aiko.log.foxglove_views import views_or_none
from aiko.robots.aiko.control_loop import ControlLoop, LoopResult
from aiko.robots.aiko.experiment import Experiment, check_duration
from aiko.robots.aiko.joints import JointInterface, RunContext
from aiko.robots.aiko.mocap import MocapSettings, mocap_settings, mocap_task
from aiko.robots.aiko.plugins import backend_info, create_backend

log = logging.getLogger(__name__)

SUMMARY_METADATA_NAME = "aiko.summary"
SIM_POSES = frozenset({"sim"})
"""Backends that log ``/sim/link_poses`` (the Foxglove body is drawn from them)."""


@dataclass
class RunOptions:
    backend: str | None = None
    duration_s: float | None = None
    realtime: bool = False
    tracked_link: int = 6


def choose_clock(backend_name: str, realtime: bool) -> Clock:
    """Hardware always runs on the wall clock; everything else on simulated time unless ``--realtime``."""
    return WallClock() if realtime or backend_info(backend_name).wall_clock_only else SimulatedClock()


def _resolve(
    experiment: Experiment, options: RunOptions, backend: JointInterface | None, clock: Clock | None
) -> tuple[str, JointInterface, Clock]:
    """The backend's name, the backend and the clock of a run: the ones given, else the experiment's defaults."""
    backend_name = options.backend or experiment.default_backend
    return (
        backend_name,
        backend or create_backend(backend_name),
        clock or choose_clock(backend_name, options.realtime),
    )


def run_metadata(experiment: Experiment, backend_name: str, clock: Clock) -> dict[str, Any]:
    """Everything needed to understand (and replay) a run later, stored at the head of its log."""
    return {
        "experiment_path": str(experiment.path),
        "experiment_toml": experiment.text,
        "overrides": {k: v for k, v in experiment.overrides.items()},
        "robot": experiment.robot.name,
        "robot_source": experiment.robot.source,
        "backend": backend_name,
        **provenance(),
        "wall_clock_start_unix_s": time.time(),
        "clock_start_ns": clock.start_ns,
        "clock": type(clock).__name__,
    }


def robot_toml_text(experiment: Experiment) -> str | None:
    """The robot description file's text, stored in the log so a replay elsewhere needs no robot file.

    None for a robot given as a table inside the experiment (its source is the experiment file, whose text is
    logged anyway): reading that file here would store the experiment as the robot description."""
    source = experiment.robot.source
    if not source or Path(source) == Path(experiment.path):
        return None
    if Path(source).is_file():
        return Path(source).read_text()
    return None


def record_run(
    experiment: Experiment,
    log_path: str | Path,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    mocap: MocapSettings | None = None,
    extra_metadata: dict[str, Any] | None = None,
    extra_tasks: Sequence[PeriodicTask] = (),
    live: Recorder | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> dict[str, Any]:
    """Run ``experiment`` and record it to ``log_path``; returns the JSON summary (with ``log_path``)."""
    options = options or RunOptions()
    backend_name, backend, clock = _resolve(experiment, options, backend, clock)
    settings = mocap if mocap is not None else mocap_settings(experiment)
    metadata = run_metadata(experiment, backend_name, clock)
    robot_text = robot_toml_text(experiment)
    if robot_text is not None:
        metadata["robot_toml"] = robot_text
    posture = experiment.gait.initial_posture()
    metadata["initial_posture"] = {
        "angle_h_rad": posture.angle_h_rad.tolist(),
        "angle_v_rad": posture.angle_v_rad.tolist(),
    }
    metadata["mocap"] = {"source": settings.source, "rate_hz": settings.rate_hz, "links": list(settings.links)}
    metadata.update(extra_metadata or {})
    log_path = Path(log_path)
    # simulators log their link poses (/sim/link_poses): the 3D body comes from those, not from the joint angles
    views = views_or_none(experiment.robot, options.tracked_link, body_from_joints=backend_name not in SIM_POSES)
    with McapRecorder(log_path, metadata, experiment.log.flush_interval_s, foxglove_views=views) as file_recorder:
        recorder: Recorder = file_recorder if live is None else FanOutRecorder(file_recorder, live)
        summary = run_with_mocap(
            experiment,
            recorder,
            options,
            backend=backend,
            clock=clock,
            mocap=settings,
            extra_tasks=extra_tasks,
            progress=progress,
            add_metadata=file_recorder.add_metadata,
        )
        summary["log_path"] = str(log_path)
        file_recorder.add_metadata(SUMMARY_METADATA_NAME, summary)
    return summary


def run_with_mocap(
    experiment: Experiment,
    recorder: Recorder,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    mocap: MocapSettings | None = None,
    extra_tasks: Sequence[PeriodicTask] = (),
    progress: Callable[[float, float], None] | None = None,
    add_metadata: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """The run :func:`record_run` records, into any recorder: the control loop plus motion capture from the
    ``[mocap]`` table. ``aiko sweep`` keeps a run in memory this way when it writes no log."""
    options = options or RunOptions()
    _, backend, clock = _resolve(experiment, options, backend, clock)
    settings = mocap if mocap is not None else mocap_settings(experiment)
    task, mocap_state = mocap_task(settings, backend, recorder, clock)
    if mocap_state is not None and add_metadata is not None:
        add_metadata("aiko.mocap", mocap_state.source.describe())
    tasks = [*([task] if task is not None else []), *extra_tasks]
    try:
        _, summary = run_experiment(
            experiment,
            recorder,
            options,
            backend=backend,
            clock=clock,
            extra_tasks=tasks,
            progress=progress,
        )
    finally:
        if mocap_state is not None:
            mocap_state.source.stop()
    if mocap_state is not None:
        summary.update(mocap_state.summary())
    return summary


def run_experiment(
    experiment: Experiment,
    recorder: Recorder,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    extra_tasks: list[PeriodicTask] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[LoopResult, dict[str, Any]]:
    """Run ``experiment`` into any recorder and return the loop result and the JSON summary."""
    options = options or RunOptions()
    backend_name, backend, clock = _resolve(experiment, options, backend, clock)
    duration_s = options.duration_s if options.duration_s is not None else experiment.run.duration_s
    check_duration(duration_s, experiment.run.reference_rate_hz, "run duration")  # before anything is enabled
    ctx = RunContext.of(experiment, recorder, clock, backend_name, duration_s=duration_s, realtime=options.realtime)
    try:
        backend.configure(ctx)
        loop = ControlLoop(
            experiment.gait,
            backend,
            recorder,
            clock,
            reference_rate_hz=experiment.run.reference_rate_hz,
            feedback_rate_hz=experiment.run.feedback_rate_hz,
            tracked_link=options.tracked_link,
            progress=progress,
            allow_degraded=experiment.run.allow_degraded,
        )
        for task in extra_tasks or []:
            loop.add_task(task)
        result = loop.run(duration_s)
    finally:
        backend.deactivate()
        backend.close()
    summary: dict[str, Any] = {
        "experiment": str(experiment.path),
        "backend": backend_name,
        "duration_s": result.duration_s,
        "reference_updates": result.reference_updates,
        "feedback_reads": result.feedback_reads,
        "tracked_point_start_m": result.tracked_point_start_m,
        "tracked_point_end_m": result.tracked_point_end_m,
        "interrupted": result.interrupted,
        "deadlines_missed": result.deadlines_missed,
        "task_timing": result.task_timing,
    }
    summary.update(result.backend_summary)
    return result, summary
