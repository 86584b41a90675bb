"""The emulated modules' settings, shared by both kinds of module behind the bus: the Python model of the
firmware (`modules.EmulatedModules`) and the firmware itself in the AVR simulator (`firmware.FirmwareModules`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from firmware_protocol.dbc import WATCHDOG_TIMEOUT_MAX_MS, WATCHDOG_TIMEOUT_MIN_MS
from firmware_protocol.emulator.controller import ControllerGains
from firmware_protocol.emulator.drive import DriveParams


class EmulatorConfigError(ValueError):
    """An emulator setting outside what the firmware supports; the message names the field and the range."""


@dataclass(frozen=True)
class EmulatorConfig:
    node_ids: tuple[int, ...] = tuple(range(1, 11))
    controller_rate_hz: float = 1000.0
    physics_substeps: int = 4  # 4 kHz physics: the 3D simulator's step (paper 000: Δt = 1/4000 s)
    feedback_rate_hz: float = 100.0  # JointFeedback + JointRates from every module; 0 = only on request
    heartbeat_rate_hz: float = 1.0
    reference_period_s: float = 0.1  # the PC's reference period (10 Hz on Aiko); the watchdog counts these
    watchdog_periods: float = 3.0
    reply_to_references: bool = False  # also answer every accepted reference with a JointFeedback
    reference_hold: str = "zoh"  # "zoh": hold angle (as on Aiko); "linear": extrapolate with the rate
    sensor: str = "gear"  # encoder on the gear output ("gear", free play unseen) or on the joint ("joint")
    limit_h_rad: float = math.radians(90.0)
    limit_v_rad: float = math.radians(90.0)
    drive: DriveParams = field(default_factory=DriveParams)
    gains: ControllerGains = field(default_factory=ControllerGains)

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, allowed: str) -> None:
            if not ok:
                raise EmulatorConfigError(f"EmulatorConfig.{name} = {getattr(self, name)!r}; allowed: {allowed}")

        need(len(self.node_ids) > 0 and all(1 <= n <= 10 for n in self.node_ids), "node_ids", "nodes 1..10")
        need(len(set(self.node_ids)) == len(self.node_ids), "node_ids", "distinct node ids")
        need(100 <= self.controller_rate_hz <= 20000, "controller_rate_hz", "100..20000 Hz")
        need(1 <= self.physics_substeps <= 100, "physics_substeps", "1..100")
        need(0 <= self.feedback_rate_hz <= self.controller_rate_hz, "feedback_rate_hz", "0..controller_rate_hz")
        need(0 <= self.heartbeat_rate_hz <= 100, "heartbeat_rate_hz", "0..100 Hz")
        need(0.001 <= self.reference_period_s <= 1.0, "reference_period_s", "0.001..1 s")
        need(1 <= self.watchdog_periods <= 100, "watchdog_periods", "1..100")
        timeout_ms = self.watchdog_periods * self.reference_period_s * 1e3
        need(
            WATCHDOG_TIMEOUT_MIN_MS <= timeout_ms <= WATCHDOG_TIMEOUT_MAX_MS + 1e-9,
            "watchdog_periods",
            f"watchdog_periods x reference_period_s in [{WATCHDOG_TIMEOUT_MIN_MS:g}, {WATCHDOG_TIMEOUT_MAX_MS:g}] ms",
        )
        need(self.reference_hold in ("zoh", "linear"), "reference_hold", "'zoh' or 'linear'")
        need(self.sensor in ("gear", "joint"), "sensor", "'gear' or 'joint'")
        need(0 < self.limit_h_rad <= math.pi, "limit_h_rad", "(0, pi]")
        need(0 < self.limit_v_rad <= math.pi, "limit_v_rad", "(0, pi]")

    @property
    def n_modules(self) -> int:
        return len(self.node_ids)
