"""The Cosserat rod as the UR3 emulator's plant (``aiko emulate ur3 --plant aiko.robots.rod_bench.plant:rod_plant``).

The emulator calls the hook once per controller tick with the flange pose (see
:data:`aiko.devices.ur.arm_sim.PlantHook`). The flange pose drives the rod's clamped base (through the
experiment's ``[ur3]`` mount), the rod steps the experiment's ``dt_s`` up to the tick's time, and the rod's base
wrench comes back as the force the flange feels (``actual_TCP_force``).

The rod is *mounted* at the first tick whose flange rests (below 0.1 mm/s and 1 mrad/s) at the experiment's initial
base pose (within 1 mm and 0.01 rad): until the arm has moved there and stopped, the flange carries nothing and the
hook returns None. (Mounting while the approach still moves would press the tip onto the table, and with friction
the rod then settles into another equilibrium than the simulator's initial state leads to.) From then on the
rod's time is the controller's time since mounting.

Configuration comes from the environment, since the emulator calls the factory with no arguments:
``AIKO_BENCH_EXPERIMENT`` (the experiment file, required) and ``AIKO_BENCH_PLANT_LOG`` (optional: a JSON-lines file
receiving the rod's channels at the experiment's log rate, each with the controller time, which the bench merges
into its log) and ``AIKO_BENCH_FT_ADDRESS`` (optional, with an ``[ft_sensor]`` table: the F/T sensor's RDT
emulator is started here on that address, fed with the rod's reaction in the sensor frame; see
:mod:`aiko.robots.rod_bench.ft_sensor` for why in this process).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import IO

import numpy as np

from aiko.core.errors import AikoError, ConfigError
from aiko.robots.rod_bench.bench_experiment import BenchExperiment, load_bench_experiment
from aiko.robots.rod_bench.ft_sensor import (
    FT_ADDRESS_ENV,
    FT_PTY_ENV,
    PlantSensor,
    sensor_wrench,
    start_plant_sensor,
)
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.rod_samples import ROD_STATE, rod_payloads
from aiko.robots.rod_bench.rod_stepper import RodStepper
from sim.cosserat import step

log = logging.getLogger(__name__)

EXPERIMENT_ENV = "AIKO_BENCH_EXPERIMENT"
PLANT_LOG_ENV = "AIKO_BENCH_PLANT_LOG"
MOUNT_TOLERANCE_M = 1e-3
MOUNT_TOLERANCE_RAD = 1e-2
MOUNT_SPEED_M_S = 1e-4
MOUNT_SPEED_RAD_S = 1e-3


class RodPlant:
    """``hook(t_s, flange_pose, flange_speed) -> flange wrench | None``: the rod on the flange."""

    def __init__(
        self, experiment: BenchExperiment, side_log: IO[str] | None = None, ft_sensor: PlantSensor | None = None
    ) -> None:
        self.experiment = experiment
        self.mount = Mount.from_settings(experiment.ur3)
        scenario = experiment.scenario
        every = max(1, int(round(1.0 / (experiment.log_rate_hz * scenario.dt_s))))
        self.rod = RodStepper(scenario, self._record, every)
        # the step's kernels loaded now, while the emulator prepares its plant, not in the controller's first ticks
        self.rod.prime()
        self.start_alpha = scenario.initial_state.q[0:6].copy()
        self.side_log = side_log
        self.mounted_at_s: float | None = None
        self.failed: str | None = None
        self._wrench: list[float] | None = None
        self.ft_sensor = ft_sensor  # HIL's F/T emulator in this process: fed the rod's reaction at every tick
        self.timing = PlantTiming()

    def _record(self, rod: RodStepper) -> None:
        if self.side_log is None or self.mounted_at_s is None:
            return
        channels = rod_payloads(rod.model, rod.state, rod.info)
        if self.experiment.camera is not None:  # the truth the bench's camera films after the run
            channels[ROD_STATE] = {"t_s": rod.state.t_s, "q": rod.state.q.tolist()}
        line = {"controller_time_s": self.mounted_at_s + rod.state.t_s, "channels": channels}
        self.side_log.write(json.dumps(line) + "\n")
        self.side_log.flush()

    def _event(self, controller_time_s: float, event: str) -> None:
        """An event for the bench's summary, in the plant log beside the rod's channels (the bench reads it back:
        ``aiko.robots.rod_bench.hil_site.EmulatedController.summary``)."""
        if self.side_log is not None:
            self.side_log.write(json.dumps({"controller_time_s": controller_time_s, "event": event}) + "\n")
            self.side_log.flush()

    def _at_start(self, alpha: np.ndarray, flange_speed: np.ndarray) -> bool:
        speed = np.asarray(flange_speed, dtype=float)
        if np.linalg.norm(speed[0:3]) > MOUNT_SPEED_M_S or np.linalg.norm(speed[3:6]) > MOUNT_SPEED_RAD_S:
            return False
        rot_err = float(np.linalg.norm(alpha[0:3] - self.start_alpha[0:3]))
        pos_err = float(np.linalg.norm(alpha[3:6] - self.start_alpha[3:6]))
        return pos_err <= MOUNT_TOLERANCE_M and rot_err <= MOUNT_TOLERANCE_RAD

    def __call__(self, t_s: float, flange_pose: np.ndarray, flange_speed: np.ndarray) -> list[float] | None:
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            return self._tick(t_s, flange_pose, flange_speed)
        finally:
            wall_s, cpu_s = time.perf_counter() - start, time.thread_time() - start_cpu
            if self.timing.add(wall_s, cpu_s) and self.side_log is not None:
                self.side_log.write(json.dumps({"plant_timing": self.timing.summary()}) + "\n")
                self.side_log.flush()

    def _tick(self, t_s: float, flange_pose: np.ndarray, flange_speed: np.ndarray) -> list[float] | None:
        alpha = self.mount.alpha(flange_pose)
        if self.mounted_at_s is None:
            if not self._at_start(alpha, flange_speed):
                return None
            self.mounted_at_s = float(t_s)
            self.rod.emit()
        if self.failed is not None:
            return self._wrench  # the rod stopped converging: hold its last wrench (the event was logged once)
        rod_t = float(t_s) - self.mounted_at_s
        self.rod.add_waypoint(rod_t, alpha)
        try:
            self.rod.advance_to(rod_t)
        except AikoError as exc:
            self.failed = str(exc)
            log.error("%s", exc)
            self._event(float(t_s), f"rod plant stopped: {exc}")
            return self._wrench
        if self.rod.info is not None:
            self._wrench = self.mount.flange_wrench(self.rod.info.base_wrench).tolist()
            if self.ft_sensor is not None:
                self.ft_sensor.update(sensor_wrench(self.mount, flange_pose, self.rod.info.base_wrench))
        return self._wrench


class PlantTiming:
    """How long the plant hook takes inside each controller tick (the rod's share of the emulator's period): every
    call's duration is kept (200 Hz × a run's minutes), and a summary is due once a second of ticks.

    Each call is timed twice: on the wall clock (what the controller's tick waits for) and in the calling thread's
    CPU time (what the rod costs). On a loaded machine the two part: the wall time then includes the time the
    thread was not scheduled, which is the machine's share, not the rod's."""

    SUMMARY_EVERY = 200

    def __init__(self) -> None:
        self.durations_s: list[float] = []
        self.cpu_durations_s: list[float] = []

    def add(self, duration_s: float, cpu_duration_s: float | None = None) -> bool:
        """Record one call (its thread CPU time where measured); True when a summary is due."""
        self.durations_s.append(duration_s)
        if cpu_duration_s is not None:
            self.cpu_durations_s.append(cpu_duration_s)
        return len(self.durations_s) % self.SUMMARY_EVERY == 0

    def summary(self) -> dict[str, float | int]:
        d = np.asarray(self.durations_s) * 1e3
        if len(d) == 0:
            return {"calls": 0}
        out: dict[str, float | int] = {
            "calls": len(d),
            "median_ms": float(np.median(d)),
            "p99_ms": float(np.percentile(d, 99)),
            "max_ms": float(np.max(d)),
            "mean_ms": float(np.mean(d)),
        }
        if self.cpu_durations_s:
            c = np.asarray(self.cpu_durations_s) * 1e3
            out |= {
                "cpu_median_ms": float(np.median(c)),
                "cpu_p99_ms": float(np.percentile(c, 99)),
                "cpu_max_ms": float(np.max(c)),
            }
        return out


def warm_up(experiment: BenchExperiment) -> None:
    """Compile (or load) here, not inside a controller tick, every kernel a tick can reach: the compiled step, the
    reference step (a step the compiled one cannot solve is solved by it, halved or continued), and the logged
    samples' pose sweep (`rod_payloads`, first called at the mount). On a cold cache a kernel compiled inside a
    tick stalls the 200 Hz controller for seconds and the arm's client drops the connection (measured: the HIL
    camera test failed so before the samples were warmed here)."""
    s = experiment.scenario
    alpha = s.initial_state.q[0:6].copy()
    state = s.initial_state.copy()
    info = step(s.model, state, s.dt_s, s.newton, alpha, s.max_halvings)
    reference = dataclasses.replace(s.newton, compiled_step=False)
    step(s.model, s.initial_state.copy(), s.dt_s, reference, alpha, s.max_halvings)
    rod_payloads(s.model, state, info)


def rod_plant() -> RodPlant:
    """The factory ``aiko emulate ur3 --plant aiko.robots.rod_bench.plant:rod_plant`` calls (see the module doc)."""
    path = os.environ.get(EXPERIMENT_ENV)
    if not path:
        raise ConfigError(f"the rod plant needs {EXPERIMENT_ENV}=EXPERIMENT.toml in the environment")
    experiment = load_bench_experiment(path)
    warm_up(experiment)
    log_path = os.environ.get(PLANT_LOG_ENV)
    side_log = Path(log_path).open("w") if log_path else None  # noqa: SIM115 - lives as long as the emulator
    ft_address, ft_pty = os.environ.get(FT_ADDRESS_ENV), os.environ.get(FT_PTY_ENV)
    ft = None
    if (ft_address or ft_pty) and experiment.ft_sensor is not None:
        ft = start_plant_sensor(experiment.ft_sensor, ft_address, ft_pty)
    return RodPlant(experiment, side_log, ft)
