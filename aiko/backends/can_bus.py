"""Backends ``can`` (the real robot on a CAN adapter) and ``hil`` (the same driver against emulated modules).

``hil`` runs the emulated ATmega128 modules in-process on a private python-can ``virtual`` bus. With the run's
simulated clock (the default) the emulator is stepped in lockstep from ``advance_to`` and the driver polls the
bus, so a HIL run is deterministic and faster than real time; with ``--realtime`` both run on the wall clock,
the emulator in its own thread and the driver with a python-can ``Notifier``, exactly as against hardware.

Experiment tables (validated when the file is loaded):
  [can]  interface, channel, bitrate, slew_limit_deg_s, feedback_timeout_s, enable_timeout_s, watchdog_periods,
         log, realtime_priority
  [hil]  plant, feedback_rate_hz, controller_rate_hz, free_play_deg, reference_hold, sensor, reply_to_references
Run options (``RunContext.options``, set by ``aiko run`` flags when present): can_interface, can_channel,
can_bitrate, can_log, can_realtime_priority, realtime.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import itertools
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import can
import numpy as np

from aiko.backends import register_backend
from aiko.can_driver.driver import CanDriverSettings, CanJointDriver
from aiko.can_driver.frame_log import open_can_log
from aiko.can_driver.slcan_bus import BufferedSlcanBus
from aiko.clock import WallClock
from aiko.errors import ConfigError, HardwareError
from aiko.experiment import Experiment, register_section
from aiko.interfaces import JointFeedback, JointInterface, JointReferences, RunContext
from aiko.robot import RobotDescription
from aiko.validation import Table
from firmware_protocol.bus_load import protocol_bus_load
from firmware_protocol.dbc import WATCHDOG_TIMEOUT_MAX_MS, WATCHDOG_TIMEOUT_MIN_MS, id_scheme
from firmware_protocol.emulator import (
    DriveParams,
    EmulatorConfig,
    IndependentInertiaParams,
    IndependentInertiaPlant,
    JointControllerEmulator,
    JointPlant,
)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class CanSection:
    interface: str = "socketcan"
    channel: str = "can0"
    bitrate: int = 1_000_000
    slew_limit_deg_s: float = 180.0
    feedback_timeout_s: float = 0.5
    enable_timeout_s: float = 1.0
    watchdog_periods: float = 3.0
    log: str | None = None
    # SCHED_FIFO priority of the streaming thread (Linux); 0 = normal scheduling; None = the default for the clock
    realtime_priority: int | None = None
    clear_estop: bool = False  # allow activate to clear an emergency stop latched in the modules


def parse_can_section(table: Table) -> CanSection:
    section = CanSection(
        interface=table.string("interface", CanSection.interface),
        channel=table.string("channel", CanSection.channel),
        bitrate=table.integer("bitrate", CanSection.bitrate, min=10_000, max=1_000_000),
        slew_limit_deg_s=table.number("slew_limit_deg_s", CanSection.slew_limit_deg_s, min=1.0, max=2000.0),
        feedback_timeout_s=table.number("feedback_timeout_s", CanSection.feedback_timeout_s, min=0.005, max=10.0),
        enable_timeout_s=table.number("enable_timeout_s", CanSection.enable_timeout_s, min=0.01, max=30.0),
        watchdog_periods=table.number("watchdog_periods", CanSection.watchdog_periods, min=1.0, max=100.0),
        log=table.string("log", None),
        realtime_priority=table.integer("realtime_priority", None, min=0, max=99),
        clear_estop=table.boolean("clear_estop", False),
    )
    table.finish()
    return section


def set_realtime_priority(priority: int) -> bool:
    """SCHED_FIFO for the calling thread (the one that streams references); False (and a warning) if refused."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (PermissionError, OSError) as exc:
        log.warning("cannot use real-time priority %d (%s); streaming with normal scheduling", priority, exc)
        return False
    return True


# On the wall clock the reference stream asks for SCHED_FIFO by default: on a loaded 2-core PC, plain scheduling
# gave a 10 Hz period jitter p99 of 5 ms, SCHED_FIFO 20 gave 0.1 ms (benchmarks/can_stream.py). Lockstep runs on the
# simulated clock compute flat out, and a FIFO thread doing that would starve the machine: they never ask for it.
WALL_CLOCK_REALTIME_PRIORITY = 20


def _realtime_priority(ctx: RunContext, section: CanSection) -> int:
    explicit = ctx.options.get("can_realtime_priority")
    if explicit is not None:
        return int(explicit)
    if section.realtime_priority is not None:
        return section.realtime_priority
    return WALL_CLOCK_REALTIME_PRIORITY if isinstance(ctx.clock, WallClock) else 0


def restore_normal_priority() -> None:
    if hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


# docs/can_protocol.md: 200 Hz references with 200 Hz feedback (81 %) is "too close to saturation"
MAX_BUS_LOAD = 0.8
DEFAULT_MODULE_FEEDBACK_RATE_HZ = 100.0  # firmware default (EmulatorConfig.feedback_rate_hz)

HilPlantFactory = Callable[[RobotDescription, Experiment, np.ndarray], JointPlant]
_HIL_PLANTS: dict[str, HilPlantFactory] = {}


def register_hil_plant(name: str, factory: HilPlantFactory) -> None:
    """A plant for ``[hil] plant = name``: ``factory(robot, experiment, initial_angles_rad (n, 2))``.

    The 3D simulator registers ``snake3d`` here with an adapter implementing
    ``firmware_protocol.emulator.JointPlant`` (joint_state / advance(torques_nm, dt_s)); if it also has
    ``link_poses()`` the HIL run reports where the robot went.
    """
    _HIL_PLANTS[name] = factory


def _inertia_plant(robot: RobotDescription, experiment: Experiment, initial: np.ndarray) -> JointPlant:
    params = IndependentInertiaParams(limit_h_rad=robot.limit_h_rad, limit_v_rad=max(robot.limit_v_rad, 1e-3))
    return IndependentInertiaPlant(robot.n_joints, params, initial)


register_hil_plant("inertia", _inertia_plant)


class _Snake3DHilPlant:
    """issue 4's `sim.snake3d.plant.Snake3DPlant` plus the link poses the control loop tracks."""

    def __init__(self, plant) -> None:
        self.plant = plant

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.plant.joint_state()

    def advance(self, torques_nm: np.ndarray, dt_s: float) -> None:
        self.plant.advance(torques_nm, dt_s)

    def link_poses(self) -> tuple[np.ndarray, np.ndarray]:
        state = self.plant.simulator.state
        return state.position_m.copy(), state.quaternion.copy()

    def solver_summary(self) -> dict[str, Any]:
        """The contact solver's statistics, with the keys the sim backend reports."""
        from aiko.backends.sim_snake3d import contact_solver_summary

        return contact_solver_summary(self.plant.simulator.stats)


def _snake3d_plant(robot: RobotDescription, experiment: Experiment, initial: np.ndarray) -> JointPlant:
    """The 3D non-smooth Aiko (paper 000) driven by the emulated motors; its [sim] table sets friction, Δt, ...

    The emulator's physics sub-step (1/4 of the 1 kHz controller period = 0.25 ms) must equal the simulator's
    Δt (sim.dt_s, 2.5e-4 s by default) so that every sub-step is one simulator step."""
    from aiko.backends.sim_snake3d import parse_settings  # lazy: numba compiles the simulator on first use
    from sim.snake3d import posture_state
    from sim.snake3d.plant import Snake3DPlant

    settings = parse_settings(experiment.section("sim"), robot)
    state = posture_state(
        settings.model,
        initial,
        head_direction_rad=settings.head_direction_rad,
        centre_link=settings.tracked_link,
        height_m=settings.start_height_m,
    )
    return _Snake3DHilPlant(Snake3DPlant(settings.model, state))


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
    plant: str = "inertia"
    feedback_rate_hz: float = 100.0
    controller_rate_hz: float = 1000.0
    free_play_deg: float | None = None  # default: the robot description's
    reference_hold: str = "zoh"
    sensor: str = "gear"
    reply_to_references: bool = False


def parse_hil_section(table: Table) -> HilSection:
    section = HilSection(
        plant=table.string("plant", HilSection.plant, choices=sorted(_HIL_PLANTS)),
        feedback_rate_hz=table.number("feedback_rate_hz", HilSection.feedback_rate_hz, min=1.0, max=1000.0),
        controller_rate_hz=table.number("controller_rate_hz", HilSection.controller_rate_hz, min=200.0, max=5000.0),
        free_play_deg=table.number("free_play_deg", None, min=0.0, max=10.0),
        reference_hold=table.string("reference_hold", HilSection.reference_hold, choices=("zoh", "linear")),
        sensor=table.string("sensor", HilSection.sensor, choices=("gear", "joint")),
        reply_to_references=table.boolean("reply_to_references", HilSection.reply_to_references),
    )
    table.finish()
    return section


register_section("can", lambda table, experiment: parse_can_section(table))
register_section("hil", lambda table, experiment: parse_hil_section(table))


def add_can_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for ``aiko run`` (the lead wires them): they override the experiment's [can] table."""
    parser.add_argument(
        "--interface", metavar="NAME", help="python-can interface for --backend can (socketcan, slcan, ...)"
    )
    parser.add_argument("--channel", metavar="CH", help="CAN channel, e.g. can0, vcan0, /dev/ttyACM0")
    parser.add_argument("--bitrate", type=int, metavar="BPS", help="CAN bitrate (default 1000000)")
    parser.add_argument("--can-log", metavar="PATH", help="write every CAN frame (.asc .blf .log .csv .trc)")
    parser.add_argument("--rt-priority", type=int, metavar="P", help="SCHED_FIFO priority of the streaming thread")


def can_context_options(args: argparse.Namespace) -> dict[str, Any]:
    """``RunContext.options`` from the flags above (only those given), range-checked like their [can] keys."""
    for attr, flag, low, high in (("bitrate", "--bitrate", 10_000, 1_000_000), ("rt_priority", "--rt-priority", 0, 99)):
        value = getattr(args, attr, None)
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{flag} {value} is out of range [{low}, {high}]")
    keys = {
        "interface": "can_interface",
        "channel": "can_channel",
        "bitrate": "can_bitrate",
        "can_log": "can_log",
        "rt_priority": "can_realtime_priority",
    }
    return {option: getattr(args, attr) for attr, option in keys.items() if getattr(args, attr, None) is not None}


def _no_backend_keys(table: Table) -> None:
    table.finish()  # settings live in [can] / [hil]; [backend.can] and [backend.hil] take no keys


# -------------------------------------------------------------------------------------------- backends
class CanBackend(JointInterface):
    """The real robot: python-can bus from [can] (or run options), Notifier for feedback, wall clock."""

    name = "can"

    def __init__(self) -> None:
        self.driver: CanJointDriver | None = None
        self.bus: can.BusABC | None = None
        self.ctx: RunContext | None = None
        self._initial_angles: np.ndarray | None = None
        self._active = False

    # -- hooks the HIL backend overrides
    def _open_bus(self, ctx: RunContext, section: CanSection) -> can.BusABC:
        interface = ctx.options.get("can_interface") or section.interface
        channel = ctx.options.get("can_channel") or section.channel
        bitrate = int(ctx.options.get("can_bitrate") or section.bitrate)
        try:
            if interface == "slcan":  # python-can's own slcan, with a buffered reader (see slcan_bus.py)
                return BufferedSlcanBus(channel=channel, bitrate=bitrate)
            return can.Bus(interface=interface, channel=channel, bitrate=bitrate)
        except (can.CanError, OSError, ValueError, ImportError) as exc:
            raise HardwareError(
                f"cannot open CAN bus interface={interface!r} channel={channel!r} bitrate={bitrate}: {exc} "
                "(see docs/can_hil.md: socketcan needs 'ip link set can0 up type can bitrate 1000000')"
            ) from None

    def _lockstep(self) -> bool:
        return False

    def _module_feedback_rate_hz(self, ctx: RunContext) -> float:
        """The modules' own feedback rate (the firmware's default; the PC does not set it)."""
        return DEFAULT_MODULE_FEEDBACK_RATE_HZ

    def _wait(self, dt_s: float) -> None:
        time.sleep(dt_s)

    # -- lifecycle
    def configure(self, ctx: RunContext) -> None:
        self.ctx = ctx
        section = parse_can_section(ctx.experiment.section("can"))
        robot = ctx.robot
        nodes = tuple(robot.can_node_ids)
        unknown = [n for n in nodes if n not in id_scheme().node_ids]
        if unknown:
            raise ConfigError(
                f"{robot.source}: joints.can_node_ids {list(unknown)} are not defined in aiko_joint.dbc "
                f"(nodes {id_scheme().node_ids[0]}..{id_scheme().node_ids[-1]})"
            )
        rate_hz = ctx.experiment.run.reference_rate_hz
        timeout_ms = section.watchdog_periods * 1e3 / rate_hz
        if not WATCHDOG_TIMEOUT_MIN_MS <= timeout_ms <= WATCHDOG_TIMEOUT_MAX_MS:
            raise ConfigError(
                f"{ctx.experiment.path}: can.watchdog_periods = {section.watchdog_periods:g} at "
                f"run.reference_rate_hz = {rate_hz:g} is a {timeout_ms:g} ms watchdog; the modules accept "
                f"{WATCHDOG_TIMEOUT_MIN_MS:g}..{WATCHDOG_TIMEOUT_MAX_MS:g} ms"
            )
        bitrate = int(ctx.options.get("can_bitrate") or section.bitrate)
        feedback_hz = self._module_feedback_rate_hz(ctx)
        load = protocol_bus_load(rate_hz, feedback_hz, len(nodes), bitrate).load_fraction
        if load > MAX_BUS_LOAD:
            raise ConfigError(
                f"{ctx.experiment.path}: run.reference_rate_hz = {rate_hz:g} with {len(nodes)} modules answering at "
                f"{feedback_hz:g} Hz loads the {bitrate} bit/s bus to {100 * load:.0f} % (worst case) and more than "
                f"{100 * MAX_BUS_LOAD:.0f} % leaves no room for the e-stop and retransmissions; lower the rate "
                "(`aiko can bus-load` computes it)"
            )
        peak_rate = getattr(ctx.gait, "peak_rate_rad_s", None)
        if callable(peak_rate) and math.degrees(peak_rate()) > section.slew_limit_deg_s * (1 + 1e-9):
            raise ConfigError(
                f"{ctx.experiment.path}: the gait moves its joints at up to {math.degrees(peak_rate()):.4g} deg/s but "
                f"can.slew_limit_deg_s = {section.slew_limit_deg_s:g}: the references would be rate limited into "
                "a different gait; lower the gait's amplitude or frequency (or raise the slew limit)"
            )
        settings = CanDriverSettings(
            nodes=nodes,
            limit_h_rad=robot.limit_h_rad,
            limit_v_rad=robot.limit_v_rad,
            reference_rate_hz=ctx.experiment.run.reference_rate_hz,
            slew_limit_rad_s=math.radians(section.slew_limit_deg_s),
            stale_after_s=section.feedback_timeout_s,
            enable_timeout_s=section.enable_timeout_s,
            watchdog_periods=section.watchdog_periods,
        )
        self.realtime_priority = _realtime_priority(ctx, section)
        self._priority_raised = False
        self.clear_estop = section.clear_estop
        log_path = ctx.options.get("can_log") or section.log
        frame_log = open_can_log(log_path) if log_path else None
        self.can_log_path = str(log_path) if log_path else None
        posture = ctx.gait.initial_posture() if ctx.gait is not None else None
        n = robot.n_joints
        self._initial_angles = (
            np.zeros((n, 2)) if posture is None else np.column_stack([posture.angle_h_rad, posture.angle_v_rad])
        )
        self._initial_angles = np.column_stack(robot.clamp(self._initial_angles[:, 0], self._initial_angles[:, 1]))
        # one epoch offset for every frame stamp of the run (driver and in-process emulator alike)
        self._timestamp_offset_s = time.time() - ctx.clock.now_s()
        try:
            self.bus = self._open_bus(ctx, section)
        except BaseException:
            if frame_log is not None:
                frame_log.stop()
            raise
        clock = ctx.clock
        self.driver = CanJointDriver(
            self.bus,
            settings,
            clock.now_s,
            use_notifier=not self._lockstep(),
            frame_log=frame_log,
            timestamp_offset_s=self._timestamp_offset_s,
            on_event=lambda kind, fields: ctx.recorder.event(kind, clock.now_ns(), **fields),
        )

    def _require(self) -> CanJointDriver:
        if self.driver is None:
            raise RuntimeError(f"{self.name} backend used before configure()")
        return self.driver

    def _start_threads(self) -> None:
        """Hook: threads that must start after the priority is set (the HIL emulator)."""

    def activate(self) -> None:
        driver = self._require()
        # before any thread starts: the Notifier (and the HIL emulator) inherit SCHED_FIFO, so no thread that
        # holds the GIL can be preempted by other processes while the sender waits for it (priority inversion)
        self._priority_raised = set_realtime_priority(self.realtime_priority)
        gc.collect()
        gc.freeze()  # what exists now is never scanned again: shorter collector pauses while streaming
        self._gc_frozen = True
        self._start_threads()
        driver.start()
        if self._priority_raised:  # the sender one level above its helper threads: it preempts them at once
            set_realtime_priority(min(self.realtime_priority + 1, 99))
        s = driver.settings
        driver.write_module_parameters(self._wait, s.enable_timeout_s)
        self._refuse_latched_estop(s.enable_timeout_s)
        driver.enable()
        self._active = True
        self._await_enabled(s.enable_timeout_s)
        feedback = driver.feedback_arrays()
        start = np.where(feedback["have_feedback"][:, None], feedback["angle_rad"], self._initial_angles)
        driver.shaper.reset(start, None)
        self._restart_wall_clock()
        driver.health.reset(self.ctx.clock.now_s())

    def _restart_wall_clock(self) -> None:
        """Run time 0 = the modules are enabled. The parameter handshake and the enable confirmation take
        10-300 ms; a wall clock started before them would put the first deadlines in the past and the loop
        would send a burst of late references. (The loop records its "start" event right after activate.)"""
        clock = self.ctx.clock if self.ctx is not None else None
        if isinstance(clock, WallClock):
            clock.start_ns = time.monotonic_ns()
            if self.driver is not None:  # frame-log stamps stay on the epoch time the bus stamps received frames with
                self.driver.timestamp_offset_s = time.time() - clock.now_s()

    def _refuse_latched_estop(self, timeout_s: float) -> None:
        """An emergency stop latched in a module is cleared by a person, not by starting the next run."""
        driver = self._require()
        for _ in range(max(1, int(timeout_s / 0.005))):  # every module's first feedback (status) frame
            if driver.feedback_arrays()["have_feedback"].all():
                break
            self._wait(0.005)
        latched = [m.node for m in driver.health.modules.values() if m.estop]
        if latched and not self.clear_estop:
            raise HardwareError(
                f"joint modules {latched} are latched in EMERGENCY STOP; make the robot safe, then run again "
                "with --set can.clear_estop=true to clear it"
            )
        if latched:
            log.warning("clearing the emergency stop latched in modules %s (can.clear_estop = true)", latched)

    def _await_enabled(self, timeout_s: float) -> None:
        driver = self._require()
        for _ in range(max(1, int(timeout_s / 0.005))):
            self._wait(0.005)
            status = driver.feedback_arrays()["status"]
            if np.all(status & 1):
                return
        missing = [
            node
            for node, st in zip(driver.settings.nodes, driver.feedback_arrays()["status"], strict=True)
            if not st & 1
        ]
        self.deactivate()
        raise HardwareError(f"joint modules {missing} did not report ENABLED within {timeout_s} s after enable")

    def write(self, refs: JointReferences) -> None:
        if not self._active:
            return
        angle = np.column_stack([refs.angle_h_rad, refs.angle_v_rad])
        rate = np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s])
        self._require().write(refs.t_s, angle, rate)

    def read(self) -> JointFeedback:
        driver = self._require()
        f = driver.feedback_arrays()
        t_s = self.ctx.clock.now_s() if self.ctx is not None else 0.0
        driver.health.check(t_s)  # a module that went silent is reported even while the PC is not writing
        return JointFeedback(
            t_s,
            f["angle_rad"][:, 0].copy(),
            f["angle_rad"][:, 1].copy(),
            f["rate_rad_s"][:, 0].copy(),
            f["rate_rad_s"][:, 1].copy(),
            f["status"],
            f["effort"][:, 0].copy(),
            f["effort"][:, 1].copy(),
        )

    def stale_modules(self) -> list[int]:
        """Nodes whose feedback is older than can.feedback_timeout_s (the loop stops the run on them)."""
        if self.driver is None or not self._active:
            return []
        return [m.node for m in self.driver.health.modules.values() if m.stale]

    def disabled_modules(self) -> list[int]:
        """Nodes that were enabled and then reported disabled, not by this run (the loop stops the run on them)."""
        if self.driver is None or not self._active:
            return []
        return [m.node for m in self.driver.health.modules.values() if m.lost_enable]

    def deactivate(self) -> None:
        """Broadcast DISABLE. Called on every exit path (the loop's finally, the runner's finally): idempotent."""
        if self.driver is None or self.driver.closed:
            return
        try:
            self.driver.disable()
        except Exception as exc:  # noqa: BLE001 - a failing bus must not mask the original error
            log.error("could not send DISABLE: %s", exc)
        self._active = False

    def emergency_stop(self) -> None:
        if self.driver is not None and not self.driver.closed:
            self.driver.emergency_stop()
        self._active = False

    def summary(self) -> dict[str, Any]:
        if self.driver is None:
            return {}
        out = self.driver.statistics()
        out["can_log_path"] = self.can_log_path
        out["realtime_priority"] = self.realtime_priority if self._priority_raised else 0
        out["module_health"] = self.driver.health.snapshot(self.ctx.clock.now_s() if self.ctx else 0.0)
        return out

    def close(self) -> None:
        if getattr(self, "_gc_frozen", False):
            gc.unfreeze()
            self._gc_frozen = False
        if getattr(self, "_priority_raised", False):
            restore_normal_priority()
            self._priority_raised = False
        if self.driver is not None:
            self.deactivate()
            self.driver.close()
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None


_hil_channels = itertools.count()


class HilBackend(CanBackend):
    """The CAN driver against emulated joint modules on an in-process virtual bus (no hardware)."""

    name = "hil"

    def __init__(self) -> None:
        super().__init__()
        self.emulator: JointControllerEmulator | None = None
        self._emulator_bus: can.BusABC | None = None
        self._realtime = False

    def _lockstep(self) -> bool:
        return not self._realtime

    def _module_feedback_rate_hz(self, ctx: RunContext) -> float:
        return parse_hil_section(ctx.experiment.section("hil")).feedback_rate_hz

    def _open_bus(self, ctx: RunContext, section: CanSection) -> can.BusABC:
        self._realtime = bool(ctx.options.get("realtime", False))
        hil = parse_hil_section(ctx.experiment.section("hil"))
        robot = ctx.robot
        channel = f"aiko-hil-{id(self)}-{next(_hil_channels)}"
        free_play_deg = hil.free_play_deg if hil.free_play_deg is not None else math.degrees(robot.free_play_rad)
        config = EmulatorConfig(
            node_ids=tuple(robot.can_node_ids),
            controller_rate_hz=hil.controller_rate_hz,
            feedback_rate_hz=hil.feedback_rate_hz,
            reference_period_s=1.0 / ctx.experiment.run.reference_rate_hz,
            watchdog_periods=section.watchdog_periods,
            reply_to_references=hil.reply_to_references,
            reference_hold=hil.reference_hold,
            sensor=hil.sensor,
            limit_h_rad=robot.limit_h_rad,
            limit_v_rad=max(robot.limit_v_rad, 1e-3),
            drive=DriveParams(free_play_rad=math.radians(free_play_deg)),
        )
        plant = _HIL_PLANTS[hil.plant](robot, ctx.experiment, self._initial_angles)
        sim_dt_s = getattr(getattr(getattr(plant, "plant", None), "simulator", None), "model", None)
        physics_dt_s = 1.0 / (hil.controller_rate_hz * config.physics_substeps)
        if sim_dt_s is not None and abs(sim_dt_s.dt_s - physics_dt_s) > 1e-12:
            raise ConfigError(
                f"{ctx.experiment.path}: hil.controller_rate_hz = {hil.controller_rate_hz} gives a "
                f"{physics_dt_s * 1e3:.4g} ms physics step but sim.dt_s = {sim_dt_s.dt_s}; "
                f"use controller_rate_hz = {1.0 / (config.physics_substeps * sim_dt_s.dt_s):g}"
            )
        if self._realtime and hil.plant != "inertia":
            log.warning(
                "hil.plant = %r with --realtime: the emulator thread must integrate the plant in real time; "
                "a multibody simulator that runs slower than real time makes the modules fall behind "
                "(lockstep, without --realtime, has no such limit)",
                hil.plant,
            )
        self._emulator_bus = can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)
        self.emulator = JointControllerEmulator(
            self._emulator_bus, config, plant, timestamp_offset_s=self._timestamp_offset_s
        )
        self.hil_plant = hil.plant
        return can.Bus(interface="virtual", channel=channel, preserve_timestamps=True)

    def _start_threads(self) -> None:
        if self._realtime and self.emulator is not None:
            self.emulator.start()

    def _wait(self, dt_s: float) -> None:
        if self._realtime:
            time.sleep(dt_s)
            return
        # lockstep: let the modules handle what was sent at the current instant, then read their answers
        assert self.emulator is not None and self.driver is not None
        self.emulator.step_to(self.emulator.time_s)
        self.driver.pump()

    def activate(self) -> None:
        assert self.emulator is not None
        if self._realtime:
            super().activate()
            return
        driver = self._require()
        driver.write_module_parameters(self._wait, driver.settings.enable_timeout_s)
        driver.enable()
        self._wait(0.0)
        self._active = True
        driver.shaper.reset(self._initial_angles, None)
        driver.health.reset(self.ctx.clock.now_s())

    def advance_to(self, t_s: float) -> None:
        if self._realtime or self.emulator is None or self.driver is None:
            return
        self.emulator.step_to(t_s)
        self.driver.pump()

    def read(self) -> JointFeedback:
        if not self._realtime and self.driver is not None:
            self.driver.pump()
        return super().read()

    def deactivate(self) -> None:
        super().deactivate()
        if self.emulator is None or self.driver is None or self.driver.closed:
            return
        if not self._realtime:
            self._wait(0.0)
            return
        # real time: give the emulator thread up to 0.5 s to handle every frame sent, up to the DISABLE
        for _ in range(100):
            if self.emulator.frames_received >= self.driver.frames_sent:
                break
            time.sleep(0.005)

    def emergency_stop(self) -> None:
        super().emergency_stop()
        if not self._realtime and self.emulator is not None:
            self.emulator.poll_bus()

    def link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        poses = getattr(self.emulator.plant, "link_poses", None) if self.emulator is not None else None
        return poses() if callable(poses) else None

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        if not self._realtime:  # wall-clock latencies mean nothing when time is simulated
            out.pop("ref_to_feedback_latency_p50_ms", None)
            out.pop("ref_to_feedback_latency_p99_ms", None)
        if self.emulator is not None:
            out["hil_mode"] = "realtime" if self._realtime else "lockstep"
            out["hil_plant"] = self.hil_plant
            out["emulator"] = self.emulator.counters()
            out["steps"] = self.emulator.tick  # controller ticks of the emulated modules
            out["physics_steps"] = self.emulator.tick * self.emulator.config.physics_substeps
            solver = getattr(self.emulator.plant, "solver_summary", None)
            if callable(solver):
                out["plant_solver"] = solver()
        return out

    def close(self) -> None:
        super().close()
        if self.emulator is not None:
            self.emulator.stop()
        if self._emulator_bus is not None:
            self._emulator_bus.shutdown()
            self._emulator_bus = None


register_backend(
    "can",
    CanBackend,
    "the real robot over CAN ([can] interface/channel/bitrate; wall clock)",
    _no_backend_keys,
)
register_backend(
    "hil",
    HilBackend,
    "the CAN driver against emulated joint modules on a virtual bus (lockstep; --realtime for wall clock)",
    _no_backend_keys,
)
