"""DC motor + gearbox + joint free play of every axis, vectorised over all modules (arrays of shape (n, 2)).

Per axis the motor side (rotor reflected through the gear, inertia N² J_rotor) is its own state θ_g, ω_g. The
armature inductance is neglected: L/R of a 6 W motor is ~0.1 ms, far below the 1 ms controller period, so
i = (V − k_e N ω_g)/R. The H-bridge limits the current (torque saturation). The gear output drives the joint
through the free play: a dead zone of width b with a stiff contact (spring k, damper c only while in contact),
so the joint can wander ±b/2 from the gear as on Aiko (paper 000, Sec. VIII-F).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DriveParams:
    """One axis. Defaults: a 6 W, 12 V coreless DC motor (class of a Maxon A-max 22) on a 300:1 gear."""

    supply_v: float = 12.0
    resistance_ohm: float = 7.9
    torque_constant_nm_a: float = 0.0116  # also the back-EMF constant in V s/rad (SI)
    rotor_inertia_kg_m2: float = 4.2e-7
    gear_ratio: float = 300.0
    gear_efficiency: float = 0.7
    current_limit_a: float = 1.2  # H-bridge current limit -> joint torque limit of ~2.9 N m
    gear_viscous_nm_s_rad: float = 0.05  # at the gear output
    free_play_rad: float = np.deg2rad(4.0)  # total backlash (3-5 deg on Aiko)
    contact_stiffness_nm_rad: float = 300.0
    contact_damping_nm_s_rad: float = 2.0  # ~critically damped on one link (ζ ≈ 0.9): gear impacts barely bounce

    def __post_init__(self) -> None:
        positive = ("supply_v", "resistance_ohm", "torque_constant_nm_a", "rotor_inertia_kg_m2", "gear_ratio")
        for name in (*positive, "current_limit_a", "contact_stiffness_nm_rad"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DriveParams.{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 < self.gear_efficiency <= 1:
            raise ValueError(f"DriveParams.gear_efficiency must be in (0, 1], got {self.gear_efficiency!r}")
        if not 0 <= self.free_play_rad < np.deg2rad(20):
            raise ValueError(f"DriveParams.free_play_rad must be in [0, 20 deg), got {self.free_play_rad!r}")

    @property
    def reflected_inertia_kg_m2(self) -> float:
        return self.rotor_inertia_kg_m2 * self.gear_ratio**2

    @property
    def torque_limit_nm(self) -> float:
        """Joint-side torque at the current limit."""
        return self.gear_efficiency * self.gear_ratio * self.torque_constant_nm_a * self.current_limit_a


@dataclass
class DriveState:
    gear_angle_rad: np.ndarray  # (n, 2) gear output angle
    gear_rate_rad_s: np.ndarray
    voltage_v: np.ndarray  # applied armature voltage (held for the controller period)
    brake: np.ndarray  # bool (n, 2): disabled drive = H-bridge short brake (terminals shorted, V = 0)
    current_limited: np.ndarray  # bool (n, 2), for the SATURATED flag


def new_drive_state(n_joints: int) -> DriveState:
    z = np.zeros((n_joints, 2))
    return DriveState(z.copy(), z.copy(), z.copy(), np.ones((n_joints, 2), bool), np.zeros((n_joints, 2), bool))


def gear_torque_nm(p: DriveParams, state: DriveState) -> np.ndarray:
    """Torque at the gear output from the armature circuit, current-limited; updates current_limited."""
    voltage = np.where(state.brake, 0.0, state.voltage_v)
    current = (voltage - p.torque_constant_nm_a * p.gear_ratio * state.gear_rate_rad_s) / p.resistance_ohm
    np.greater(np.abs(current), p.current_limit_a, out=state.current_limited)
    np.clip(current, -p.current_limit_a, p.current_limit_a, out=current)
    return p.gear_efficiency * p.gear_ratio * p.torque_constant_nm_a * current


def free_play_torque_nm(
    p: DriveParams,
    gear_angle: np.ndarray,
    gear_rate: np.ndarray,
    joint_angle: np.ndarray,
    joint_rate: np.ndarray,
) -> np.ndarray:
    """Torque the gear applies to the joint through the dead zone (zero while inside the free play)."""
    half = 0.5 * p.free_play_rad
    gap = gear_angle - joint_angle
    penetration = np.sign(gap) * np.maximum(np.abs(gap) - half, 0.0)
    in_contact = penetration != 0.0
    return p.contact_stiffness_nm_rad * penetration + np.where(
        in_contact, p.contact_damping_nm_s_rad * (gear_rate - joint_rate), 0.0
    )


def drive_substep(
    p: DriveParams, state: DriveState, joint_angle: np.ndarray, joint_rate: np.ndarray, dt_s: float
) -> np.ndarray:
    """Advance the gear side by dt_s (semi-implicit Euler); return the torque to apply to the joints."""
    coupling = free_play_torque_nm(p, state.gear_angle_rad, state.gear_rate_rad_s, joint_angle, joint_rate)
    drive = gear_torque_nm(p, state)
    accel = (drive - coupling - p.gear_viscous_nm_s_rad * state.gear_rate_rad_s) / p.reflected_inertia_kg_m2
    state.gear_rate_rad_s += dt_s * accel
    state.gear_angle_rad += dt_s * state.gear_rate_rad_s
    return coupling
