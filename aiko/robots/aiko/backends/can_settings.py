"""The ``[can]`` table of an experiment file (parsed when the file loads) and the checks a CAN run must pass before
its bus is opened: what the joint modules and a 1 Mbit/s bus can do. Used by the ``can`` and ``hil`` backends.

  [can]  interface, channel, bitrate, slew_limit_deg_s, feedback_timeout_s, enable_timeout_s, watchdog_periods,
         log, realtime_priority, clear_estop

``aiko run --interface/--channel/--bitrate/--can-log/--rt-priority`` override its keys
(:mod:`aiko.commands._can_options`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.core.registry import register_section
from aiko.robots.aiko.joints import RunContext
from firmware_protocol.bus_load import protocol_bus_load
from firmware_protocol.dbc import WATCHDOG_TIMEOUT_MAX_MS, WATCHDOG_TIMEOUT_MIN_MS, id_scheme

# docs/can_protocol.md: 200 Hz references with 200 Hz feedback (81 %) is "too close to saturation"
MAX_BUS_LOAD = 0.8


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


register_section("can", lambda table, experiment: parse_can_section(table))


def no_backend_keys(table: Table) -> None:
    table.finish()  # settings live in [can] / [hil]; [backend.can] and [backend.hil] take no keys


def check_can_run(ctx: RunContext, section: CanSection, module_feedback_rate_hz: float) -> None:
    """What the modules and the bus cannot do, refused before the bus is opened: node ids the DBC does not define,
    a watchdog outside the firmware's range at this reference rate, a worst-case bus load above
    :data:`MAX_BUS_LOAD` with the modules answering at ``module_feedback_rate_hz``, a gait faster than the slew
    limit (it would be rate limited into another gait)."""
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
    bitrate, feedback_hz = section.bitrate, module_feedback_rate_hz
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
