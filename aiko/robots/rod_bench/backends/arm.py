"""``--backend hil`` and ``--backend real``: one backend class, the UR3 through our driver (ur_rtde behind
:class:`aiko.devices.ur.arm.UR3Arm`'s limits). They differ only in where the controller is: ``real`` connects to
``[ur3] host``; ``hil`` first starts ``aiko emulate ur3`` in another process on a loopback address with the
Cosserat plant of the same experiment (:mod:`aiko.robots.rod_bench.plant`) and connects there.

Above the device interface the path is the same: configure connects and moves the flange to the trajectory's start
with moveL (at ``[ur3] approach_speed_m_s``); every target is one servoL; every read is the arm's state plus
``actual_TCP_force`` (the rod's base wrench reaches the flange there). Deactivation stops the arm; close
disconnects, then stops the emulator (HIL) — on every exit path, since the run calls both from ``finally``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from aiko.core.errors import ConfigError
from aiko.core.interfaces import Backend
from aiko.devices.ur.arm import ArmLimits, UR3Arm
from aiko.robots.rod_bench.backends import register_bench_backend
from aiko.robots.rod_bench.context import BenchContext
from aiko.robots.rod_bench.controller_clock import ControllerClock
from aiko.robots.rod_bench.messages import BenchObservation, FlangeTarget
from aiko.robots.rod_bench.mount import Mount


class ControllerSite(Protocol):
    """Where the controller is: ``start`` returns its address (and launches it, for HIL); ``stop`` ends it."""

    def start(self, ctx: BenchContext) -> str: ...

    def stop(self) -> None: ...

    def side_records(self) -> list[tuple[str, float, dict[str, Any]]]: ...

    def summary(self) -> dict[str, Any]: ...


class RealController:
    """The real arm at ``--host`` or ``[ur3] host``."""

    def start(self, ctx: BenchContext) -> str:
        host = ctx.host or ctx.experiment.ur3.host
        if host is None:
            raise ConfigError(f"{ctx.experiment.path}: --backend real needs [ur3] host (or --host)")
        return host

    def stop(self) -> None:
        pass

    def side_records(self) -> list[tuple[str, float, dict[str, Any]]]:
        return []

    def summary(self) -> dict[str, Any]:
        return {}


def arm_limits(ctx: BenchContext) -> ArmLimits:
    s = ctx.experiment.ur3
    return ArmLimits(
        workspace_min_m=s.workspace_min_m,
        workspace_max_m=s.workspace_max_m,
        tcp_speed_max_m_s=s.tcp_speed_max_m_s,
        tcp_accel_max_m_s2=s.tcp_accel_max_m_s2,
        force_max_n=s.force_max_n,
    )


class BenchArmBackend(Backend[BenchContext, FlangeTarget, BenchObservation]):
    """The bench on a UR3 (real or emulated): servoL streaming of the flange targets."""

    def __init__(self, site: ControllerSite, name: str, arm_factory: Any = UR3Arm) -> None:
        self.site = site
        self.name = name
        self.arm_factory = arm_factory
        self.arm: Any = None
        self.ctx: BenchContext | None = None
        self.mount: Mount | None = None
        self.host: str | None = None
        self.servo_period_s = 0.01
        self.clock: ControllerClock | None = None

    def configure(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        s = ctx.experiment.ur3
        self.mount = Mount.from_settings(s)
        self.servo_period_s = 1.0 / ctx.experiment.bench.control_rate_hz
        self.host = self.site.start(ctx)
        frequency = min(s.rtde_frequency_hz, getattr(self.site, "controller_rate_hz", math.inf))
        # A real controller that sends no state for 2 s is gone. The emulator ticks the Cosserat rod inside each
        # controller period, and on a busy PC a tick may take seconds: a stall is only a lost controller after 10 s
        # there (a loaded PC is not a fault). A dropped connection is seen at once either way.
        link_timeout_s = 10.0 if self.name == "hil" else 2.0
        self.arm = self.arm_factory(self.host, arm_limits(ctx), frequency_hz=frequency, link_timeout_s=link_timeout_s)
        self.arm.connect()
        self.arm._force_n = self.arm.tcp_force_n  # our force limit watches the flange force the rod produces
        start = self.mount.flange_pose(ctx.experiment.scenario.initial_state.q[0:6])
        self.arm.move_linear(start.tolist(), s.approach_speed_m_s, min(0.5, s.tcp_accel_max_m_s2))
        self.clock = ControllerClock(self.arm.controller_time_s)  # raises once the controller is gone (2 s)

    def run_clock(self) -> ControllerClock:
        """The run's clock: the controller's time (see :mod:`aiko.robots.rod_bench.controller_clock`)."""
        assert self.clock is not None
        return self.clock

    def activate(self) -> None:
        pass

    def write(self, command: FlangeTarget) -> None:
        s = self.ctx.experiment.ur3 if self.ctx is not None else None
        assert s is not None
        self.arm.servo_linear(command.flange_pose.tolist(), self.servo_period_s, s.servo_lookahead_time_s, s.servo_gain)

    def read(self) -> BenchObservation:
        assert self.mount is not None and self.clock is not None
        state = self.arm.state()
        flange_wrench = np.asarray(self.arm.receive.getActualTCPForce(), dtype=float)
        pose = np.asarray(state.tcp_pose, dtype=float)
        return BenchObservation(
            t_s=float(state.timestamp_s) - self.clock.zero_s,
            base_alpha=self.mount.alpha(pose),
            flange_pose=pose,
            flange_speed=np.asarray(state.tcp_speed, dtype=float),
            base_wrench=self.mount.base_wrench(flange_wrench),
            controller_time_s=float(state.timestamp_s),
            arm=state.as_payload(),
        )

    def deactivate(self) -> None:
        if self.arm is not None and self.arm.control is not None:
            self.arm.stop()

    def emergency_stop(self) -> None:
        self.deactivate()

    def close(self) -> None:
        try:
            if self.arm is not None:
                self.arm.close()
        finally:
            self.site.stop()

    def side_records(self) -> list[tuple[str, float, dict[str, Any]]]:
        """Records produced beside the loop (the HIL plant's rod samples), on controller time."""
        return self.site.side_records()

    def side_file(self) -> Path | None:
        """Where those records are written as they are made (HIL: the plant's JSON lines), if anywhere."""
        path = getattr(self.site, "plant_log", None)
        return Path(path) if path is not None else None

    def summary(self) -> dict[str, Any]:
        return {"controller_host": self.host, **self.site.summary()}


def real_backend() -> BenchArmBackend:
    return BenchArmBackend(RealController(), "real")


def hil_backend() -> BenchArmBackend:
    from aiko.robots.rod_bench.hil_site import EmulatedController

    return BenchArmBackend(EmulatedController(), "hil")


register_bench_backend(
    "hil",
    hil_backend,
    "ur_rtde through UR3Arm against `aiko emulate ur3` (another process, loopback) with the Cosserat rod as plant",
    wall_clock_only=True,
)
register_bench_backend(
    "real", real_backend, "the UR3 at [ur3] host through ur_rtde and UR3Arm's limits", wall_clock_only=True
)
