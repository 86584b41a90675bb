"""One experiment run, end to end: configure the backend, run the loop, and always leave the robot disabled.

Used by ``aiko run`` and by anything else that drives a run (replay, benchmarks, tests).
"""

from __future__ import annotations

import platform
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiko import __version__
from aiko.backends import create_backend
from aiko.clock import Clock, SimulatedClock, WallClock
from aiko.experiment import Experiment
from aiko.interfaces import JointInterface, Recorder, RunContext
from aiko.log.recorder import current_user
from aiko.loop import ControlLoop, LoopResult, PeriodicTask, ProgressCallback

HARDWARE_BACKENDS = frozenset({"can"})


@dataclass
class RunOptions:
    backend: str | None = None
    duration_s: float | None = None
    realtime: bool = False
    tracked_link: int = 6


def choose_clock(backend_name: str, realtime: bool) -> Clock:
    """Hardware always runs on the wall clock; everything else on simulated time unless ``--realtime``."""
    return WallClock() if realtime or backend_name in HARDWARE_BACKENDS else SimulatedClock()


def source_revision() -> str:
    """The git commit of the code that runs (``+dirty`` with uncommitted changes); "" outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{commit}+dirty" if dirty else commit


def run_metadata(experiment: Experiment, backend_name: str, clock: Clock) -> dict[str, Any]:
    """Everything needed to understand (and replay) a run later, stored at the head of its log."""
    return {
        "experiment_path": str(experiment.path),
        "experiment_toml": experiment.text,
        "overrides": {k: v for k, v in experiment.overrides.items()},
        "robot": experiment.robot.name,
        "robot_source": experiment.robot.source,
        "backend": backend_name,
        "software_version": __version__,
        "git_commit": source_revision(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "user": current_user(),
        "wall_clock_start_unix_s": time.time(),
        "clock_start_ns": clock.start_ns,
        "clock": type(clock).__name__,
    }


def run_experiment(
    experiment: Experiment,
    recorder: Recorder,
    options: RunOptions | None = None,
    *,
    backend: JointInterface | None = None,
    clock: Clock | None = None,
    extra_tasks: list[PeriodicTask] | None = None,
    progress: ProgressCallback | None = None,
    context_options: dict[str, Any] | None = None,
) -> tuple[LoopResult, dict[str, Any]]:
    """Run ``experiment`` and return the loop result and the JSON summary."""
    options = options or RunOptions()
    backend_name = options.backend or experiment.default_backend
    backend = backend or create_backend(backend_name)
    clock = clock or choose_clock(backend_name, options.realtime)
    duration_s = options.duration_s if options.duration_s is not None else experiment.run.duration_s
    ctx = RunContext(
        robot=experiment.robot,
        experiment=experiment,
        recorder=recorder,
        clock=clock,
        gait=experiment.gait,
        options=dict(context_options or {}, duration_s=duration_s, realtime=options.realtime),
    )
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
        "steps": result.reference_updates,
        "reference_updates": result.reference_updates,
        "feedback_reads": result.feedback_reads,
        "tracked_point_start_m": result.tracked_point_start_m,
        "tracked_point_end_m": result.tracked_point_end_m,
        "interrupted": result.interrupted,
        "deadlines_missed": result.deadlines_missed,
    }
    summary.update(result.backend_summary)
    # `steps` counts the physics' time steps where a simulator ran (what the speed benchmarks count too).
    if "sim_steps" in summary:
        summary["steps"] = summary["sim_steps"]
    return result, summary
