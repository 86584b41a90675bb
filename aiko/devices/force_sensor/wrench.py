"""The force/torque sample every reader delivers, and the counts <-> SI scale of a sensor.

Frames: a six-axis F/T sensor reports the wrench that the tool side (here the silicone rod and its clamp) exerts
ON the sensor, expressed in the sensor's own frame (x, y in the mounting plane, z along the sensor axis, origin at
the sensor's reference point as its datasheet draws it). Readers never rotate or move that wrench: tool transforms
belong to the analysis, where the mounting is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiko.core.errors import ConfigError


@dataclass(frozen=True)
class CountsScale:
    """How many counts one newton and one newton-metre are on the wire (one value per axis group).

    The device sends integers; value_si = counts / counts_per_unit. Every sensor has its own calibration, so these
    are always settable; the named defaults below say where each number comes from.
    """

    counts_per_n: float
    counts_per_nm: float

    def __post_init__(self) -> None:
        if not (self.counts_per_n > 0 and self.counts_per_nm > 0):
            raise ConfigError(
                f"counts per force/torque must be positive, got {self.counts_per_n} / {self.counts_per_nm}"
            )

    def to_si(
        self, counts: tuple[int, ...] | list[int]
    ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Six counts (Fx Fy Fz Tx Ty Tz) -> (force_n, torque_nm)."""
        f, t = self.counts_per_n, self.counts_per_nm
        return (counts[0] / f, counts[1] / f, counts[2] / f), (counts[3] / t, counts[4] / t, counts[5] / t)

    def to_counts(self, wrench_si: tuple[float, ...] | list[float]) -> tuple[int, int, int, int, int, int]:
        """Six SI values -> six counts, rounded to the nearest count (what a device's ADC pipeline does)."""
        f, t = self.counts_per_n, self.counts_per_nm
        return (
            round(wrench_si[0] * f),
            round(wrench_si[1] * f),
            round(wrench_si[2] * f),
            round(wrench_si[3] * t),
            round(wrench_si[4] * t),
            round(wrench_si[5] * t),
        )


# ATI Net F/T: the real values are per calibration, read from the box's web server (netftapi2.xml, fields
# cfgcpf / cfgcpt; ATI manual 9620-05-NET FT, "Counts per Force / Counts per Torque"). 1,000,000 counts per N and
# per N·m is the value the Willow Garage ROS driver `netft_rdt_driver` (src/netft_rdt_driver.cpp,
# "counts_per_force = 1000000") hard-codes for metric calibrations; use it only when you have not read yours.
ATI_NETFT_DEFAULT = CountsScale(counts_per_n=1_000_000.0, counts_per_nm=1_000_000.0)

# OnRobot HEX-E/H through the Compute Box (and OptoForce EtherDAQ): OnRobot's own UDP example
# (example/highspeed_udp.c of the OnRobot HEX driver, "FORCE_DIV 10000.0 / TORQUE_DIV 100000.0 // Default divide
# value") and the OptoForce etherdaq_ros driver divide by 10,000 counts per N and 100,000 counts per N·m.
ONROBOT_HEX_DEFAULT = CountsScale(counts_per_n=10_000.0, counts_per_nm=100_000.0)


@dataclass(frozen=True)
class Wrench:
    """One F/T sample in SI units, in the sensor frame (see the module docstring for the sign convention).

    sequence: the device's own sample number (RDT sequence on UDP, the DAQ's 16-bit sample counter on serial,
    unwrapped to a monotonic integer); t_ns: time.monotonic_ns() when the reader received the sample.
    """

    force_n: tuple[float, float, float]
    torque_nm: tuple[float, float, float]
    sequence: int
    t_ns: int
    status: int = 0
    saturated: bool = False

    def as_payload(self) -> dict[str, Any]:
        """The sample as a flat dict for the run log (SI units in the names)."""
        return {
            "fx_n": self.force_n[0],
            "fy_n": self.force_n[1],
            "fz_n": self.force_n[2],
            "tx_nm": self.torque_nm[0],
            "ty_nm": self.torque_nm[1],
            "tz_nm": self.torque_nm[2],
            "sequence": self.sequence,
            "t_ns": self.t_ns,
            "status": self.status,
            "saturated": self.saturated,
        }

    def as_tuple(self) -> tuple[float, float, float, float, float, float]:
        """(Fx, Fy, Fz, Tx, Ty, Tz) in N and N·m."""
        return (*self.force_n, *self.torque_nm)
