"""The joint controller of the ATmega128, per axis: PD with a filtered-derivative (dynamic) rate estimate,
rate feed-forward and back-EMF compensation, output an armature voltage held for one controller period."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ControllerGains:
    """Gains in volts: with the default drive (300:1, 7.9 Ω) kp = 400 V/rad: ~8 Hz, ζ≈0.7 loop."""

    kp_h_v_per_rad: float = 400.0
    kd_h_v_s_per_rad: float = 6.0
    kp_v_v_per_rad: float = 400.0
    kd_v_v_s_per_rad: float = 6.0
    rate_filter_hz: float = 50.0  # first-order filter on the differentiated encoder angle
    back_emf_feedforward: bool = True

    def __post_init__(self) -> None:
        for name in ("kp_h_v_per_rad", "kd_h_v_s_per_rad", "kp_v_v_per_rad", "kd_v_v_s_per_rad"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"ControllerGains.{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.rate_filter_hz > 0:
            raise ValueError(f"ControllerGains.rate_filter_hz must be > 0, got {self.rate_filter_hz!r}")


@dataclass
class ControllerState:
    kp: np.ndarray  # (n, 2) V/rad, per module and axis (writable through ParameterRequest)
    kd: np.ndarray  # (n, 2) V s/rad
    rate_estimate_rad_s: np.ndarray  # (n, 2)
    previous_measurement_rad: np.ndarray  # (n, 2)


def new_controller_state(gains: ControllerGains, n_joints: int, measurement_rad: np.ndarray) -> ControllerState:
    kp = np.tile([gains.kp_h_v_per_rad, gains.kp_v_v_per_rad], (n_joints, 1)).astype(float)
    kd = np.tile([gains.kd_h_v_s_per_rad, gains.kd_v_v_s_per_rad], (n_joints, 1)).astype(float)
    return ControllerState(kp, kd, np.zeros((n_joints, 2)), measurement_rad.copy())


def controller_update(
    gains: ControllerGains,
    state: ControllerState,
    measurement_rad: np.ndarray,
    reference_rad: np.ndarray,
    reference_rate_rad_s: np.ndarray,
    back_emf_v_per_rad_s: float,
    dt_s: float,
) -> np.ndarray:
    """One controller period: update the rate estimate, return the demanded armature voltage (unsaturated)."""
    alpha = dt_s / (dt_s + 1.0 / (2.0 * np.pi * gains.rate_filter_hz))
    raw_rate = (measurement_rad - state.previous_measurement_rad) / dt_s
    state.rate_estimate_rad_s += alpha * (raw_rate - state.rate_estimate_rad_s)
    state.previous_measurement_rad[...] = measurement_rad
    voltage = state.kp * (reference_rad - measurement_rad) + state.kd * (
        reference_rate_rad_s - state.rate_estimate_rad_s
    )
    if gains.back_emf_feedforward:
        voltage += back_emf_v_per_rad_s * reference_rate_rad_s
    return voltage
