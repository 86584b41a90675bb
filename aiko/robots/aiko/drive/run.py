"""``aiko drive``'s run: ``aiko run``'s recorded run (:func:`aiko.robots.aiko.run.record_run`: the same backend
lifecycle, e-stop, watchdog and safety stops, the same log, report, replay and compare), on the wall clock, with
the experiment's gait made steerable and a drive task that feeds it the operator's commands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiko.core.clock import WallClock
from aiko.core.interfaces import Recorder
from aiko.robots.aiko.drive.session import DrivenBackend, DriveSession, DriveSettings, InputDevice, limit_note
from aiko.robots.aiko.experiment import Experiment
from aiko.robots.aiko.gait import SerpenoidGait
from aiko.robots.aiko.gaits.obstacle_aided import ObstacleAidedGait
from aiko.robots.aiko.gaits.steerable import SteerableGait, SteeringLimits, gait_factories
from aiko.robots.aiko.plugins import backend_info, create_backend
from aiko.robots.aiko.run import RunOptions, record_run

DRIVE_METADATA_NAME = "aiko.drive"


def steerable_gait(experiment: Experiment, backend_name: str) -> SteerableGait:
    """The experiment's gait as a steerable one: a ``kind = "steerable"`` gait as it is (its commands play first);
    a serpenoid gait becomes the start gait of its family (sidewinding when it has a vertical wave, else lateral
    undulation) with its own parameters; the obstacle-aided gait starts as itself. The rate limit is the robot's
    ``joints.max_rate_deg_s`` and, on a CAN bus, ``can.slew_limit_deg_s``."""
    gait = experiment.gait
    slew = None
    if "can_bus" in backend_info(backend_name).capabilities:
        slew = math.radians(experiment.settings("can").slew_limit_deg_s)
    if isinstance(gait, SteerableGait):
        return gait  # its own limits (the CAN backend refuses one faster than can.slew_limit_deg_s)
    limits = SteeringLimits.of(experiment.robot, slew_limit_rad_s=slew)
    robot = experiment.robot
    if isinstance(gait, SerpenoidGait):
        family = (
            "sidewinding" if gait.params.amplitude_v_rad != 0.0 and not gait.params.planar else "lateral_undulation"
        )
        return SteerableGait(gait_factories(robot, limits, {family: gait.params}), family, limits)
    start = "obstacle_aided" if isinstance(gait, ObstacleAidedGait) else "lateral_undulation"
    return SteerableGait(gait_factories(robot, limits), start, limits)


def record_drive(
    experiment: Experiment,
    log_path: str | Path,
    device: InputDevice,
    *,
    backend_name: str,
    duration_s: float,
    live: Recorder | None = None,
    settings: DriveSettings | None = None,
    status_sink: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Drive ``experiment`` with ``device`` until the operator stops (or ``duration_s``); returns the summary of
    ``aiko run`` plus ``drive``: the commands given, who stopped the run, the limits the gait kept."""
    gait = steerable_gait(experiment, backend_name)
    experiment.gait = gait
    backend = DrivenBackend(create_backend(backend_name))
    session = DriveSession(gait, backend, device, settings or DriveSettings(), status_sink)
    limits = gait.limits
    drive_meta = {
        "input": device.name,
        "start_gait": gait.gait_name,
        "rate_limit_deg_s": math.degrees(limits.rate_rad_s),
        "accel_limit_deg_s2": math.degrees(limits.accel_rad_s2),
        "max_speed": limits.max_speed,
        "max_turn_deg": math.degrees(limits.max_turn_rad),
        "limits": limit_note(limits),
    }
    device.start()
    try:
        summary = record_run(
            experiment,
            log_path,
            RunOptions(backend=backend_name, duration_s=duration_s, realtime=True),
            backend=backend,
            clock=WallClock(),
            extra_metadata={DRIVE_METADATA_NAME: drive_meta},
            extra_tasks=[session.task(experiment.run.reference_rate_hz)],
            live=live,
        )
    finally:
        device.close()
    summary["drive"] = {
        **drive_meta,
        "commands": len(session.commands),
        "stopped_by": session.stopped_by or ("interrupt" if summary.get("interrupted") else "duration"),
        "input_lost": not session.input_ok,
        "final": gait.status(),
    }
    return summary
