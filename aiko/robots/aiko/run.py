"""One experiment run of Aiko, planned here and run by the spine's run owner (:func:`aiko.core.run.run`):

1. :func:`plan_run` resolves, once, the backend and the clock (the ones given, else the experiment's defaults), the
   run's length and the motion-capture settings;
2. :func:`record_run` opens the log with everything a replay needs (experiment text, robot description, initial
   posture) and what the log needs to draw the robot (:func:`aiko.robots.aiko.shape.body_drawing`), then
   :func:`run_planned`; the summary goes at the log's end. :func:`run_experiment` is the same run into any
   recorder (tests, sweeps kept in memory);
3. :func:`run_planned` puts the control loop's tasks and the ``[mocap]`` task into a :class:`aiko.core.run.RunPlan`
   and hands it to :func:`aiko.core.run.run`, which configures, activates, runs, deactivates and closes the backend.

``aiko run``, ``aiko replay``, ``aiko sweep``, the benchmarks and the tests all run through here, so a replay log
has exactly the layout of the log it replays and ``aiko compare`` can put them side by side. A run whose gait is
steered live is the same plan with one more task (the reader of the operator's commands) in ``extra_tasks``.
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
from aiko.core.loop import PeriodicTask, ProgressCallback, TaskLoopResult
from aiko.core.provenance import provenance
from aiko.core.recording import FanOutRecorder
from aiko.core.run import RunPlan
from aiko.core.run import run as run_plan
from aiko.log import McapRecorder
from aiko.log.foxglove_views import views_or_none
from aiko.robots.aiko.control_loop import ControlLoop, LoopResult
from aiko.robots.aiko.experiment import Experiment, check_duration, run_context
from aiko.robots.aiko.joints import JointInterface
from aiko.robots.aiko.mocap import MocapSettings, mocap_settings, mocap_task
from aiko.robots.aiko.plugins import backend_info, create_backend
from aiko.robots.aiko.shape import body_drawing

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


@dataclass
class PlannedRun:
    """A run resolved once: the experiment, the backend (by name and instance), the clock, how long, which motion
    capture, and the options it came from."""

    experiment: Experiment
    backend_name: str
    backend: JointInterface
    clock: Clock
    duration_s: float
    mocap: MocapSettings
    options: RunOptions


def plan_run(
    experiment: Experiment,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    mocap: MocapSettings | None = None,
) -> PlannedRun:
    """The backend, clock, length and motion capture of a run: the ones given, else the experiment's defaults."""
    options = options or RunOptions()
    backend_name = options.backend or experiment.default_backend
    duration_s = options.duration_s if options.duration_s is not None else experiment.run.duration_s
    check_duration(duration_s, experiment.run.reference_rate_hz, "run duration")  # before anything is created
    return PlannedRun(
        experiment=experiment,
        backend_name=backend_name,
        backend=backend or create_backend(backend_name),
        clock=clock or choose_clock(backend_name, options.realtime),
        duration_s=duration_s,
        mocap=mocap if mocap is not None else mocap_settings(experiment),
        options=options,
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
    """Run ``experiment`` and record it to ``log_path``; returns the JSON summary (with ``log_path``). ``live``
    (the dashboard, the Foxglove server, a sweep's in-memory copy) gets every record the log gets."""
    planned = plan_run(experiment, options, backend=backend, clock=clock, mocap=mocap)
    metadata = run_metadata(experiment, planned.backend_name, planned.clock)
    robot_text = robot_toml_text(experiment)
    if robot_text is not None:
        metadata["robot_toml"] = robot_text
    posture = experiment.gait.initial_posture()
    metadata["initial_posture"] = {
        "angle_h_rad": posture.angle_h_rad.tolist(),
        "angle_v_rad": posture.angle_v_rad.tolist(),
    }
    settings = planned.mocap
    metadata["mocap"] = {"source": settings.source, "rate_hz": settings.rate_hz, "links": list(settings.links)}
    metadata.update(extra_metadata or {})
    log_path = Path(log_path)
    # simulators log their link poses (/sim/link_poses): the 3D body comes from those, not from the joint angles
    views = views_or_none(
        body_drawing(experiment.robot),
        planned.options.tracked_link,
        body_from_joints=planned.backend_name not in SIM_POSES,
    )
    with McapRecorder(log_path, metadata, experiment.log.flush_interval_s, foxglove_views=views) as file_recorder:
        recorder: Recorder = file_recorder if live is None else FanOutRecorder(file_recorder, live)
        _, summary = run_planned(
            planned, recorder, extra_tasks=extra_tasks, progress=progress, add_metadata=file_recorder.add_metadata
        )
        summary["log_path"] = str(log_path)
        file_recorder.add_metadata(SUMMARY_METADATA_NAME, summary)
    return summary


def run_experiment(
    experiment: Experiment,
    recorder: Recorder,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    mocap: MocapSettings | None = None,
    extra_tasks: Sequence[PeriodicTask] = (),
    progress: ProgressCallback | None = None,
) -> tuple[LoopResult, dict[str, Any]]:
    """Run ``experiment`` into any recorder (no log file: tests, sweeps kept in memory, benchmarks); returns the
    loop result and the JSON summary."""
    planned = plan_run(experiment, options, backend=backend, clock=clock, mocap=mocap)
    return run_planned(planned, recorder, extra_tasks=extra_tasks, progress=progress)


def run_planned(
    planned: PlannedRun,
    recorder: Recorder,
    *,
    extra_tasks: Sequence[PeriodicTask] = (),
    progress: ProgressCallback | None = None,
    add_metadata: Callable[[str, Any], None] | None = None,
) -> tuple[LoopResult, dict[str, Any]]:
    """The control loop's tasks, motion capture from ``[mocap]`` and ``extra_tasks`` in one plan for the spine's
    run owner; returns the loop result and the JSON summary."""
    experiment, backend, clock = planned.experiment, planned.backend, planned.clock
    options = planned.options
    ctx = run_context(experiment, recorder, clock, duration_s=planned.duration_s, realtime=options.realtime)
    loop = ControlLoop(
        experiment.gait,
        backend,
        recorder,
        clock,
        reference_rate_hz=experiment.run.reference_rate_hz,
        feedback_rate_hz=experiment.run.feedback_rate_hz,
        tracked_link=options.tracked_link,
        allow_degraded=experiment.run.allow_degraded,
    )
    mocap, mocap_state = mocap_task(planned.mocap, backend, recorder, clock)
    if mocap_state is not None and add_metadata is not None:
        add_metadata("aiko.mocap", mocap_state.source.describe())
    for task in [*([mocap] if mocap is not None else []), *extra_tasks]:
        loop.add_task(task)
    results: list[LoopResult] = []

    def before_close(loop_result: TaskLoopResult) -> None:
        results.append(loop.result(loop_result))

    plan = RunPlan(
        backend=backend,
        context=ctx,
        recorder=recorder,
        clock=clock,
        duration_s=planned.duration_s,
        tasks=loop.tasks,
        progress=progress,
        on_start=loop.start,
        before_close=before_close,
    )
    try:
        run_plan(plan)
    finally:
        if mocap_state is not None:
            mocap_state.source.stop()
    result = results[0]
    summary: dict[str, Any] = {
        "experiment": str(experiment.path),
        "backend": planned.backend_name,
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
    if mocap_state is not None:
        summary.update(mocap_state.summary())
    return result, summary
