"""Table 1 motions of paper 002 and its validation procedure (Sec. 6.2), with the ambiguities resolved.

theta_i(t) = a_i t^2 + b_i (eq. 93). Table indices 0..19 are bodies (joints) 1..20. Resolutions (the paper
gives no geometry, axes or signs; see docs/chain.md):

* cobra: indices 3, 5, 7 -> a = pi/24, b = -pi/6; 13, 15, 17 -> a = -pi/24, b = pi/6; the rest 0 (the table
  lists 5 twice and omits 6: 6 is 0). Axes: all e2 (pitch), so the chain rears up in the vertical x-z plane
  against gravity (a cobra lifting its body).
* accordion: indices 2, 6, 14, 18 -> |a| = pi/14, |b| = pi/3; 4, 8, 12, 16 -> |a| = pi/24, |b| = pi/3; signs
  "+-" unspecified: they alternate along the body (2:+, 4:-, 6:+, 8:-, 12:+, 14:-, 16:+, 18:-) so the body
  folds in a zig-zag. Axes: all e3 (yaw), a horizontal concertina.
* helix: 2-7, 9, 11, 13, 18 -> a = pi/18, b = -2 pi/9; 12, 14, 16 -> a = -pi/18, b = 2 pi/9; the rest 0.
  Axes: alternating e3, e2 starting with e3 (yaw, pitch, yaw, ...), which makes the body three-dimensional.

For n_bodies != 20 the table is truncated (n < 20) or padded with zeros (n > 20).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.chain.dynamics import (
    accelerations,
    assemble,
    inverse_dynamics,
    kinetic_energy_j,
    potential_energy_j,
)
from sim.chain.integrate import simulate
from sim.chain.model import Chain, ChainModelError

PAPER_SUM_ABS_ANGLE_ERROR_RAD = 3.1434e-05
TABLE1_BODIES = 20
MOTIONS = ("cobra", "accordion", "helix")


@dataclass(frozen=True)
class PolynomialMotion:
    """theta(t) = a t^2 + b per joint, plus the generator axes it is meant for."""

    name: str
    a_rad_s2: np.ndarray
    b_rad: np.ndarray
    axes: str

    def angles(self, t_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(theta, theta_dot, theta_ddot) at t."""
        return self.a_rad_s2 * t_s**2 + self.b_rad, 2.0 * self.a_rad_s2 * t_s, 2.0 * self.a_rad_s2


def _table(entries: list[tuple[list[int], float, float]], n: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.zeros(max(n, TABLE1_BODIES))
    b = np.zeros(max(n, TABLE1_BODIES))
    for indices, ai, bi in entries:
        a[indices] = ai
        b[indices] = bi
    return a[:n], b[:n]


def table1_motion(name: str, n_bodies: int = TABLE1_BODIES) -> PolynomialMotion:
    """The named Table 1 motion for an n-body chain (see module docstring for the resolved ambiguities)."""
    if name not in MOTIONS:
        raise ChainModelError(f"motion must be one of {MOTIONS}, got {name!r}")
    if int(n_bodies) != n_bodies or n_bodies < 1:
        raise ChainModelError(f"n_bodies must be a positive integer, got {n_bodies!r}")
    n = int(n_bodies)
    pi = np.pi
    if name == "cobra":
        a, b = _table([([3, 5, 7], pi / 24, -pi / 6), ([13, 15, 17], -pi / 24, pi / 6)], n)
        axes = "y" * n
    elif name == "accordion":
        entries = []
        for k, idx in enumerate([2, 4, 6, 8, 12, 14, 16, 18]):
            sign = 1.0 if k % 2 == 0 else -1.0
            magnitude_a = pi / 14 if idx in (2, 6, 14, 18) else pi / 24
            entries.append(([idx], sign * magnitude_a, sign * pi / 3))
        a, b = _table(entries, n)
        axes = "z" * n
    else:
        a, b = _table(
            [([2, 3, 4, 5, 6, 7, 9, 11, 13, 18], pi / 18, -2 * pi / 9), ([12, 14, 16], -pi / 18, 2 * pi / 9)],
            n,
        )
        axes = ("zy" * n)[:n]
    return PolynomialMotion(name, a, b, axes)


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of the Sec. 6.2 procedure: replay of inverse-dynamics torques through forward dynamics."""

    t_s: np.ndarray
    q: np.ndarray  # replayed angles (k, n)
    q_desired: np.ndarray  # (k, n)
    max_abs_angle_error_rad: float  # over all samples and joints
    sum_abs_angle_error_rad: float  # sum over joints of |error| at the final time
    sum_abs_angle_error_all_samples_rad: float  # sum over samples and joints
    max_round_trip_accel_error_rad_s2: float  # max |FD(ID(q_dd_d)) - q_dd_d| at the samples
    success: bool
    message: str

    def max_error_history_rad(self) -> np.ndarray:
        """max over joints of |q - q_desired| at every sample (k,)."""
        return np.max(np.abs(self.q - self.q_desired), axis=1)

    def horizon_s(self, tolerance_rad: float = 1e-6) -> float | None:
        """Last sample time before the replay's error first exceeds tolerance_rad (None: it never does)."""
        above = np.nonzero(self.max_error_history_rad() > tolerance_rad)[0]
        if above.size == 0:
            return None
        return float(self.t_s[max(above[0] - 1, 0)])


def validate_motion(
    chain: Chain, motion: PolynomialMotion, duration_s: float, dt_s: float, method: str = "rk4"
) -> ValidationResult:
    """Paper 002 Sec. 6.2: torques F*_a from inverse dynamics (eq. 94) along theta = a t^2 + b are replayed
    open-loop through the forward dynamics (eq. 87) from q(0) = b, q_dot(0) = 0, and the angles compared.

    The replay is open loop, so errors grow with the chain's own instability (exponentially for long chains
    under gravity); short horizons measure the model's consistency, long ones measure that instability.
    """
    if motion.a_rad_s2.size != chain.n_bodies:
        raise ChainModelError(f"motion has {motion.a_rad_s2.size} joints but the chain has {chain.n_bodies}")

    def torque(t: float, q: np.ndarray, q_dot: np.ndarray) -> np.ndarray:
        return inverse_dynamics(chain, *motion.angles(t))

    traj = simulate(chain, motion.b_rad, np.zeros(chain.n_bodies), duration_s, dt_s, torque, method=method)
    desired = np.array([motion.angles(t)[0] for t in traj.t_s])
    err = np.abs(traj.q - desired)
    round_trip = 0.0
    for t in traj.t_s[:: max(1, traj.t_s.size // 20)]:
        q_d, v_d, a_d = motion.angles(t)
        eom = assemble(chain, q_d, v_d)
        tau = eom.M_star @ a_d + eom.N_star @ v_d - eom.F_star_gravity
        round_trip = max(round_trip, float(np.max(np.abs(accelerations(eom, v_d, tau) - a_d))))
    return ValidationResult(
        t_s=traj.t_s,
        q=traj.q,
        q_desired=desired,
        max_abs_angle_error_rad=float(err.max()),
        sum_abs_angle_error_rad=float(err[-1].sum()),
        sum_abs_angle_error_all_samples_rad=float(err.sum()),
        max_round_trip_accel_error_rad_s2=round_trip,
        success=traj.success,
        message=traj.message,
    )


def passive_energy_drift(
    chain: Chain, q0: np.ndarray, duration_s: float, dt_s: float, method: str = "rk4"
) -> tuple[float, float]:
    """(max |E(t) - E(0)|, energy scale) for a passive run with gravity only from rest at q0.

    The scale is the largest kinetic energy reached (the energy actually exchanged); drift relative to it is
    the meaningful figure.
    """
    traj = simulate(chain, q0, np.zeros(chain.n_bodies), duration_s, dt_s, None, method=method)
    kinetic = np.array([kinetic_energy_j(chain, q, v) for q, v in zip(traj.q, traj.q_dot, strict=True)])
    potential = np.array([potential_energy_j(chain, q) for q in traj.q])
    energy = kinetic + potential
    return float(np.max(np.abs(energy - energy[0]))), float(kinetic.max())
