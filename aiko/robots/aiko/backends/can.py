"""Backend ``can``: the real robot on a CAN adapter, through the PC driver (``aiko.devices.can``).

Its pieces beside it: the ``[can]`` table and the checks a run must pass before the bus opens
(:mod:`~aiko.robots.aiko.backends.can_settings`), the streaming thread's real-time priority
(:mod:`~aiko.robots.aiko.backends.can_priority`), how the driver hears the modules
(:mod:`~aiko.robots.aiko.backends.can_receive`). This module is the lifecycle: open the bus, write the modules'
parameters, refuse a latched e-stop, enable and confirm, stream, disable, close.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from typing import Any

import can
import numpy as np

from aiko.core import realtime
from aiko.core.clock import WallClock
from aiko.core.errors import HardwareError
from aiko.core.polling import poll_until
from aiko.core.registry import register_backend
from aiko.devices.can.driver import CanDriverSettings, CanJointDriver
from aiko.devices.can.frame_log import open_can_log
from aiko.devices.can.slcan_bus import BufferedSlcanBus
from aiko.robots.aiko.backends.can_priority import (
    realtime_priority_for,
    restore_normal_priority,
    set_realtime_priority,
)
from aiko.robots.aiko.backends.can_receive import ReceiveMode, WallClockReceive
from aiko.robots.aiko.backends.can_settings import (
    CanSection,
    check_can_run,
    no_backend_keys,
)
from aiko.robots.aiko.joints import JointFeedback, JointInterface, JointReferences, JointStatus, RunContext

log = logging.getLogger(__name__)


class CanBackend(JointInterface):
    """The real robot: python-can bus from [can], Notifier for feedback, wall clock. HIL is this backend with an
    emulated bus (``backends.hil``): the same activation, refusal of a latched e-stop and enable confirmation."""

    name = "can"

    def __init__(self) -> None:
        self.driver: CanJointDriver | None = None
        self.bus: can.BusABC | None = None
        self.ctx: RunContext | None = None
        self.receive_mode: ReceiveMode = WallClockReceive()
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
        feedback_hz = self._module_feedback_rate_hz(ctx)
        check_can_run(ctx, section, feedback_hz)
        robot = ctx.robot
        nodes = tuple(robot.can_node_ids)
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
        self.realtime_priority = realtime_priority_for(ctx, section)
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
        raised = getattr(self, "_raised_threads", None)
        if raised is not None:
            raised.restore()  # the MCAP writer goes on writing the summary at normal priority
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
