"""A recorded run: the control loop (``aiko.runner``) plus everything around it that makes the log useful later —
motion capture from the ``[mocap]`` table, the metadata a replay needs (experiment text, robot description, initial
posture), the run summary at the end of the log, an optional live dashboard feed and the run report.

``aiko run`` and ``aiko replay`` both go through :func:`record_run`, so a replay log has exactly the layout of the
log it replays and ``aiko compare`` can put them side by side.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiko.backends import create_backend
from aiko.clock import Clock
from aiko.experiment import Experiment
from aiko.interfaces import JointInterface, Recorder
from aiko.log import McapRecorder
from aiko.loop import PeriodicTask
from aiko.mocap.config import MocapSettings, mocap_settings, mocap_task
from aiko.recording import FanOutRecorder
from aiko.runner import RunOptions, choose_clock, run_experiment, run_metadata

log = logging.getLogger(__name__)

SUMMARY_METADATA_NAME = "aiko.summary"
SIM_POSES = frozenset({"sim"})
"""Backends that log ``/sim/link_poses`` (the Foxglove body is drawn from them)."""


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


def foxglove_views(robot: Any | None, tracked_link: int = 6, *, body_from_joints: bool = True) -> Any | None:
    """The Foxglove-schema views of a run's log (3D body, joint states, rod), or None without foxglove-sdk."""
    from aiko.log.foxglove_views import FoxgloveUnavailable, FoxgloveViews

    try:
        return FoxgloveViews(robot, tracked_link, body_from_joints=body_from_joints)
    except FoxgloveUnavailable as exc:
        log.warning("%s; the log has no Foxglove 3D channels", exc)
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
    context_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``experiment`` and record it to ``log_path``; returns the JSON summary (with ``log_path``).

    ``context_options`` reach the backend through ``RunContext.options`` (e.g. the CAN flags of ``aiko run``)."""
    options = options or RunOptions()
    backend_name = options.backend or experiment.default_backend
    backend = backend or create_backend(backend_name)
    clock = clock or choose_clock(backend_name, options.realtime)
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
    views = foxglove_views(experiment.robot, options.tracked_link, body_from_joints=backend_name not in SIM_POSES)
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
            context_options=context_options,
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
    context_options: dict[str, Any] | None = None,
    add_metadata: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """The run :func:`record_run` records, into any recorder: the control loop plus motion capture from the
    ``[mocap]`` table. ``aiko sweep`` keeps a run in memory this way when it writes no log."""
    options = options or RunOptions()
    backend_name = options.backend or experiment.default_backend
    backend = backend or create_backend(backend_name)
    clock = clock or choose_clock(backend_name, options.realtime)
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
            context_options=context_options,
        )
    finally:
        if mocap_state is not None:
            mocap_state.source.stop()
    if mocap_state is not None:
        summary.update(mocap_state.summary())
    return summary


def replay_and_compare(
    log_path: str | Path,
    *,
    backend_name: str | None = None,
    overrides: dict[str, Any] | None = None,
    replay_path: str | Path | None = None,
    plot_path: str | Path | None = None,
) -> dict[str, Any]:
    """The lab's daily loop after a run: replay it on the simulator, compare the two back to back, plot.

    Writes ``<log>-replay.mcap`` and ``<log>-vs-replay.png`` beside the log unless told otherwise; returns
    ``{"replay_log_path", "comparison", "comparison_plot"}``.
    """
    from aiko.compare import compare_logs
    from aiko.plots import plot_comparison
    from aiko.replay import replay

    log_path = Path(log_path)
    replay_path = Path(replay_path) if replay_path else log_path.with_name(log_path.stem + "-replay.mcap")
    plot_path = Path(plot_path) if plot_path else log_path.with_name(log_path.stem + "-vs-replay.png")
    from aiko.progress import Progress

    with Progress(f"replay {log_path.name}") as progress:
        replay(log_path, replay_path, overrides, backend_name=backend_name, progress=progress)
        progress.complete()
    comparison = compare_logs(log_path, replay_path)
    plot_comparison(comparison, plot_path, ("run", "replay (sim)"))
    return {"replay_log_path": str(replay_path), "comparison": comparison.result, "comparison_plot": str(plot_path)}
