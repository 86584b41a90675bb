"""Planar point kinematics for mechanisms built from a floating base and revolute angles.

A point is p(q) = (q[ix], q[iy]) + Σ_k L_k (cos φ_k, sin φ_k) with φ_k = a_k·q + φ0_k. Its Jacobian and the
bias acceleration J̇q̇ = −Σ L_k (cos φ_k, sin φ_k) φ̇_k² follow in closed form; the tests check both
against finite differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Segment:
    length_m: float
    angle_coeffs: tuple[float, ...]  # a_k, so that φ_k = a_k · q + offset
    angle_offset_rad: float = 0.0


def point_kinematics(q, qd, base_xy: tuple[int, int] | None, segments: list[Segment]):
    """(p, J, Jdot_qdot) of a point: p (2,), J (2, n), J̇q̇ (2,)."""
    q = np.asarray(q, float)
    qd = np.asarray(qd, float)
    n = q.size
    p = np.zeros(2)
    J = np.zeros((2, n))
    acc = np.zeros(2)
    if base_xy is not None:
        p += q[list(base_xy)]
        J[0, base_xy[0]] = 1.0
        J[1, base_xy[1]] = 1.0
    for s in segments:
        a = np.asarray(s.angle_coeffs, float)
        phi = a @ q + s.angle_offset_rad
        u = np.array([np.cos(phi), np.sin(phi)])
        du = np.array([-np.sin(phi), np.cos(phi)])
        p += s.length_m * u
        J += s.length_m * np.outer(du, a)
        acc += -s.length_m * u * (a @ qd) ** 2
    return p, J, acc


@dataclass(frozen=True)
class ContactFrame:
    """Environment surface at `origin` with outward normal `normal`; t is n rotated by −90° (t × n = +1)."""

    origin: tuple[float, float]
    normal: tuple[float, float]

    @property
    def n(self) -> np.ndarray:
        v = np.asarray(self.normal, float)
        return v / np.linalg.norm(v)

    @property
    def t(self) -> np.ndarray:
        n = self.n
        return np.array([n[1], -n[0]])

    def project(self, p, J, acc):
        """Contact coordinates (x_n, x_t), their Jacobian rows and J̇q̇ entries."""
        n, t = self.n, self.t
        d = np.asarray(p) - np.asarray(self.origin, float)
        return np.array([n @ d, t @ d]), np.vstack([n @ J, t @ J]), np.array([n @ acc, t @ acc])


def rigid_links_dynamics(q, qd, links, gravity_m_s2: float = 9.81):
    """M, bias = C q̇ + g for planar rigid links given as (mass_kg, inertia_kgm2, com_base, com_segments, a_rot).

    Kane's form: M = Σ m J_cᵀJ_c + I a aᵀ, C q̇ = Σ m J_cᵀ J̇_c q̇ (a_rot constant so J̇_ω = 0),
    g = Σ m g ∂y_c/∂q.
    """
    n = len(q)
    M = np.zeros((n, n))
    bias = np.zeros(n)
    for mass, inertia, base, segs, a_rot in links:
        _, Jc, acc = point_kinematics(q, qd, base, segs)
        a = np.asarray(a_rot, float)
        M += mass * Jc.T @ Jc + inertia * np.outer(a, a)
        bias += mass * Jc.T @ acc + mass * gravity_m_s2 * Jc[1]
    return M, bias
