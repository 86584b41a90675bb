"""Backend ``hil``: the CAN backend against emulated joint modules on an in-process python-can ``virtual`` bus.

Everything above the bus is the ``can`` backend's (settings, activation, the refusal of a latched e-stop, the
enable confirmation, streaming); what differs is the bus and how it is heard (the receive mode): with the run's
simulated clock (the default) the emulator is stepped in lockstep; with ``--realtime`` it runs in its own thread on
the wall clock and the driver listens with a python-can ``Notifier``, exactly as against hardware.

The modules behind the bus are the Python model of the firmware (`[hil] modules = "python"`, the default) or the
firmware itself, the ELF of firmware_protocol/firmware/ running on simulated ATmega128 boards in the AVR simulator
harness (`modules = "firmware"`; `make firmware` builds both): the same plants, the same driver, the same log.

Experiment table (validated when the file is loaded):
  [hil]  modules, plant, feedback_rate_hz, controller_rate_hz, free_play_deg, torque_limit_nm, reference_hold,
         sensor, reply_to_references
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import can
import numpy as np

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.core.polling import poll_until
from aiko.core.registry import register_backend, register_section
from aiko.devices.can.virtual_bus import LockstepVirtualBus
from aiko.robots.aiko.backends.can import CanBackend
from aiko.robots.aiko.backends.can_receive import WallClockReceive
from aiko.robots.aiko.backends.can_settings import CanSection, no_backend_keys
from aiko.robots.aiko.description import RobotDescription
from aiko.robots.aiko.joints import RunContext
from firmware_protocol.emulator import (
    DriveParams,
    EmulatorConfig,
    EmulatorConfigError,
    IndependentInertiaParams,
    IndependentInertiaPlant,
    JointControllerEmulator,
    JointPlant,
)
from firmware_protocol.emulator.harness_client import HarnessError
from firmware_protocol.emulator.transport import BusTransport

log = logging.getLogger(__name__)

HilPlantFactory = Callable[[RobotDescription, Any, np.ndarray], JointPlant]
_HIL_PLANTS: dict[str, HilPlantFactory] = {}


def register_hil_plant(name: str, factory: HilPlantFactory) -> None:
    """A plant for ``[hil] plant = name``: ``factory(robot, sim_settings, initial_angles_rad (n, 2))``, where
    ``sim_settings`` is the experiment's parsed ``[sim]`` section. The plant implements
    ``firmware_protocol.emulator.JointPlant``; its ``link_poses()`` tell the run where the robot went.
    """
    _HIL_PLANTS[name] = factory


def _inertia_plant(robot: RobotDescription, sim_settings: Any, initial: np.ndarray) -> JointPlant:
    params = IndependentInertiaParams(limit_h_rad=robot.limit_h_rad, limit_v_rad=max(robot.limit_v_rad, 1e-3))
    return IndependentInertiaPlant(robot.n_joints, params, initial)


register_hil_plant("inertia", _inertia_plant)


def _snake3d_plant(robot: RobotDescription, sim_settings: Any, initial: np.ndarray) -> JointPlant:
    """The 3D non-smooth Aiko (paper 000) driven by the emulated motors; its [sim] table sets friction, Δt, ...

    The emulator's physics sub-step (1/4 of the 1 kHz controller period = 0.25 ms) must equal the simulator's
    Δt (sim.dt_s, 2.5e-4 s by default) so that every sub-step is one simulator step."""
    from aiko.robots.aiko.backends.hil_snake3d import Snake3DHilPlant  # lazy: numba loads the simulator
    from sim.snake3d import posture_state
    from sim.snake3d.plant import Snake3DPlant

    if sim_settings.model != "snake3d":
        raise ConfigError(f'hil.plant = "snake3d" needs sim.model = "snake3d", not {sim_settings.model!r}')
    settings = sim_settings.model_settings
    state = posture_state(
        settings.model,
        initial,
        head_direction_rad=settings.head_direction_rad,
        centre_link=settings.tracked_link,
        height_m=settings.start_height_m,
    )
    return Snake3DHilPlant(Snake3DPlant(settings.model, state))


def _snake3d_available() -> bool:
    """Whether sim.snake3d.plant exists, without importing sim.snake3d (find_spec of a submodule imports its
    parent package, and that compiles the 3D simulator: 0.25 s that `aiko run --backend can` does not need)."""
    spec = importlib.util.find_spec("sim")
    locations = spec.submodule_search_locations if spec is not None else None
    return any(Path(location, "snake3d", "plant.py").is_file() for location in locations or ())


if _snake3d_available():
    register_hil_plant("snake3d", _snake3d_plant)


@dataclass(frozen=True)
class HilSection:
    modules: str = "python"  # "python": the Python model of the firmware; "firmware": the ELF in the AVR simulator
    plant: str = "inertia"
    feedback_rate_hz: float | None = None  # default: the robot description's [modules] feedback_rate_hz
    controller_rate_hz: float = 1000.0
    free_play_deg: float | None = None  # default: the robot description's
    torque_limit_nm: float | None = None  # joint-side, set by the H-bridge current limit; default: DriveParams'
    reference_hold: str = "zoh"
    sensor: str = "gear"
    reply_to_references: bool = False


def parse_hil_section(table: Table) -> HilSection:
    section = HilSection(
        modules=table.string("modules", HilSection.modules, choices=("python", "firmware")),
        plant=table.string("plant", HilSection.plant, choices=sorted(_HIL_PLANTS)),
        feedback_rate_hz=table.number("feedback_rate_hz", None, min=1.0, max=1000.0),
        controller_rate_hz=table.number("controller_rate_hz", HilSection.controller_rate_hz, min=200.0, max=5000.0),
        free_play_deg=table.number("free_play_deg", None, min=0.0, max=10.0),
        torque_limit_nm=table.number("torque_limit_nm", None, min=0.05, max=20.0),
        reference_hold=table.string("reference_hold", HilSection.reference_hold, choices=("zoh", "linear")),
        sensor=table.string("sensor", HilSection.sensor, choices=("gear", "joint")),
        reply_to_references=table.boolean("reply_to_references", HilSection.reply_to_references),
    )
    table.finish()
    return section


register_section("hil", lambda table, experiment: parse_hil_section(table))


def drive_params(free_play_deg: float, torque_limit_nm: float | None) -> DriveParams:
    """The emulated drives with this free play and joint-side torque limit. The limit is the H-bridge's current
    limit seen through the gear (``DriveParams.torque_limit_nm``), so it is injected as that current: the motor
    saturates, and reports SATURATED, exactly where a real module with that limit would."""
    drive = DriveParams(free_play_rad=math.radians(free_play_deg))
    if torque_limit_nm is None:
        return drive
    return replace(drive, current_limit_a=drive.current_limit_a * torque_limit_nm / drive.torque_limit_nm)


_hil_channels = itertools.count()


class LockstepReceive:
    """HIL on the run's simulated clock: the emulated modules are stepped to each instant the run reaches, and the
    driver polls the bus afterwards, so a HIL run is deterministic and faster than real time. Waiting (for a
    parameter reply, for the enable confirmation) advances the emulator, not the wall clock."""

    use_notifier = False

    def __init__(self, emulator: BusTransport, pump: Callable[[], object]) -> None:
        self.emulator = emulator
        self.pump = pump

    def wait(self, dt_s: float) -> None:
        self.emulator.step_to(self.emulator.time_s + dt_s)
        self.pump()

    def advance_to(self, t_s: float) -> None:
        self.emulator.step_to(t_s)
        self.pump()

    def receive(self) -> None:
        self.pump()

    def start(self) -> None:
        """The emulator runs inside ``advance_to``."""

    def drain(self, frames_sent: int) -> None:
        """The modules handle what was sent at this instant (the DISABLE, the e-stop) before the run goes on (the
        firmware in the AVR simulator hears it from its bus: 2 ms of its time)."""
        self.emulator.settle()
        self.pump()


class RealtimeEmulatorReceive(WallClockReceive):
    """HIL with ``--realtime``: the emulator in its own thread on the wall clock, the driver's Notifier, exactly as
    against hardware."""

    def __init__(self, emulator: BusTransport) -> None:
        self.emulator = emulator

    def start(self) -> None:
        harness = getattr(self.emulator.modules, "harness", None)  # the firmware's AVR simulator process
        if harness is not None and os.sched_getscheduler(0) == os.SCHED_FIFO:  # the run's priority, for it too
            try:
                harness.set_realtime_priority(os.sched_getparam(0).sched_priority)
            except OSError as exc:
                log.warning("the AVR simulator's real-time priority was refused (%s)", exc)
        self.emulator.start()

    def drain(self, frames_sent: int) -> None:
        """Up to 0.5 s for the emulator thread to handle every frame sent, up to the DISABLE."""
        poll_until(lambda: self.emulator.frames_received >= frames_sent, 0.5, time.sleep)


class HilBackend(CanBackend):
    """The CAN backend with an emulated bus: the emulated joint modules on an in-process virtual bus."""

    name = "hil"

    def __init__(self) -> None:
        super().__init__()
        self.emulator: BusTransport | None = None
        self._emulator_bus: can.BusABC | None = None

    def _module_feedback_rate_hz(self, ctx: RunContext) -> float:
        """[hil] feedback_rate_hz if set, else the robot description's (written to the modules at activation)."""
        hil: HilSection = ctx.settings("hil")
        return hil.feedback_rate_hz if hil.feedback_rate_hz is not None else super()._module_feedback_rate_hz(ctx)

    def _open_bus(self, ctx: RunContext, section: CanSection) -> can.BusABC:
        hil: HilSection = ctx.settings("hil")
        robot = ctx.robot
        channel = f"aiko-hil-{id(self)}-{next(_hil_channels)}"
        free_play_deg = hil.free_play_deg if hil.free_play_deg is not None else math.degrees(robot.free_play_rad)
        config = EmulatorConfig(
            node_ids=tuple(robot.can_node_ids),
            controller_rate_hz=hil.controller_rate_hz,
            feedback_rate_hz=self._module_feedback_rate_hz(ctx),
            reference_period_s=1.0 / ctx.run.reference_rate_hz,
            watchdog_periods=section.watchdog_periods,
            reply_to_references=hil.reply_to_references,
            reference_hold=hil.reference_hold,
            sensor=hil.sensor,
            limit_h_rad=robot.limit_h_rad,
            limit_v_rad=max(robot.limit_v_rad, 1e-3),
            drive=drive_params(free_play_deg, hil.torque_limit_nm),
        )
        sim_settings = ctx.settings("sim") if hil.plant != "inertia" else None
        plant = _HIL_PLANTS[hil.plant](robot, sim_settings, self._initial_angles)
        physics_dt_s = 1.0 / (hil.controller_rate_hz * config.physics_substeps)
        if plant.physics_dt_s is not None and abs(plant.physics_dt_s - physics_dt_s) > 1e-12:
            raise ConfigError(
                f"{ctx.source}: hil.controller_rate_hz = {hil.controller_rate_hz} gives a "
                f"{physics_dt_s * 1e3:.4g} ms physics step but sim.dt_s = {plant.physics_dt_s}; "
                f"use controller_rate_hz = {1.0 / (config.physics_substeps * plant.physics_dt_s):g}"
            )
        if ctx.realtime and hil.plant != "inertia":
            log.warning(
                "hil.plant = %r with --realtime: the emulator thread must integrate the plant in real time; "
                "a multibody simulator that runs slower than real time makes the modules fall behind "
                "(lockstep, without --realtime, has no such limit)",
                hil.plant,
            )
        self._emulator_bus = LockstepVirtualBus(channel=channel, preserve_timestamps=True)
        if hil.modules == "firmware":
            self.emulator = self._firmware_modules(ctx, config, plant)
        else:
            self.emulator = JointControllerEmulator(
                self._emulator_bus, config, plant, timestamp_offset_s=self._timestamp_offset_s
            )
        self.hil_plant = hil.plant
        self.hil_modules = hil.modules
        self.receive_mode = (
            RealtimeEmulatorReceive(self.emulator)
            if ctx.realtime
            else LockstepReceive(self.emulator, lambda: self._require().pump())
        )
        return LockstepVirtualBus(channel=channel, preserve_timestamps=True)

    def _firmware_modules(self, ctx: RunContext, config: EmulatorConfig, plant: JointPlant) -> BusTransport:
        """The firmware on simulated boards (the harness process starts here); what it cannot do is a config error."""
        from firmware_protocol.emulator.firmware import FirmwareModules  # lazy: only runs that ask for it

        bus = self._emulator_bus
        assert bus is not None  # opened by _open_bus, which calls this
        try:
            modules = FirmwareModules(config, plant)
        except (EmulatorConfigError, HarnessError) as exc:
            bus.shutdown()
            self._emulator_bus = None
            raise ConfigError(f'{ctx.source}: hil.modules = "firmware": {exc}') from None
        return BusTransport(bus, modules, timestamp_offset_s=self._timestamp_offset_s)

    def link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        return self.emulator.plant_link_poses() if self.emulator is not None else None

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        lockstep = isinstance(self.receive_mode, LockstepReceive)
        if lockstep:  # wall-clock latencies mean nothing when time is simulated
            out.pop("ref_to_feedback_latency_p50_ms", None)
            out.pop("ref_to_feedback_latency_p99_ms", None)
        if self.emulator is not None:
            out["hil_mode"] = "lockstep" if lockstep else "realtime"
            out["hil_modules"] = self.hil_modules
            out["hil_plant"] = self.hil_plant
            out["emulator"] = self.emulator.counters()
            out["controller_ticks"] = self.emulator.tick  # of the emulated modules
            out["physics_steps"] = self.emulator.tick * self.emulator.config.physics_substeps
            solver = self.emulator.plant.solver_summary()
            if solver:
                out["plant_solver"] = solver
        return out

    def close(self) -> None:
        super().close()
        if self.emulator is not None:
            self.emulator.close()  # the real-time thread, and the AVR simulator's process behind firmware modules
        if self._emulator_bus is not None:
            self._emulator_bus.shutdown()
            self._emulator_bus = None


register_backend(
    "hil",
    HilBackend,
    "the CAN driver against emulated joint modules on a virtual bus (lockstep; --realtime for wall clock)",
    no_backend_keys,
    capabilities={"can_bus"},
)
