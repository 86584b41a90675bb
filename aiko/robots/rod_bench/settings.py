"""The bench's own tables of a rod experiment file: ``[bench]`` (loop rates) and ``[ur3]`` (the arm: address,
RTDE rate, our limits, and where the rod's world frame and mount sit relative to the arm).

Both are optional (defaults below), both strict: an unknown key or an out-of-range value is a one-line
``ConfigError`` naming the key. The Cosserat simulator ignores them (``aiko rod run`` on a bench file still works).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiko.core.config import Table
from aiko.core.errors import ConfigError

BENCH_SECTIONS = ("bench", "ur3", "ft_sensor", "camera")
"""Top-level tables of a rod experiment file that belong to the bench, not to the simulator."""


@dataclass(frozen=True)
class BenchSettings:
    """``[bench]``: how often the base target is streamed and the arm (and every sensor task) is sampled."""

    control_rate_hz: float = 100.0
    observe_rate_hz: float = 50.0


@dataclass(frozen=True)
class UR3Settings:
    """``[ur3]``: the arm. ``host`` is the real controller's address (``--backend real``); HIL uses a loopback one.

    Frames: the rod's world frame (table plane z = 0, as in the simulator) sits at ``bench_frame_position_m`` /
    ``bench_frame_rotation_deg`` (a rotation vector, degrees) in the UR base frame; the rod's base frame is the
    flange (tool0) frame rotated by ``mount_rotation_deg`` (default [0, -90, 0]: the rod's axis, local x, along the
    flange's z, i.e. the rod sticks straight out of the tool flange). The rod's base point is the flange origin.
    """

    host: str | None = None
    rtde_frequency_hz: float = 200.0
    workspace_min_m: tuple[float, float, float] = (-0.45, -0.45, 0.05)
    workspace_max_m: tuple[float, float, float] = (0.45, 0.45, 0.50)
    tcp_speed_max_m_s: float = 0.25
    tcp_accel_max_m_s2: float = 1.5
    force_max_n: float = 30.0
    approach_speed_m_s: float = 0.05
    servo_lookahead_time_s: float = 0.03
    servo_gain: float = 1000.0
    bench_frame_position_m: tuple[float, float, float] = (-0.30, -0.11, 0.0)
    bench_frame_rotation_deg: tuple[float, float, float] = (0.0, 0.0, 180.0)
    mount_rotation_deg: tuple[float, float, float] = (0.0, -90.0, 0.0)


def _host(t: Table) -> str | None:
    host = t.string("host", None)
    if host is None:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(f"{t.source}: ur3.host: expected an IP address, got {host!r}") from None
    return host


def parse_bench(raw: Mapping[str, Any] | None, source: str) -> BenchSettings:
    t = Table(raw or {}, "bench", source)
    out = BenchSettings(
        t.number("control_rate_hz", 100.0, min=1.0, max=1000.0),
        t.number("observe_rate_hz", 50.0, min=1.0, max=1000.0),
    )
    t.finish()
    return out


def parse_ur3(raw: Mapping[str, Any] | None, source: str) -> UR3Settings:
    """The strictly validated ``[ur3]`` table (every key optional; see :class:`UR3Settings`)."""
    t = Table(raw or {}, "ur3", source)
    d = UR3Settings()
    lo = tuple(t.number_list("workspace_min_m", list(d.workspace_min_m), length=3, min=-1.0, max=1.0))
    hi = tuple(t.number_list("workspace_max_m", list(d.workspace_max_m), length=3, min=-1.0, max=1.0))
    out = UR3Settings(
        host=_host(t),
        rtde_frequency_hz=t.number("rtde_frequency_hz", d.rtde_frequency_hz, min=1.0, max=500.0),
        workspace_min_m=lo,  # type: ignore[arg-type]
        workspace_max_m=hi,  # type: ignore[arg-type]
        # UR's own TCP speed limit is 1.5 m/s; ours must lie well inside it
        tcp_speed_max_m_s=t.number("tcp_speed_max_m_s", d.tcp_speed_max_m_s, min=0, min_exclusive=True, max=1.0),
        tcp_accel_max_m_s2=t.number("tcp_accel_max_m_s2", d.tcp_accel_max_m_s2, min=0, min_exclusive=True, max=10.0),
        force_max_n=t.number("force_max_n", d.force_max_n, min=0, min_exclusive=True, max=200.0),
        approach_speed_m_s=t.number("approach_speed_m_s", d.approach_speed_m_s, min=0, min_exclusive=True, max=0.25),
        # URScript servoL: lookahead_time in [0.03, 0.2] s, gain in [100, 2000]
        servo_lookahead_time_s=t.number("servo_lookahead_time_s", d.servo_lookahead_time_s, min=0.03, max=0.2),
        servo_gain=t.number("servo_gain", d.servo_gain, min=100.0, max=2000.0),
        bench_frame_position_m=tuple(  # type: ignore[arg-type]
            t.number_list("bench_frame_position_m", list(d.bench_frame_position_m), length=3, min=-1.0, max=1.0)
        ),
        bench_frame_rotation_deg=tuple(  # type: ignore[arg-type]
            t.number_list("bench_frame_rotation_deg", list(d.bench_frame_rotation_deg), length=3, min=-360, max=360)
        ),
        mount_rotation_deg=tuple(  # type: ignore[arg-type]
            t.number_list("mount_rotation_deg", list(d.mount_rotation_deg), length=3, min=-360, max=360)
        ),
    )
    t.finish()
    if any(a >= b for a, b in zip(lo, hi, strict=True)):
        raise ConfigError(f"{source}: ur3.workspace_min_m {list(lo)} must lie below ur3.workspace_max_m {list(hi)}")
    if out.approach_speed_m_s > out.tcp_speed_max_m_s:
        raise ConfigError(
            f"{source}: ur3.approach_speed_m_s {out.approach_speed_m_s} is over ur3.tcp_speed_max_m_s "
            f"{out.tcp_speed_max_m_s}"
        )
    return out
