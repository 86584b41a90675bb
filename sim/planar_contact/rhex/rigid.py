"""Rigid planar RHex for the controllers: body (y, z, α) plus the hip angles of the legs whose toes touch
the ground, as *massless* degrees of freedom (the erratum resolution of the notes).

q = (y_b, z_b, α, φ_a, …), M = diag(m, m, I, 0, …), bias = (0, m g, 0, …) with z up (free fall: z̈ = −g),
S maps each active hip torque onto its φ row. With φ relative to the body, the motor's reaction on the body
is contained in the generalised force, and the φ row reads 0 = τ_i + (∂x/∂φ_i)ᵀ f: the massless-leg
constraint (36) up to the paper's sign convention for τ.
Contacts: the active toes (leg order), the rear-bottom body corner if touching, and the rear-top corner when
the body stands on its rear face near vertical.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinematics import ContactFrame, Segment, point_kinematics
from ..system import ContactSnapshot, LinearConstraints
from .params import RHexParameters

GROUND = ContactFrame((0.0, 0.0), (0.0, 1.0))
#: Normal-velocity threshold [m/s] below which a rigid-model contact counts as stationary (*assumed*:
#: the compliant legs and padded body make the rigid model's normal velocities noisy).
NORMAL_SPEED_THRESHOLD_M_S = 0.1


@dataclass(frozen=True)
class RigidObservation:
    """What the controller sees: body pose/twist, hip angles and rates, which contacts touch."""

    body_pos: np.ndarray  # (y, z, α)
    body_vel: np.ndarray  # (ẏ, ż, α̇)
    phi_rad: np.ndarray  # (3,) hip angles relative to the body
    phi_rate_rad_s: np.ndarray  # (3,)
    toe_contact: np.ndarray  # (3,) bool
    body_contact: bool  # rear-bottom corner
    rear_top_contact: bool = False  # rear-top corner (the body standing on its rear face)


@dataclass(frozen=True)
class RigidLayout:
    active_legs: tuple[int, ...]
    body_contact_index: int | None  # contact index of the body corner
    contact_names: tuple[str, ...]

    @property
    def n_tau(self) -> int:
        return len(self.active_legs)


def _rot_coeffs(n_q: int, extra: int | None = None) -> tuple[float, ...]:
    a = np.zeros(n_q)
    a[2] = 1.0
    if extra is not None:
        a[extra] = 1.0
    return tuple(a)


def rigid_snapshot(p: RHexParameters, obs: RigidObservation, with_task: bool = True):
    """The ContactSnapshot of the rigid model at the observed state, and its index layout."""
    legs = tuple(int(i) for i in np.flatnonzero(obs.toe_contact))
    n_q = 3 + len(legs)
    q = np.concatenate([obs.body_pos, obs.phi_rad[list(legs)]])
    qd = np.concatenate([obs.body_vel, obs.phi_rate_rad_s[list(legs)]])
    rot = _rot_coeffs(n_q)
    J_rows, acc_rows, names, mus, thr = [], [], [], [], []
    for j, i in enumerate(legs):
        di = p.hip_offsets_m[i]
        segs = [
            Segment(abs(di), rot, 0.0 if di >= 0 else np.pi),
            Segment(p.leg_length_m, _rot_coeffs(n_q, 3 + j)),
        ]
        pt, Jp, acc = point_kinematics(q, qd, (0, 1), segs)
        _, Jc, ac = GROUND.project(pt, Jp, acc)
        J_rows.append(Jc)
        acc_rows.append(ac)
        names.append(f"toe{i + 1}")
        mus.append(p.mu_toe)
        thr.extend([NORMAL_SPEED_THRESHOLD_M_S, p.toe_speed_thresholds_m_s[i]])
    body_index = None
    if obs.body_contact:
        d, h = p.half_length_m, p.half_height_m
        segs = [Segment(float(np.hypot(d, h)), rot, float(np.arctan2(-h, -d)))]
        pt, Jp, acc = point_kinematics(q, qd, (0, 1), segs)
        _, Jc, ac = GROUND.project(pt, Jp, acc)
        body_index = len(names)
        J_rows.append(Jc)
        acc_rows.append(ac)
        names.append("body")
        mus.append(p.mu_body)
        thr.extend([NORMAL_SPEED_THRESHOLD_M_S, p.body_speed_threshold_m_s])
    if obs.rear_top_contact:  # near vertical the rear face lands: its upper corner becomes a contact too
        d, h = p.half_length_m, p.half_height_m
        segs = [Segment(float(np.hypot(d, h)), rot, float(np.arctan2(h, -d)))]
        pt, Jp, acc = point_kinematics(q, qd, (0, 1), segs)
        _, Jc, ac = GROUND.project(pt, Jp, acc)
        J_rows.append(Jc)
        acc_rows.append(ac)
        names.append("rear_top")
        mus.append(p.mu_body)
        thr.extend([NORMAL_SPEED_THRESHOLD_M_S, p.body_speed_threshold_m_s])
    k = len(names)
    J = np.vstack(J_rows) if k else np.zeros((0, n_q))
    Jd = np.concatenate(acc_rows) if k else np.zeros(0)
    M = np.zeros((n_q, n_q))
    M[0, 0] = M[1, 1] = p.mass_kg
    M[2, 2] = p.inertia_kgm2
    bias = np.zeros(n_q)
    bias[1] = p.mass_kg * p.gravity_m_s2
    S = np.zeros((n_q, len(legs)))
    for j in range(len(legs)):
        S[3 + j, j] = 1.0
    task = None
    if with_task and body_index is not None:
        row = np.zeros((1, n_q + 2 * k))
        row[0, n_q + 2 * body_index] = 1.0
        task = LinearConstraints.inequalities(row, np.zeros((1, len(legs))), [p.body_normal_min_N])
    snap = ContactSnapshot(
        M,
        bias,
        S,
        J,
        Jd,
        J @ qd,
        np.array(mus),
        tuple(names),
        task=task,
        velocity_threshold=np.array(thr),
        coordinate_names=("y", "z", "alpha") + tuple(f"phi{i + 1}" for i in legs),
    )
    return snap, RigidLayout(legs, body_index, tuple(names))
