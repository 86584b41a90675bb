"""Backend ``can``: the real robot on a CAN adapter, through the PC driver (``aiko.devices.can``).

Experiment table (validated when the file is loaded; ``aiko run --interface/--channel/--bitrate/--can-log/
--rt-priority`` override its keys):
  [can]  interface, channel, bitrate, slew_limit_deg_s, feedback_timeout_s, enable_timeout_s, watchdog_periods,
         log, realtime_priority, clear_estop
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import can
import numpy as np

from aiko.core import realtime
from aiko.core.clock import WallClock
from aiko.core.config import Table
from aiko.core.errors import ConfigError, HardwareError
from aiko.core.polling import poll_until
from aiko.core.registry import register_backend, register_section
from aiko.devices.can.driver import CanDriverSettings, CanJointDriver
from aiko.devices.can.frame_log import open_can_log
from aiko.devices.can.slcan_bus import BufferedSlcanBus
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext
from firmware_protocol.bus_load import protocol_bus_load
from firmware_protocol.dbc import WATCHDOG_TIMEOUT_MAX_MS, WATCHDOG_TIMEOUT_MIN_MS, id_scheme

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
    if priority <= 0 or not realtime.fifo_available():
        return False
    if not realtime.set_fifo(priority):
        log.warning("cannot use real-time priority %d; streaming with normal scheduling", priority)
        return False
    return True


# On the wall clock the reference stream asks for SCHED_FIFO by default: on a loaded 2-core PC, plain scheduling
# gave a 10 Hz period jitter p99 of 5 ms, SCHED_FIFO 20 gave 0.1 ms (benchmarks/can_stream.py). Lockstep runs on the
# simulated clock compute flat out, and a FIFO thread doing that would starve the machine: they never ask for it.
WALL_CLOCK_REALTIME_PRIORITY = 20


def _realtime_priority(ctx: RunContext, section: CanSection) -> int:
    if section.realtime_priority is not None:
        return section.realtime_priority
    return WALL_CLOCK_REALTIME_PRIORITY if isinstance(ctx.clock, WallClock) else 0


def restore_normal_priority() -> None:
    realtime.set_normal()


# docs/can_protocol.md: 200 Hz references with 200 Hz feedback (81 %) is "too close to saturation"
MAX_BUS_LOAD = 0.8


register_section("can", lambda table, experiment: parse_can_section(table))


def add_can_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for ``aiko run``: they override the experiment's [can] table (see :func:`can_overrides`)."""
    parser.add_argument(
        "--interface", metavar="NAME", help="python-can interface for --backend can (socketcan, slcan, ...)"
    )
    parser.add_argument("--channel", metavar="CH", help="CAN channel, e.g. can0, vcan0, /dev/ttyACM0")
    parser.add_argument("--bitrate", type=int, metavar="BPS", help="CAN bitrate (default 1000000)")
    parser.add_argument("--can-log", metavar="PATH", help="write every CAN frame (.asc .blf .log .csv .trc)")
    parser.add_argument("--rt-priority", type=int, metavar="P", help="SCHED_FIFO priority of the streaming thread")


CAN_FLAG_KEYS = {
    "interface": "can.interface",
    "channel": "can.channel",
    "bitrate": "can.bitrate",
    "can_log": "can.log",
    "rt_priority": "can.realtime_priority",
}


def can_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags above (only those given) as experiment overrides of [can], range-checked under their own names."""
    for attr, flag, low, high in (("bitrate", "--bitrate", 10_000, 1_000_000), ("rt_priority", "--rt-priority", 0, 99)):
        value = getattr(args, attr, None)
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{flag} {value} is out of range [{low}, {high}]")
    return {key: getattr(args, attr) for attr, key in CAN_FLAG_KEYS.items() if getattr(args, attr, None) is not None}


def no_backend_keys(table: Table) -> None:
    table.finish()  # settings live in [can] / [hil]; [backend.can] and [backend.hil] take no keys


# -------------------------------------------------------------------------------------------- backend
class WallClockReceive:
    """How the driver hears the modules on real hardware (and in real-time HIL): a python-can ``Notifier`` thread
    receives, and waiting for an answer is sleeping. The other mode is HIL's lockstep (``backends.hil``)."""

    use_notifier = True

    def wait(self, dt_s: float) -> None:
        time.sleep(dt_s)

    def advance_to(self, t_s: float) -> None:
        """Time passes by itself."""

    def receive(self) -> None:
        """The Notifier has already delivered every frame."""

    def start(self) -> None:
        """Nothing of ours runs beside the driver."""

    def drain(self, frames_sent: int) -> None:
        """The bus delivers what was sent."""


class CanBackend(JointInterface):
    """The real robot: python-can bus from [can], Notifier for feedback, wall clock. HIL is this backend with an
    emulated bus (``backends.hil``): the same activation, refusal of a latched e-stop and enable confirmation."""

    name = "can"

    def __init__(self) -> None:
        self.driver: CanJointDriver | None = None
        self.bus: can.BusABC | None = None
        self.ctx: RunContext | None = None
        self.receive_mode: WallClockReceive = WallClockReceive()
        self._initial_angles: np.ndarray | None = None
        self._active = False

    # -- what the HIL backend replaces: the bus (and how it is heard), the modules' feedback rate
    def _open_bus(self, ctx: RunContext, section: CanSection) -> can.BusABC:
        interface, channel, bitrate = section.interface, section.channel, section.bitrate
        try:
            if interface == "slcan":  # python-can's own slcan, with a buffered reader (see slcan_bus.py)
                return BufferedSlcanBus(channel=channel, bitrate=bitrate)
            return can.Bus(interface=interface, channel=channel, bitrate=bitrate)
        except (can.CanError, OSError, ValueError, ImportError) as exc:
            raise HardwareError(
                f"cannot open CAN bus interface={interface!r} channel={channel!r} bitrate={bitrate}: {exc} "
                "(see docs/can_hil.md: socketcan needs 'ip link set can0 up type can bitrate 1000000')"
            ) from None

    def _module_feedback_rate_hz(self, ctx: RunContext) -> float:
        """The modules' own feedback rate: the robot description's (written to them at activation)."""
        return ctx.robot.modules.feedback_rate_hz

    # -- lifecycle
    def configure(self, ctx: RunContext) -> None:
        self.ctx = ctx
        section: CanSection = ctx.settings("can")
        robot = ctx.robot
        nodes = tuple(robot.can_node_ids)
        unknown = [n for n in nodes if n not in id_scheme().node_ids]
        if unknown:
            raise ConfigError(
                f"{robot.source}: joints.can_node_ids {list(unknown)} are not defined in aiko_joint.dbc "
                f"(nodes {id_scheme().node_ids[0]}..{id_scheme().node_ids[-1]})"
            )
        rate_hz = ctx.run.reference_rate_hz
        timeout_ms = section.watchdog_periods * 1e3 / rate_hz
        if not WATCHDOG_TIMEOUT_MIN_MS <= timeout_ms <= WATCHDOG_TIMEOUT_MAX_MS:
            raise ConfigError(
                f"{ctx.source}: can.watchdog_periods = {section.watchdog_periods:g} at "
                f"run.reference_rate_hz = {rate_hz:g} is a {timeout_ms:g} ms watchdog; the modules accept "
                f"{WATCHDOG_TIMEOUT_MIN_MS:g}..{WATCHDOG_TIMEOUT_MAX_MS:g} ms"
            )
        bitrate = section.bitrate
        feedback_hz = self._module_feedback_rate_hz(ctx)
        load = protocol_bus_load(rate_hz, feedback_hz, len(nodes), bitrate).load_fraction
        if load > MAX_BUS_LOAD:
            raise ConfigError(
                f"{ctx.source}: run.reference_rate_hz = {rate_hz:g} with {len(nodes)} modules answering at "
                f"{feedback_hz:g} Hz loads the {bitrate} bit/s bus to {100 * load:.0f} % (worst case) and more than "
                f"{100 * MAX_BUS_LOAD:.0f} % leaves no room for the e-stop and retransmissions; lower the rate "
                "(`aiko can bus-load` computes it)"
            )
        peak_rate = getattr(ctx.gait, "peak_rate_rad_s", None)
        if callable(peak_rate) and math.degrees(peak_rate()) > section.slew_limit_deg_s * (1 + 1e-9):
            raise ConfigError(
                f"{ctx.source}: the gait moves its joints at up to {math.degrees(peak_rate()):.4g} deg/s but "
                f"can.slew_limit_deg_s = {section.slew_limit_deg_s:g}: the references would be rate limited into "
                "a different gait; lower the gait's amplitude or frequency (or raise the slew limit)"
            )
        settings = CanDriverSettings(
            nodes=nodes,
            limit_h_rad=robot.limit_h_rad,
            limit_v_rad=robot.limit_v_rad,
            reference_rate_hz=ctx.run.reference_rate_hz,
            slew_limit_rad_s=math.radians(section.slew_limit_deg_s),
            stale_after_s=section.feedback_timeout_s,
            enable_timeout_s=section.enable_timeout_s,
            watchdog_periods=section.watchdog_periods,
            gains_v=robot.modules.gains_v,
            module_feedback_rate_hz=feedback_hz,
        )
        self.realtime_priority = _realtime_priority(ctx, section)
        self._priority_raised = False
        self._raised_threads: realtime.RaisedThreads | None = None
        self.clear_estop = section.clear_estop
        log_path = section.log
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
            use_notifier=self.receive_mode.use_notifier,
            frame_log=frame_log,
            timestamp_offset_s=self._timestamp_offset_s,
            on_event=lambda kind, fields: ctx.recorder.event(kind, clock.now_ns(), **fields),
        )

    def _require(self) -> CanJointDriver:
        if self.driver is None:
            raise RuntimeError(f"{self.name} backend used before configure()")
        return self.driver

    def activate(self) -> None:
        driver = self._require()
        # before our threads start: the Notifier (and the HIL emulator) inherit SCHED_FIFO; the threads already
        # running (the MCAP writer, a live Foxglove server) are raised to it: no thread that holds the GIL can be
        # preempted by other processes while the sender waits for it (priority inversion; aiko.core.realtime)
        self._priority_raised = set_realtime_priority(self.realtime_priority)
        if self._priority_raised:
            self._raised_threads = realtime.raise_python_threads(self.realtime_priority)
        gc.collect()
        gc.freeze()  # what exists now is never scanned again: shorter collector pauses while streaming
        self._gc_frozen = True
        self.receive_mode.start()  # after the priority is set: the HIL emulator thread inherits it
        driver.start()
        if self._priority_raised:  # the sender one level above its helper threads: it preempts them at once
            set_realtime_priority(min(self.realtime_priority + 1, 99))
        s = driver.settings
        driver.write_module_parameters(self.receive_mode.wait, s.enable_timeout_s)
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
        """Before Enable, every module's status: one that is silent is not enabled with the others (the robot would
        move with a limp joint), and an emergency stop latched in a module is cleared by a person, not by
        starting the next run."""
        driver = self._require()
        heard = driver.feedback_arrays
        if not poll_until(lambda: bool(heard()["have_feedback"].all()), timeout_s, self.receive_mode.wait):
            silent = [n for n, ok in zip(driver.settings.nodes, heard()["have_feedback"], strict=True) if not ok]
            raise HardwareError(
                f"joint modules {silent} sent no status within {timeout_s} s; nothing was enabled "
                "(check their power, the bus wiring and their node ids)"
            )
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
        if poll_until(
            lambda: bool(np.all(driver.feedback_arrays()["status"] & JointStatus.ENABLED)),
            timeout_s,
            self.receive_mode.wait,
            first_wait=True,
        ):
            return
        missing = [
            node
            for node, st in zip(driver.settings.nodes, driver.feedback_arrays()["status"], strict=True)
            if not st & JointStatus.ENABLED
        ]
        self.deactivate()
        raise HardwareError(f"joint modules {missing} did not report ENABLED within {timeout_s} s after enable")

    def write(self, refs: JointReferences) -> None:
        if not self._active:
            return
        angle = np.column_stack([refs.angle_h_rad, refs.angle_v_rad])
        rate = np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s])
        self._require().write(refs.t_s, angle, rate)

    def advance_to(self, t_s: float) -> None:
        self.receive_mode.advance_to(t_s)

    def read(self) -> JointFeedback:
        driver = self._require()
        self.receive_mode.receive()
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
        self.receive_mode.drain(self.driver.frames_sent)

    def emergency_stop(self) -> None:
        if self.driver is not None and not self.driver.closed:
            self.driver.emergency_stop()
            self.receive_mode.drain(self.driver.frames_sent)
        self._active = False

    def summary(self) -> dict[str, Any]:
        if self.driver is None:
            return {}
        out = self.driver.statistics()
        out["can_log_path"] = self.can_log_path
        out["realtime_priority"] = self.realtime_priority if self._priority_raised else 0
        if self._raised_threads is not None:  # helper threads raised to the run's priority; the kernel refused these
            out["realtime_threads_refused"] = list(self._raised_threads.refused)
        out["module_health"] = self.driver.health.snapshot(self.ctx.clock.now_s() if self.ctx else 0.0)
        return out

    def close(self) -> None:
        if getattr(self, "_gc_frozen", False):
            gc.unfreeze()
            self._gc_frozen = False
        if getattr(self, "_priority_raised", False):
            restore_normal_priority()
            self._priority_raised = False
        if getattr(self, "_raised_threads", None) is not None:
            self._raised_threads.restore()  # the MCAP writer goes on writing the summary at normal priority
            self._raised_threads = None
        if self.driver is not None:
            self.deactivate()
            self.driver.close()
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None


register_backend(
    "can",
    CanBackend,
    "the real robot over CAN ([can] interface/channel/bitrate; wall clock)",
    no_backend_keys,
    wall_clock_only=True,
    capabilities={"can_bus", "hardware_can_bus"},
)
