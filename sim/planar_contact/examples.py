"""The paper's illustrative systems (and two classic checks), each as a ContactSnapshot plus a default input.

block     – a block (point mass) pushed horizontally on a floor; τ = push force P [N].
two_link  – Fig. 1: a two-link mechanism, link 2 lying on the floor (contacts p3, p2), link 1 leaning on a
            right wall (contact p1); τ = elbow torque [N m]. q = (x_c, y_c, θ, γ).
table     – Fig. 5: a rigid two-legged table standing on a floor; τ = horizontal force on the top [N].
bearing   – Fig. 6: a disk spinning between floor, ceiling and two walls, all contacts sliding; τ = spin torque.
painleve  – a uniform rod (half-length l, I = m l²/3) sliding left on its lower end; τ = moment on the rod.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kinematics import ContactFrame, Segment, point_kinematics, rigid_links_dynamics
from .system import ContactModelError, ContactSnapshot

G = 9.81


@dataclass(frozen=True)
class Example:
    name: str
    snapshot: ContactSnapshot
    tau: np.ndarray
    description: str
    parameters: dict


def _contacts(q, qd, points, frames):
    """Stack per-contact (x, J, J̇q̇, ẋ) for points given as (base, segments)."""
    J_rows, acc_rows, vel = [], [], []
    for (base, segs), frame in zip(points, frames, strict=True):
        p, Jp, acc = point_kinematics(q, qd, base, segs)
        _, Jc, accc = frame.project(p, Jp, acc)
        J_rows.append(Jc)
        acc_rows.append(accc)
        vel.append(Jc @ qd)
    return np.vstack(J_rows), np.concatenate(acc_rows), np.concatenate(vel)


def block(mu: float = 0.5, push_N: float = 3.0, mass_kg: float = 1.0, speed_m_s: float = 0.0) -> Example:
    q, qd = np.array([0.0, 0.0]), np.array([speed_m_s, 0.0])
    M = mass_kg * np.eye(2)
    bias = np.array([0.0, mass_kg * G])
    floor = ContactFrame((0.0, 0.0), (0.0, 1.0))
    J, Jd, v = _contacts(q, qd, [((0, 1), [])], [floor])
    snap = ContactSnapshot(
        M, bias, np.array([[1.0], [0.0]]), J, Jd, v, np.array([mu]), ("floor",), coordinate_names=("x", "y")
    )
    return Example(
        "block",
        snap,
        np.array([push_N]),
        "block pushed on a floor, tau = push force P [N]",
        {"mu": mu, "mass_kg": mass_kg, "push_N": push_N},
    )


def two_link(
    mu: float = 0.8,
    elbow_torque_Nm: float = -0.5,
    link_m: float = 0.5,
    mass_kg: float = 1.0,
    gamma_deg: float = 60.0,
) -> Example:
    """q = (x_c, y_c, θ, γ): p3 = (x_c, y_c), link 2 at angle θ to p2, link 1 at θ + γ to p1."""
    L = link_m
    gamma = np.radians(gamma_deg)
    q = np.array([0.0, 0.0, 0.0, gamma])
    qd = np.zeros(4)
    rot2, rot1 = (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 1.0, 1.0)
    I_c = mass_kg * L**2 / 12.0
    links = [
        (mass_kg, I_c, (0, 1), [Segment(L / 2, rot2)], rot2),
        (mass_kg, I_c, (0, 1), [Segment(L, rot2), Segment(L / 2, rot1)], rot1),
    ]
    M, bias = rigid_links_dynamics(q, qd, links, G)
    p1_x = L + L * np.cos(gamma)
    points = [((0, 1), [Segment(L, rot2), Segment(L, rot1)]), ((0, 1), [Segment(L, rot2)]), ((0, 1), [])]
    frames = [
        ContactFrame((p1_x, 0.0), (-1.0, 0.0)),
        ContactFrame((0, 0), (0, 1)),
        ContactFrame((0, 0), (0, 1)),
    ]
    J, Jd, v = _contacts(q, qd, points, frames)
    S = np.array([[0.0], [0.0], [0.0], [1.0]])
    snap = ContactSnapshot(
        M,
        bias,
        S,
        J,
        Jd,
        v,
        np.full(3, mu),
        ("p1_wall", "p2_elbow", "p3_floor"),
        coordinate_names=("x_c", "y_c", "theta", "gamma"),
    )
    return Example(
        "two_link",
        snap,
        np.array([elbow_torque_Nm]),
        "two-link mechanism, link 2 on the floor, link 1 against a wall; tau = elbow torque [N m]",
        {"mu": mu, "link_m": L, "mass_kg": mass_kg, "gamma_deg": gamma_deg},
    )


def table(
    mu: float = 0.5, push_N: float = 1.0, mass_kg: float = 2.0, half_width_m: float = 0.3, leg_m: float = 0.4
) -> Example:
    """q = (x, y, θ) of the table's centre of mass, legs at body points (±half_width, −leg)."""
    q, qd = np.array([0.0, leg_m, 0.0]), np.zeros(3)
    inertia = mass_kg * (2 * half_width_m) ** 2 / 12.0
    M = np.diag([mass_kg, mass_kg, inertia])
    bias = np.array([0.0, mass_kg * G, 0.0])
    rot = (0.0, 0.0, 1.0)
    leg = lambda sx: (
        (0, 1),
        [Segment(half_width_m, rot, 0.0 if sx > 0 else np.pi), Segment(leg_m, rot, -np.pi / 2)],
    )
    floor = ContactFrame((0.0, 0.0), (0.0, 1.0))
    J, Jd, v = _contacts(q, qd, [leg(-1), leg(+1)], [floor, floor])
    S = np.array([[1.0], [0.0], [0.0]])  # horizontal force at the centre of mass
    snap = ContactSnapshot(
        M, bias, S, J, Jd, v, np.full(2, mu), ("left_leg", "right_leg"), coordinate_names=("x", "y", "theta")
    )
    return Example(
        "table",
        snap,
        np.array([push_N]),
        "two-legged rigid table on a floor; tau = push [N]",
        {"mu": mu, "mass_kg": mass_kg},
    )


def bearing(
    mu: float = 0.3,
    spin_torque_Nm: float = 0.0,
    radius_m: float = 0.05,
    mass_kg: float = 0.2,
    spin_rad_s: float = 10.0,
) -> Example:
    """A disk touching floor, ceiling, left and right walls; spinning, so every contact slides (R)."""
    r = radius_m
    qd = np.array([0.0, 0.0, spin_rad_s])  # centre at (0, r), spinning
    M = np.diag([mass_kg, mass_kg, 0.5 * mass_kg * r**2])
    bias = np.array([0.0, mass_kg * G, 0.0])
    # contact coordinates of the material point: ẋ_t = t·(ċ + ω ẑ × (p − c)); rows are constant (J̇ = 0)
    J = np.array(
        [
            [0, 1, 0],
            [1, 0, r],  # floor: n = +y, t = +x
            [0, -1, 0],
            [-1, 0, r],  # ceiling: n = −y, t = −x
            [1, 0, 0],
            [0, -1, r],  # left wall: n = +x, t = −y
            [-1, 0, 0],
            [0, 1, r],  # right wall: n = −x, t = +y
        ],
        dtype=float,
    )
    S = np.array([[0.0], [0.0], [1.0]])
    snap = ContactSnapshot(
        M,
        bias,
        S,
        J,
        np.zeros(8),
        J @ qd,
        np.full(4, mu),
        ("floor", "ceiling", "left_wall", "right_wall"),
        coordinate_names=("x", "y", "theta"),
    )
    return Example(
        "bearing",
        snap,
        np.array([spin_torque_Nm]),
        "disk spinning between four surfaces",
        {"mu": mu, "spin_rad_s": spin_rad_s},
    )


def painleve_critical_mu(theta_rad: float) -> float:
    """μ above which no mode is consistent for the rod sliding left: (tan²θ + 4) / (3 tanθ)."""
    t = np.tan(theta_rad)
    return (t * t + 4.0) / (3.0 * t)


def painleve(
    mu: float = 1.0,
    theta_deg: float | None = None,
    moment_Nm: float = 0.0,
    half_length_m: float = 0.5,
    mass_kg: float = 1.0,
    slide_speed_m_s: float = 1.0,
) -> Example:
    """Rod at angle θ to the floor (default tanθ = 2), lower end A sliding left at `slide_speed_m_s`."""
    theta = np.arctan(2.0) if theta_deg is None else np.radians(theta_deg)
    if not 0.0 < theta < np.pi / 2:
        raise ContactModelError(f"theta_deg must lie in (0, 90), got {np.degrees(theta):.3g}")
    l = half_length_m
    q = np.array([0.0, l * np.sin(theta), theta])
    qd = np.array([-slide_speed_m_s, 0.0, 0.0])
    M = np.diag([mass_kg, mass_kg, mass_kg * l * l / 3.0])
    bias = np.array([0.0, mass_kg * G, 0.0])
    floor = ContactFrame((0.0, 0.0), (0.0, 1.0))
    J, Jd, v = _contacts(q, qd, [((0, 1), [Segment(l, (0.0, 0.0, 1.0), np.pi)])], [floor])
    S = np.array([[0.0], [0.0], [1.0]])
    snap = ContactSnapshot(M, bias, S, J, Jd, v, np.array([mu]), ("lower_end",), coordinate_names=("x", "y", "theta"))
    return Example(
        "painleve",
        snap,
        np.array([moment_Nm]),
        "Painlevé rod sliding on its lower end",
        {"mu": mu, "theta_deg": float(np.degrees(theta)), "critical_mu": painleve_critical_mu(theta)},
    )


EXAMPLES = {"block": block, "two_link": two_link, "table": table, "bearing": bearing, "painleve": painleve}
