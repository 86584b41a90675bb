"""The mechanical load the emulated joint controllers drive, behind one small protocol.

The default plant gives every axis its own inertia (fast, no simulator needed). A multibody simulator joins
HIL by implementing `JointPlant`: it receives the joint torques the emulated motors apply through gears and
the free play, and returns joint angles and rates; the emulator never needs to know what is behind it.

A plant may also offer ``run_driven_period(parameters, drive, limited, duty, supply_v)``: one controller period with
the voltages of its sub-steps given (the firmware in the AVR simulator commands them), compiled.

Optionally a plant with a compiled step also offers ``run_module_ticks(n_ticks, tick0, resume, parameters, arrays,
feedback_divisor, heartbeat_divisor) -> (ticks done, event, error or None)``: whole controller ticks of the modules
and the plant in one compiled call (`firmware_protocol.emulator.fast`, whose helpers it calls for the modules'
part; `run_ticks_inertia` is the model). The emulator then runs ticks in batches between frame events; without it,
the emulator calls ``joint_state``/``advance`` at every physics sub-step. A plant step that fails returns its error
(event ``fast.EVENT_PLANT_FAILED``): the emulator counts the ticks done before it, then raises it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from firmware_protocol.emulator import fast
from firmware_protocol.emulator.drive import DriveState


@runtime_checkable
class JointPlant(Protocol):
    """Joint-space view of a robot with n two-axis (horizontal, vertical) joints.

    ``physics_dt_s``: the plant's own fixed time step, if it has one (a multibody simulator); the emulator's physics
    sub-step must then equal it. ``link_poses`` and ``solver_summary`` report where a simulated robot went and how
    its solver did (None / {} for a plant that has no bodies or no solver)."""

    physics_dt_s: float | None

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(angles_rad (n, 2), rates_rad_s (n, 2)); column 0 horizontal, column 1 vertical."""
        ...

    def advance(self, torques_nm: np.ndarray, dt_s: float) -> None:
        """Integrate dt_s with the joint torques (n, 2) held constant."""
        ...

    def link_poses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Link centre positions (n+1, 3) in m and unit quaternions (n+1, 4) (w, x, y, z), if the plant has bodies."""
        ...

    def solver_summary(self) -> dict[str, Any]:
        """The plant's solver statistics for the run summary ({} without a solver)."""
        ...


@dataclass(frozen=True)
class IndependentInertiaParams:
    inertia_kg_m2: float = 0.01  # ~ one Aiko link about its joint plus a share of the neighbours
    damping_nm_s_rad: float = 0.1  # bearing, exoskeleton and ground losses (time constant J/c = 0.1 s)
    limit_h_rad: float = np.deg2rad(90.0)
    limit_v_rad: float = np.deg2rad(90.0)

    def __post_init__(self) -> None:
        for name in ("inertia_kg_m2", "limit_h_rad", "limit_v_rad"):
            if not getattr(self, name) > 0:
                raise ValueError(f"IndependentInertiaParams.{name} must be > 0, got {getattr(self, name)!r}")
        if self.damping_nm_s_rad < 0:
            raise ValueError(f"IndependentInertiaParams.damping_nm_s_rad must be >= 0, got {self.damping_nm_s_rad}")


class IndependentInertiaPlant:
    """Each axis is a rotor J α̈ = τ − c α̇ with inelastic hard stops at ±limit (semi-implicit Euler)."""

    def __init__(
        self,
        n_joints: int,
        params: IndependentInertiaParams | None = None,
        initial_angles_rad: np.ndarray | None = None,
    ) -> None:
        if n_joints < 1:
            raise ValueError(f"n_joints must be >= 1, got {n_joints}")
        self.params = params or IndependentInertiaParams()
        self.angles_rad = np.zeros((n_joints, 2))
        if initial_angles_rad is not None:
            self.angles_rad[...] = initial_angles_rad
        self.rates_rad_s = np.zeros((n_joints, 2))
        self._limits = np.array([self.params.limit_h_rad, self.params.limit_v_rad])

    physics_dt_s: float | None = None  # any step: the emulator's sub-step

    def link_poses(self) -> None:
        return None  # joint space only: no bodies

    def run_module_ticks(
        self,
        n_ticks: int,
        tick0: int,
        resume: bool,
        parameters: np.ndarray,
        arrays: fast.ModuleArrays,
        feedback_divisor: np.ndarray,
        heartbeat_divisor: int,
    ) -> tuple[int, int, None]:
        """Compiled batch of module ticks on this plant (see the module docstring); it cannot fail."""
        p = self.params
        return *fast.run_ticks_inertia(
            n_ticks, tick0, resume, parameters, arrays, feedback_divisor, heartbeat_divisor,
            self.angles_rad, self.rates_rad_s, self._limits, p.inertia_kg_m2, p.damping_nm_s_rad,
        ), None  # fmt: skip

    def run_driven_period(
        self, parameters: np.ndarray, drive: DriveState, limited: np.ndarray, duty: np.ndarray, supply_v: float
    ) -> None:
        """Compiled: one controller period of the drives and this plant with the sub-steps' duty given (the
        firmware's; `fast.run_driven_period_inertia`)."""
        p = self.params
        fast.run_driven_period_inertia(
            parameters, drive.gear_angle_rad, drive.gear_rate_rad_s, drive.voltage_v, drive.brake,
            drive.current_limited, limited, duty, supply_v, self.angles_rad, self.rates_rad_s, self._limits,
            p.inertia_kg_m2, p.damping_nm_s_rad,
        )  # fmt: skip

    def solver_summary(self) -> dict[str, Any]:
        return {}

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.angles_rad, self.rates_rad_s

    def advance(self, torques_nm: np.ndarray, dt_s: float) -> None:
        p = self.params
        self.rates_rad_s += dt_s * (torques_nm - p.damping_nm_s_rad * self.rates_rad_s) / p.inertia_kg_m2
        self.angles_rad += dt_s * self.rates_rad_s
        over = np.abs(self.angles_rad) > self._limits
        if over.any():
            np.clip(self.angles_rad, -self._limits, self._limits, out=self.angles_rad)
            self.rates_rad_s[over] = 0.0  # inelastic stop
