"""The bench's six-axis F/T sensor: the sensor frame, the HIL sensor beside the rod plant, and the run's sensor task.

**What the sensor reads** (docs/force_sensor.md, "Frames and sign convention"): the wrench the tool side (clamp and
rod) exerts ON the sensor, in the sensor's frame. The bench compares in the flange (tool0) frame at the rod's base
point (the bench's mount, :mod:`aiko.robots.rod_bench.mount`, puts the rod's base at the flange origin). The
Cosserat plant's base wrench is what the clamp exerts ON the rod, in the world frame; a sensor at the rod's base
with the flange's axes reads its negative (Newton's third law), rotated into the flange frame:

    F = R_f^T R_w (-F_base),   tau = R_f^T R_w (-M_base)

with R_w the world frame in the UR base frame (``[ur3] bench_frame_rotation_deg``) and R_f the flange's rotation
(the flange pose's rotation vector). :func:`world_force` inverts it for the analysis. A sensor mounted elsewhere
(``[ft_sensor] offset_m``, ``rotation_deg``) reads that wrench moved into its own frame, and the bench moves its
readings back (:mod:`aiko.robots.rod_bench.ft_frame`), in HIL and on the real bench alike.

**HIL**: the F/T emulator (RDT over UDP, :class:`aiko.devices.force_sensor.emulator.UdpFtServer`) runs *inside the
UR3 emulator's process*, started by the rod plant's factory, bound to the same 127.0.0.N as the UR3 emulator, with
the plant's latest wrench (as the mounted sensor reads it) as its source hook. Why there and not as a third
process: the wrench lives in the plant, which steps inside the UR3 emulator's controller tick; a separate process
would need the wrench shipped over yet another channel (another stand-in protocol, another lag) before it is put
on the RDT wire. In the
plant's process the hook reads it with no copy and at most one controller tick (5 ms) old, and the bench reads it
exactly as it reads a real sensor: over UDP through :class:`aiko.devices.force_sensor.UdpReader`.
"""

from __future__ import annotations

import atexit
import logging
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import ConfigError
from aiko.core.messages import Channel, Message, boolean, integer, number, numbers
from aiko.devices.force_sensor import ATI_NETFT_DEFAULT, ONROBOT_HEX_DEFAULT, CountsScale
from aiko.devices.force_sensor.reader import ForceSensorReader
from aiko.devices.ur.kinematics import rotvec_to_matrix
from aiko.robots.rod_bench.ft_frame import IDENTITY, SensorMount
from aiko.robots.rod_bench.mount import Mount
from aiko.robots.rod_bench.sensor_settings import FTSensorSettings

log = logging.getLogger(__name__)

WRENCH = Channel("/bench/wrench", Message(
    "aiko.bench.Wrench",
    "The flange force/torque sensor at the log rate: the newest sample and the mean of the samples since the last "
    "log (the log's anti-aliasing), in the flange frame and in the sensor's own frame.",
    {
        "t_s": number("run time of the log", "s"),
        "force_n": numbers("newest force, flange frame [x, y, z]", "N"),
        "torque_nm": numbers("newest torque, flange frame [x, y, z]", "N m"),
        "sensor_force_n": numbers("newest force, sensor frame", "N"),
        "sensor_torque_nm": numbers("newest torque, sensor frame", "N m"),
        "force_mean_n": numbers("mean force since the last log, flange frame", "N"),
        "torque_mean_nm": numbers("mean torque since the last log, flange frame", "N m"),
        "sequence": integer("the device's sample number of the newest sample"),
        "sensor_t_ns": integer("when the reader received the newest sample (time.monotonic_ns)", "ns"),
        "samples": integer("samples received since the last log"),
        "saturated": boolean("any of them saturated"),
    },
))  # fmt: skip
FT_ADDRESS_ENV = "AIKO_BENCH_FT_ADDRESS"  # HIL, UDP: the plant process serves RDT at this IP:PORT
FT_PTY_ENV = "AIKO_BENCH_FT_PTY"  # HIL, serial: the plant process serves the USB DAQ on a pty linked here


def hil_pty_path(host: str) -> Path:
    """Where HIL links the emulated serial DAQ's pseudo-terminal: one path per run host, so runs on other loopback
    addresses (tests side by side) never share it; the bench's serial reader opens it like a real /dev/ttyACM0."""
    return Path(tempfile.gettempdir()) / f"aiko-bench-ft-{host}.pty"


def scale_of(settings: FTSensorSettings) -> CountsScale:
    """The wire scale: the file's counts per N / N·m, else the flavour's default (docs/force_sensor.md)."""
    if settings.counts_per_n is not None and settings.counts_per_nm is not None:
        return CountsScale(settings.counts_per_n, settings.counts_per_nm)
    return ONROBOT_HEX_DEFAULT if settings.flavour == "onrobot" else ATI_NETFT_DEFAULT


def mount_of(settings: FTSensorSettings) -> SensorMount:
    """The sensor's mounting (``offset_m``, ``rotation_deg``) as a transform."""
    return SensorMount.from_settings(settings.offset_m, settings.rotation_deg)


def sensor_wrench(mount: Mount, flange_pose: Sequence[float], base_wrench: Sequence[float]) -> np.ndarray:
    """What a sensor at the rod's base reads ``[Fx, Fy, Fz, Tx, Ty, Tz]`` (flange axes: the bench's comparison
    frame) from the simulator's base wrench ``[moment; force]`` (world frame, the base on the rod)."""
    in_base = mount.flange_wrench(base_wrench)  # the negative, in the UR base frame
    to_flange = rotvec_to_matrix(np.asarray(flange_pose, dtype=float)[3:6]).T
    return np.concatenate([to_flange @ in_base[0:3], to_flange @ in_base[3:6]])


def world_force(mount: Mount, flange_pose: Sequence[float], force_sensor_n: Sequence[float]) -> np.ndarray:
    """A sensor-frame force in the rod's world frame (the inverse rotation of :func:`sensor_wrench`): the force the
    rod exerts on the flange, i.e. minus the base's force on the rod. Quasi-statically its z is the table's normal
    force minus the rod's weight, so the total normal force is ``m g + world_force(...)[2]``."""
    in_base = rotvec_to_matrix(np.asarray(flange_pose, dtype=float)[3:6]) @ np.asarray(force_sensor_n, dtype=float)
    return mount.world_rotation_matrix.T @ in_base


class PlantSensor:
    """The sensor's physical side in the plant's process: the latest wrench as the mounted sensor reads it, and the
    RDT emulator streaming it (started by :func:`start_plant_sensor`)."""

    def __init__(self, mount: SensorMount = IDENTITY) -> None:
        self._wrench: tuple[float, ...] = (0.0,) * 6
        self.mount = mount
        self.server: Any = None

    def update(self, wrench: Sequence[float]) -> None:
        """``wrench``: :func:`sensor_wrench`'s, in the flange frame at the rod's base; the sensor reads it in its
        own frame (``[ft_sensor] offset_m`` / ``rotation_deg``)."""
        w = wrench if self.mount.is_identity else self.mount.from_flange(wrench)
        self._wrench = tuple(float(v) for v in w)  # one reference swap: atomic for the streaming thread

    def __call__(self, t_s: float) -> tuple[float, ...]:
        return self._wrench


def start_plant_sensor(
    settings: FTSensorSettings, address: str | None = None, pty_path: str | Path | None = None
) -> PlantSensor:
    """The F/T emulator of the file's transport, its source the returned :class:`PlantSensor`: UDP RDT at
    ``address`` ("127.0.0.N:PORT"), or the USB DAQ's serial protocol on a pseudo-terminal linked at ``pty_path``.
    Stopped at the emulator process's exit."""
    from aiko.devices.force_sensor.emulator import PtyFtServer, SensorModel, UdpFtServer
    from aiko.devices.force_sensor.udp_reader import parse_address

    sensor = PlantSensor(mount_of(settings))
    model = SensorModel(scale_of(settings), source=sensor, noise_n=settings.noise_n, noise_nm=settings.noise_nm)
    if settings.transport == "serial":
        if pty_path is None:
            raise ConfigError("the serial F/T emulator needs the path to link its pseudo-terminal at")
        server: Any = PtyFtServer(model, rate_hz=settings.rate_hz, link_path=str(pty_path))
        where = f"serial {pty_path}"
    else:
        if address is None:
            raise ConfigError("the UDP F/T emulator needs an address (127.0.0.N:PORT)")
        server = UdpFtServer(parse_address(address), model, rate_hz=settings.rate_hz, flavour=settings.flavour)
        where = f"udp {address}"
    server.start()
    sensor.server = server
    atexit.register(server.shutdown)
    log.info("F/T emulator on %s (plant's wrench)", where)
    return sensor


class FTSensorTask:
    """The run's sensor task: drains the reader each period and logs on ``/bench/wrench`` the newest sample
    (``force_n``, ``torque_nm`` in the flange frame at the rod's base, moved there from the sensor's frame by the
    ``[ft_sensor]`` mounting, :mod:`aiko.robots.rod_bench.ft_frame`; the raw reading as ``sensor_force_n``,
    ``sensor_torque_nm``; the device's ``sequence``) and the mean of every sample received
    since the last period (``force_mean_n``, ``torque_mean_nm``, ``samples`` of them): the sensor streams faster
    than the log, and the mean is the log's anti-aliasing (a box filter over one period) — in HIL the rod's base
    force alternates from one 200 Hz controller tick to the next while the arm servoes, which a 50 Hz pick of
    single samples aliases. The reader's counters go into the run summary."""

    def __init__(self, reader: ForceSensorReader, settings: FTSensorSettings) -> None:
        self.reader = reader
        self.settings = settings
        self.mount = mount_of(settings)
        self.bias: tuple[float, ...] | None = None
        self._lock = threading.Lock()
        self.started = False

    def open(self) -> None:
        self.reader.start()
        self.started = True
        if self.settings.bias_at_start:
            self.bias = tuple(self.reader.tare(self.settings.bias_samples))
            self.reader.drain()  # samples buffered during the tare keep the old bias: the run's log starts tared

    def sample(self, t_s: float) -> dict[str, Any] | None:
        samples = self.reader.drain()
        if not samples:
            return None
        w = samples[-1]
        newest = self.mount.to_flange(w.as_tuple())
        mean = self.mount.to_flange(np.mean([s.as_tuple() for s in samples], axis=0))  # linear: mean of the moved
        return {
            "t_s": t_s,
            "force_n": newest[0:3].tolist(),
            "torque_nm": newest[3:6].tolist(),
            "sensor_force_n": list(w.force_n),
            "sensor_torque_nm": list(w.torque_nm),
            "force_mean_n": mean[0:3].tolist(),
            "torque_mean_nm": mean[3:6].tolist(),
            "sequence": w.sequence,
            "sensor_t_ns": w.t_ns,
            "samples": len(samples),
            "saturated": any(s.saturated for s in samples),
        }

    def close(self) -> None:
        if self.started:
            self.started = False
            self.reader.stop()

    def summary(self) -> dict[str, Any]:
        return {
            "transport": self.settings.transport,
            "where": self.reader.describe(),
            "rate_hz": self.settings.rate_hz,
            "offset_m": list(self.settings.offset_m),
            "rotation_deg": list(self.settings.rotation_deg),
            "bias": list(self.bias) if self.bias is not None else None,  # sensor frame
            **self.reader.stats.as_payload(),
        }


def make_reader(settings: FTSensorSettings, address: str | None, port: str | None = None) -> ForceSensorReader:
    """A UDP reader at ``address`` (HIL: the run's loopback host) or the file's, or the serial reader at ``port``
    (HIL: the emulated DAQ's pty) or the file's."""
    from aiko.devices.force_sensor import SerialReader, UdpReader

    if settings.transport == "udp":
        where = address or settings.address
        if where is None:
            raise ConfigError("ft_sensor: no address to read the UDP sensor at")
        return UdpReader(
            where, flavour=settings.flavour, scale=scale_of(settings), rate_hz=settings.rate_hz, timeout_s=5.0
        )
    port = port or settings.port
    if not port:
        raise ConfigError("ft_sensor: transport serial needs port (a serial device)")
    return SerialReader(port, scale=scale_of(settings), rate_hz=settings.rate_hz, timeout_s=5.0)
