"""The bench's sensor tables of a rod experiment file: ``[ft_sensor]`` (the six-axis force/torque sensor between the
UR3 flange and the rod's clamp) and ``[camera]`` (the camera filming the rod's red beads).

Both optional (no table: no sensor in the run), both strict: an unknown key, a value out of range, an address that
is not ``IP:PORT`` is a one-line ``ConfigError`` naming the key. ``--backend hil`` ignores the addresses (the
emulated sensor listens on the run's loopback host); ``--backend real`` needs them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiko.core.config import Table
from aiko.core.errors import ConfigError

FT_TRANSPORTS = ("udp", "serial")
FT_FLAVOURS = ("onrobot", "ati")
RDT_PORT = 49152


@dataclass(frozen=True)
class FTSensorSettings:
    """``[ft_sensor]``. ``offset_m`` / ``rotation_deg``: the sensor's origin and axes in the flange frame at the rod's
    base point, the frame the bench compares in (:mod:`aiko.robots.rod_bench.ft_frame`); zero: the sensor measures
    there, axes along the flange's."""

    transport: str = "udp"
    address: str | None = None  # "IP:PORT" of the RDT box (udp, real)
    port: str | None = None  # serial device path (serial, real)
    flavour: str = "onrobot"
    rate_hz: float = 500.0
    counts_per_n: float | None = None  # None: the flavour's default scale (docs/force_sensor.md)
    counts_per_nm: float | None = None
    bias_at_start: bool = False
    bias_samples: int = 100
    noise_n: float = 0.0  # HIL only: the emulated sensor's noise (standard deviation)
    noise_nm: float = 0.0
    offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def udp_port(self) -> int:
        return int(self.address.rpartition(":")[2]) if self.address else RDT_PORT


CAMERA_PLANES = ("vertical_xz", "table")


@dataclass(frozen=True)
class CameraSettings:
    """``[camera]``: where frames come from, how pixels become metres, how often, which beads.

    ``source`` is ``"synthetic"`` (HIL: rendered from the plant's rod states) or an OpenCV source for ``--backend
    real``: a device index (an integer), a video file, a URL or a GStreamer pipeline (a string with ``!``). A real
    source needs ``calibration``; relative file paths are relative to the experiment file's folder."""

    source: int | str = "synthetic"
    calibration: str | None = None  # plane calibration JSON (real); HIL computes the synthetic camera's exact one
    rate_hz: float = 50.0
    markers: int = 8
    marker_arc_m: tuple[float, ...] | None = None  # default: evenly from 10 % to 97.5 % of the rod
    noise: float = 2.0  # synthetic camera: grey-level noise
    blur_samples: int = 1
    plane: str | None = None  # real: the calibrated plane when the calibration file has none (then vertical_xz)
    plane_offset_m: float = 0.0  # its y (vertical_xz) or height (table)
    latency_s: float = 0.0  # real, live source: exposure to grab(), subtracted from each frame's stamp
    width_px: int | None = None  # real: size requested from the driver
    height_px: int | None = None
    queue_frames: int = 64  # real: frames buffered between the grabbing and the video-writing thread

    @property
    def is_synthetic(self) -> bool:
        return self.source == "synthetic"


def _address(t: Table, key: str) -> str | None:
    text = t.string(key, None)
    if text is None:
        return None
    host, sep, port = text.rpartition(":")
    try:
        ipaddress.ip_address(host)
        ok = bool(sep) and 0 < int(port) < 65536
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{t.source}: ft_sensor.{key}: expected IP:PORT (e.g. 192.168.1.1:49152), got {text!r}")
    return text


def parse_ft_sensor(raw: Mapping[str, Any] | None, source: str) -> FTSensorSettings | None:
    if raw is None:
        return None
    t = Table(raw, "ft_sensor", source)
    d = FTSensorSettings()
    transport = t.string("transport", d.transport, choices=FT_TRANSPORTS)
    out = FTSensorSettings(
        transport=transport,
        address=_address(t, "address"),
        port=t.string("port", None),
        flavour=t.string("flavour", d.flavour, choices=FT_FLAVOURS),
        # the serial DAQ's rates are fixed (its speed codes): its default is its fastest
        rate_hz=t.number("rate_hz", 1000.0 if transport == "serial" else d.rate_hz, min=1.0, max=1000.0),
        counts_per_n=t.number("counts_per_n", None, min=0, min_exclusive=True),
        counts_per_nm=t.number("counts_per_nm", None, min=0, min_exclusive=True),
        bias_at_start=t.boolean("bias_at_start", d.bias_at_start),
        bias_samples=t.integer("bias_samples", d.bias_samples, min=1, max=10_000),
        noise_n=t.number("noise_n", d.noise_n, min=0.0, max=10.0),
        noise_nm=t.number("noise_nm", d.noise_nm, min=0.0, max=1.0),
        offset_m=tuple(t.number_list("offset_m", list(d.offset_m), length=3, min=-0.5, max=0.5)),
        rotation_deg=tuple(t.number_list("rotation_deg", list(d.rotation_deg), length=3, min=-360.0, max=360.0)),
    )
    t.finish()
    if out.transport == "serial" and out.address is not None:
        raise ConfigError(f"{source}: ft_sensor.address is for transport udp; a serial sensor takes port")
    if out.transport == "serial":
        from aiko.devices.force_sensor.daq_serial import SPEED_CODES_HZ

        if not any(abs(hz - out.rate_hz) < 0.5 for hz in SPEED_CODES_HZ.values()):
            rates = ", ".join(f"{hz:.0f}" for hz in sorted(SPEED_CODES_HZ.values(), reverse=True))
            raise ConfigError(f"{source}: ft_sensor.rate_hz: the serial DAQ streams at {rates} Hz, not {out.rate_hz:g}")
    if out.transport == "udp" and out.port is not None:
        raise ConfigError(f"{source}: ft_sensor.port is for transport serial; a UDP sensor takes address")
    if (out.counts_per_n is None) != (out.counts_per_nm is None):
        raise ConfigError(f"{source}: ft_sensor.counts_per_n and counts_per_nm go together (the sensor's scale)")
    return out


def parse_camera(raw: Mapping[str, Any] | None, source: str, rod_length_m: float) -> CameraSettings | None:
    if raw is None:
        return None
    t = Table(raw, "camera", source)
    d = CameraSettings()
    markers = t.integer("markers", d.markers, min=3, max=50)
    arc = t.number_list("marker_arc_m", None, min=0.0, max=rod_length_m)
    frame_source = t.raw("source", d.source)
    if isinstance(frame_source, bool) or not isinstance(frame_source, int | str):
        raise ConfigError(f"{source}: camera.source: expected a device index or a string, got {frame_source!r}")
    if isinstance(frame_source, int) and frame_source < 0 or isinstance(frame_source, str) and not frame_source.strip():
        raise ConfigError(f"{source}: camera.source: expected a device index >= 0 or a non-empty string")
    synthetic = frame_source == "synthetic"
    for key in ("noise", "blur_samples") if not synthetic else ("plane", "plane_offset_m", "latency_s"):
        if key in t:
            what = "the synthetic camera's" if not synthetic else "a real camera's"
            raise ConfigError(f"{source}: camera.{key} is {what} (camera.source = {frame_source!r})")
    for key in ("width_px", "height_px", "queue_frames"):
        if synthetic and key in t:
            raise ConfigError(f"{source}: camera.{key} is a real camera's (camera.source = 'synthetic')")
    out = CameraSettings(
        source=frame_source,
        calibration=t.string("calibration", None),
        rate_hz=t.number("rate_hz", d.rate_hz, min=1.0, max=1000.0),
        markers=markers,
        marker_arc_m=tuple(arc) if arc is not None else None,
        noise=t.number("noise", d.noise, min=0.0, max=50.0),
        blur_samples=t.integer("blur_samples", d.blur_samples, min=1, max=9),
        plane=t.string("plane", None, choices=CAMERA_PLANES),
        plane_offset_m=t.number("plane_offset_m", d.plane_offset_m, min=-10.0, max=10.0),
        latency_s=t.number("latency_s", d.latency_s, min=0.0, max=1.0),
        width_px=t.integer("width_px", None, min=16, max=16384),
        height_px=t.integer("height_px", None, min=16, max=16384),
        queue_frames=t.integer("queue_frames", d.queue_frames, min=1, max=10_000),
    )
    t.finish()
    if arc is not None and (len(arc) != markers or any(b <= a for a, b in zip(arc, arc[1:], strict=False))):
        raise ConfigError(f"{source}: camera.marker_arc_m must hold {markers} increasing arc lengths (camera.markers)")
    if not synthetic and out.calibration is None:
        raise ConfigError(f"{source}: camera.calibration (a plane calibration JSON) is required for a real camera")
    return out


def require_real_ft_address(settings: FTSensorSettings, source: str) -> None:
    """``--backend real`` reads the sensor where the file says: a missing address is a one-line error."""
    if settings.transport == "udp" and settings.address is None:
        raise ConfigError(f"{source}: ft_sensor.address (IP:PORT) is required for --backend real")
    if settings.transport == "serial" and not settings.port:
        raise ConfigError(f"{source}: ft_sensor.port (a serial device) is required for --backend real")
