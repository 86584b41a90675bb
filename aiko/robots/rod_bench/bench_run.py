"""One bench run, end to end, on one path: backend and clock, the base trajectory streamed at the control rate, the
bench observed at the observe rate, every sensor task on the same clock, everything into ONE log (with the
experiment text and provenance at its head and the summary at its end); the arm is always stopped and the
emulator (HIL) always ended, on every exit path.

The run's owner is the spine's :func:`aiko.core.run.run` (it alone moves the backend through configure, activate,
deactivate and close); the bench brings its tasks:

========== ============================ ===================================================================
priority   task                          what it does
========== ============================ ===================================================================
10         ``command`` (control rate)     the trajectory's set-point for one period ahead → backend.write,
                                          logged on ``/bench/command``
20         ``observe`` (observe rate)     backend.read → ``/bench/observation`` (flange pose, speed, base
                                          wrench, arm state)
30+        sensor tasks                   one :class:`SensorTask` each: the F/T sensor (``/bench/wrench``) and
                                          the camera's markers (``/bench/markers``) plug in here
========== ============================ ===================================================================

``aiko bench run`` and ``aiko bench replay`` both run through :func:`record_bench_run`, so a replay log has the
layout of the log it replays.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.clock import Clock, SimulatedClock, WallClock
from aiko.core.errors import AikoError, ConfigError
from aiko.core.interfaces import Recorder
from aiko.core.loop import PeriodicTask
from aiko.core.provenance import provenance
from aiko.core.recording import FanOutRecorder
from aiko.core.run import RunPlan, run
from aiko.log import McapRecorder
from aiko.log.foxglove_views import views_or_none
from aiko.robots.rod_bench.backends import bench_backend_info, create_bench_backend
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.context import BenchContext
from aiko.robots.rod_bench.messages import COMMAND_CHANNEL, OBSERVATION_CHANNEL
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.rod_samples import ROD_CHANNELS, ROD_STATE
from aiko.robots.rod_bench.sensor_task import FinishedRun, SensorTask
from aiko.robots.rod_bench.trajectory import BaseTrajectory, SetPointTime
from sim.cosserat.scenario import BaseMotion

log = logging.getLogger(__name__)

COMMAND = COMMAND_CHANNEL
OBSERVATION = OBSERVATION_CHANNEL
SUMMARY_METADATA_NAME = "aiko.summary"
BENCH_METADATA_NAME = "aiko.bench"


def _sensor_periodic(
    sensor: SensorTask, recorder: Recorder, clock_of: Callable[[], Clock], priority: int
) -> PeriodicTask:
    sample = sensor.sample
    assert sample is not None  # only sensors that sample in the loop get a task

    def action(t_s: float) -> None:
        payload = sample(t_s)
        if payload is not None:
            recorder.record(sensor.channel, clock_of().stamp_ns(t_s), payload)

    return PeriodicTask(sensor.name, sensor.rate_hz, action, priority=priority)


def check_emulator_rt_priority(priority: int, backend_name: str) -> None:
    """A ConfigError unless ``priority`` is 0 (off) or a SCHED_FIFO priority for the HIL backend's emulator."""
    if not 0 <= priority <= 99:
        raise ConfigError(f"--rt-priority must lie in 0..99, got {priority}")
    if priority and backend_name != "hil":
        raise ConfigError("--rt-priority raises the emulated controller: it applies to --backend hil only")


def record_bench_run(
    experiment: BenchExperiment,
    out: str | Path,
    backend_name: str,
    *,
    duration_s: float | None = None,
    realtime: bool = False,
    host: str | None = None,
    emulator_rt_priority: int = 0,
    motion: BaseMotion | None = None,
    sensors: Sequence[SensorTask] | None = None,
    extra_metadata: dict[str, Any] | None = None,
    start_s: float = 0.0,
    progress: Callable[[float, float], None] | None = None,
    live: Recorder | None = None,
) -> dict[str, Any]:
    """Run the bench and record it to ``out``; returns the JSON summary. ``live`` (e.g. the live dashboard's
    recorder, which must never block) also gets every record the log gets. ``motion`` replaces the experiment's
    ``[base_motion]`` (a replay drives the logged flange poses). ``start_s`` <= 0 starts the run (and the rod, from
    the experiment's initial state) before t = 0: a replay of a HIL run starts where the plant mounted the rod;
    every stamp stays on the replayed run's time. ``sensors`` None: the experiment's ``[ft_sensor]`` / ``[camera]``
    for this backend (:func:`aiko.robots.rod_bench.sensors.bench_sensors`). ``emulator_rt_priority`` > 0 (HIL only):
    the emulated controller and its rod plant at that SCHED_FIFO priority, where the system grants it (the summary's
    ``emulator.rt_priority`` says whether it did)."""
    check_emulator_rt_priority(emulator_rt_priority, backend_name)
    info = bench_backend_info(backend_name)
    if sensors is None:
        from aiko.robots.rod_bench.sensors import bench_sensors  # it builds SensorTasks: imported here, not above

        sensors = bench_sensors(experiment, backend_name, host, log_path=out)
    backend = create_bench_backend(backend_name)
    duration = float(duration_s if duration_s is not None else experiment.scenario.duration_s)
    if start_s > 0 or (start_s < 0 and info.wall_clock_only):
        raise AikoError(f"start_s must be <= 0 and only a simulated run starts early, got {start_s}")
    offset_s = float(start_s)
    clock: Clock = WallClock() if realtime or info.wall_clock_only else OffsetClock(offset_s)
    motion = motion or experiment.scenario.base_motion
    assert motion is not None
    trajectory = BaseTrajectory(motion, Mount.from_settings(experiment.ur3), offset_s)
    metadata = {
        "experiment": experiment.name,
        "experiment_path": str(experiment.path),
        "experiment_toml": experiment.text,
        "backend": backend_name,
        "robot": "rod_bench",
        "simulator": "sim.cosserat",
        "dt_s": experiment.scenario.dt_s,
        "control_rate_hz": experiment.bench.control_rate_hz,
        "observe_rate_hz": experiment.bench.observe_rate_hz,
        **provenance(),
        "wall_clock_start_unix_s": time.time(),
        **(extra_metadata or {}),
    }
    out = Path(out)
    period_s = 1.0 / experiment.bench.control_rate_hz
    wall0 = time.perf_counter()
    with (
        McapRecorder(out, metadata, foxglove_views=views_or_none(None)) as log_recorder,
        tempfile.TemporaryDirectory(prefix="aiko-bench-") as workdir,
    ):
        recorder: Recorder = log_recorder if live is None else FanOutRecorder(log_recorder, live)
        ctx = BenchContext(experiment, recorder, clock, duration, host, Path(workdir), emulator_rt_priority)

        set_point_time = SetPointTime(period_s)

        def command(t_s: float) -> None:
            target = trajectory.target(t_s, period_s, lag_s=t_s - set_point_time(t_s))
            payload = target.as_payload()
            payload["t_s"], payload["target_t_s"] = t_s + offset_s, target.target_t_s + offset_s
            payload["trajectory_t_s"] = target.trajectory_t_s + offset_s
            recorder.record(COMMAND, ctx.clock.stamp_ns(t_s), payload)
            backend.write(target)

        base_poses: list[tuple[float, np.ndarray]] = []  # for the sensors' finish (the camera's observer)

        def observe(t_s: float) -> None:
            observation = backend.read()
            payload = observation.as_payload()
            payload["t_s"] = payload["t_s"] + offset_s
            recorder.record(OBSERVATION, ctx.clock.stamp_ns(t_s), payload)
            base_poses.append((t_s + offset_s, np.asarray(observation.base_alpha, dtype=float)))

        wall_loop0 = wall0

        def prepare() -> Clock:
            """After configure, before activate: the run goes on the controller's clock where the backend keeps
            one, and the sensors open on it."""
            nonlocal wall_loop0
            if hasattr(backend, "run_clock"):
                ctx.clock = backend.run_clock()
            side_file = backend.side_file() if hasattr(backend, "side_file") else None
            for sensor in sensors:
                if sensor.open_with_clock is not None:
                    sensor.open_with_clock(ctx.clock)
                if sensor.open is not None:
                    sensor.open()
                if sensor.follow is not None and side_file is not None:
                    sensor.follow(side_file, ctx.clock, duration)
            log_recorder.add_metadata(
                BENCH_METADATA_NAME, {"clock": type(ctx.clock).__name__, "clock_start_ns": ctx.clock.start_ns}
            )
            wall_loop0 = time.perf_counter()
            return ctx.clock

        tasks = [
            PeriodicTask("command", experiment.bench.control_rate_hz, command, priority=10),
            PeriodicTask("observe", experiment.bench.observe_rate_hz, observe, priority=20),
            *(
                _sensor_periodic(s, recorder, lambda: ctx.clock, 30 + i)
                for i, s in enumerate(sensors)
                if s.sample is not None
            ),
        ]
        loop_ended: list[float] = []  # when the loop ended and the arm was deactivated, before the backend closed

        def loop_end(_result: object) -> None:
            loop_ended.append(time.perf_counter())
            starting = [s for s in sensors if s.start_finish is not None]
            if starting:  # what the run saw so far; `finish` gets the final version after the close
                states = _rod_states(_side_records_on_run_time(backend, ctx.clock), duration)
                for sensor in starting:
                    assert sensor.start_finish is not None
                    sensor.start_finish(FinishedRun(states, list(base_poses)), ctx.clock)

        plan = RunPlan(
            backend,
            ctx,
            recorder,
            ctx.clock,
            duration - offset_s,
            tasks,
            progress,
            prepare=prepare,
            before_close=loop_end,
        )
        result = None
        try:
            result = run(plan)  # the backend is closed when it returns, on every path
        finally:
            # the loop's own wall time: closing the backend (HIL: ur_rtde's disconnects, the emulator's exit, ~2.5 s)
            # is not the loop's, and counting it made a real-time HIL run report a factor of 0.6
            wall_loop = (loop_ended[0] if loop_ended else time.perf_counter()) - wall_loop0
            for sensor in sensors:
                if sensor.close is not None:
                    sensor.close()
            states: list[tuple[float, dict[str, Any]]] = []
            merged, mounted_at_s = _merge_side_records(backend, recorder, ctx.clock, duration, states)
        if result is not None:
            finished = FinishedRun(states, base_poses)
            for sensor in sensors:
                if sensor.finish is not None:
                    sensor.finish(finished, recorder, ctx.clock)
        summary: dict[str, Any] = {
            "experiment": experiment.name,
            "backend": backend_name,
            "duration_s": duration,
            "run_time_s": result.duration_s if result else None,
            "interrupted": bool(result and result.interrupted),
            "deadlines_missed": result.deadlines_missed if result else None,
            "loop_wall_time_s": wall_loop,
            "wall_time_s": time.perf_counter() - wall0,
            "realtime_factor": duration / wall_loop if wall_loop > 0 else None,
            "set_point_lag_max_s": set_point_time.lag_max_s,
            "side_records_merged": merged,
            "rod_started_at_s": offset_s if mounted_at_s is None else mounted_at_s,
            **backend.summary(),
            "messages": dict(log_recorder.message_counts),
            "log_path": str(out),
        }
        if sensors:
            summary["sensors"] = {s.name: s.summary() if s.summary is not None else {} for s in sensors}
        log_recorder.add_metadata(SUMMARY_METADATA_NAME, summary)
    return summary


class OffsetClock(SimulatedClock):
    """Simulated time whose loop time 0 is run time ``offset_s`` (<= 0): stamps are on the run's time."""

    def __init__(self, offset_s: float = 0.0) -> None:
        super().__init__()
        self.offset_s = offset_s

    def stamp_ns(self, t_s: float) -> int:
        return self.start_ns + round((t_s + self.offset_s) * 1e9)

    def now_ns(self) -> int:
        return self.stamp_ns(self.now_s())


SideRecord = tuple[str, float, dict[str, Any]]  # (channel, run time, payload)


def _side_records_on_run_time(backend: Any, clock: Clock) -> list[SideRecord]:
    """(channel, run time, payload) of every record a backend produced beside the loop (the HIL plant's rod
    channels, stamped with the controller's time), a payload's own ``t_s`` moved to the run's time too."""
    side = getattr(backend, "side_records", None)
    if side is None:
        return []
    zero = getattr(clock, "zero_s", 0.0)
    out = []
    for channel, controller_t_s, payload in side():
        t_s = controller_t_s - zero
        out.append((channel, t_s, {**payload, "t_s": t_s} if "t_s" in payload else payload))
    return out


def _rod_states(records: list[SideRecord], duration_s: float) -> list[tuple[float, dict[str, Any]]]:
    """The plant's true rod states from the run's time 0 to its end."""
    return [(t_s, p) for channel, t_s, p in records if channel == ROD_STATE and 0.0 <= t_s <= duration_s + 1e-9]


def _merge_side_records(
    backend: Any, recorder: Recorder, clock: Clock, duration_s: float, states: list[tuple[float, dict[str, Any]]]
) -> tuple[int, float | None]:
    """Records a backend produced beside the loop go into the run's log on the run's clock, from the rod's mounting
    (before t = 0: the rod settling on the held arm before the run started) to the run's end; the rod states of
    the run go into ``states``. Returns the count and the mounting's run time."""
    records = _side_records_on_run_time(backend, clock)
    n = 0
    for channel, t_s, payload in records:
        if t_s <= duration_s + 1e-9:
            recorder.record(ROD_CHANNELS[channel], clock.stamp_ns(t_s), payload)
            n += 1
    states.extend(_rod_states(records, duration_s))
    return n, min((t_s for _, t_s, _ in records), default=None)
