"""Rigid obstacles: gap, contact normal and tangent basis at the rod's contact nodes.

The rod is treated as sphere-swept (a capsule of local radius r around the centreline), so the gap of a node
at centreline point p is dist(p, obstacle) − r and the contact point is p − r·n. For a rod lying on a surface
this is the paper's surface point p + R·d(β) nearest the obstacle; its gradient with respect to p is exactly
the normal n (envelope theorem), which the Newton Jacobian uses. Normals point from the obstacle into the rod,
so a positive normal force pushes the rod along n.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


class ObstacleError(ValueError):
    """Invalid obstacle geometry."""


def _unit(v: np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=float).reshape(3)
    norm = np.linalg.norm(v)
    if not norm > 0:
        raise ObstacleError(f"{name} must be a non-zero 3-vector, got {v.tolist()}")
    return v / norm


def _tangent_basis(normal: np.ndarray, preferred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal t1 (the preferred direction projected on the tangent plane), t2 = n × t1."""
    t1 = preferred - np.sum(preferred * normal, axis=1)[:, None] * normal
    norm = np.linalg.norm(t1, axis=1)
    bad = norm < 1e-9
    if np.any(bad):
        alt = np.where(np.abs(normal[bad, 0:1]) < 0.9, np.array([[1.0, 0, 0]]), np.array([[0, 1.0, 0]]))
        alt = alt - np.sum(alt * normal[bad], axis=1)[:, None] * normal[bad]
        t1[bad] = alt
        norm[bad] = np.linalg.norm(alt, axis=1)
    t1 = t1 / norm[:, None]
    return t1, np.cross(normal, t1)


def _safe_direction(d: np.ndarray, fallback: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dist = np.linalg.norm(d, axis=1)
    small = dist < 1e-14
    n = np.where(small[:, None], fallback, d / np.where(small, 1.0, dist)[:, None])
    return n, dist


@dataclass(frozen=True)
class Plane:
    """Half-space {x : n·(x − point) ≥ 0}; n is the outward normal (up for a floor)."""

    point_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    normal: tuple[float, float, float] = (0.0, 0.0, 1.0)
    name: str = "plane"

    def __post_init__(self) -> None:
        _unit(self.normal, "plane normal")

    @cached_property
    def _frame(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Unit normal, tangent basis and n·point: constant, so computed once (the per-node query was ~10 %
        of a rod step's time in Python overhead)."""
        n = _unit(self.normal, "plane normal")
        t1, t2 = _tangent_basis(n[None, :], np.array([[1.0, 0, 0]]))
        return n, t1[0], t2[0], float(np.asarray(self.point_m, dtype=float) @ n)

    def query(self, p: np.ndarray, r: np.ndarray):
        n, t1, t2, offset = self._frame
        k = p.shape[0]
        gap = p @ n - offset - r
        return gap, np.tile(n, (k, 1)), np.tile(t1, (k, 1)), np.tile(t2, (k, 1))

    def query_reference(self, p: np.ndarray, r: np.ndarray):
        """Per-node evaluation (the original code); tests compare `query` with it."""
        n = _unit(self.normal, "plane normal")
        normal = np.broadcast_to(n, p.shape).copy()
        gap = (p - np.asarray(self.point_m)) @ n - r
        t1, t2 = _tangent_basis(normal, np.broadcast_to(np.array([1.0, 0, 0]), p.shape))
        return gap, normal, t1, t2


@dataclass(frozen=True)
class Cylinder:
    """Solid cylinder (a bar) of radius `radius_m` around an axis, capped as a capsule beyond ±half_length_m."""

    center_m: tuple[float, float, float]
    axis: tuple[float, float, float]
    radius_m: float
    half_length_m: float = float("inf")
    name: str = "bar"

    def __post_init__(self) -> None:
        _unit(self.axis, "cylinder axis")
        if not self.radius_m > 0:
            raise ObstacleError(f"cylinder radius_m must be > 0, got {self.radius_m!r}")

    def query(self, p: np.ndarray, r: np.ndarray):
        a = _unit(self.axis, "cylinder axis")
        rel = p - np.asarray(self.center_m)
        s = np.clip(rel @ a, -self.half_length_m, self.half_length_m)
        d = rel - s[:, None] * a
        fallback = np.broadcast_to(np.array([0.0, 0.0, 1.0]), p.shape)
        normal, dist = _safe_direction(d, fallback)
        gap = dist - self.radius_m - r
        t1, t2 = _tangent_basis(normal, np.broadcast_to(a, p.shape))
        return gap, normal, t1, t2


@dataclass(frozen=True)
class CurvedTube:
    """Inside of a rigid tube: straight along +x from the origin for `straight_length_m`, then a circular
    arc of centreline radius `bend_radius_m` turning towards +y through `bend_angle_rad`, then straight again for
    `exit_length_m` (the tube is open-ended). The rod must stay within `inner_radius_m` of the centreline.

    The mouth at x = 0 is a bell mouth: before it (x < 0) the wall radius grows as R(x) = R_i + x²/(2·R_m)
    (`mouth_radius_m` R_m, the profile's radius of curvature), so a node before the mouth is free unless it comes
    close to the flare (R = 2.4 mm at x = −2 mm for R_m = 1 mm). Without it the entry's straight wall extended to
    x → −∞ and held the part of the rod *outside* the tube within the inner radius, so it could not buckle. A
    sharp rim instead catches the rod between two contact nodes (1.3 mm apart at m = 20), which Newton cannot
    resolve. Gap and normal are continuous with the straight wall's at x = 0."""

    inner_radius_m: float
    straight_length_m: float
    bend_radius_m: float
    bend_angle_rad: float = np.pi / 2
    exit_length_m: float = 0.05
    mouth_radius_m: float = 1e-3
    name: str = "tube"

    def __post_init__(self) -> None:
        for key in ("inner_radius_m", "straight_length_m", "bend_radius_m", "bend_angle_rad", "mouth_radius_m"):
            if not getattr(self, key) > 0:
                raise ObstacleError(f"tube {key} must be > 0, got {getattr(self, key)!r}")

    def centreline_closest(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Closest centreline point (straight entry, arc, straight exit) and the centreline tangent there."""
        ls, rc, phi_end = self.straight_length_m, self.bend_radius_m, self.bend_angle_rad
        zeros = np.zeros(len(p))
        c_in = np.stack([np.minimum(p[:, 0], ls), zeros, zeros], axis=1)
        t_in = np.broadcast_to(np.array([1.0, 0, 0]), p.shape)
        centre = np.array([ls, rc, 0.0])
        w = p[:, :2] - centre[:2]
        ang = np.arctan2(w[:, 1], w[:, 0])  # the arc starts at angle −π/2
        phi = np.clip(np.mod(ang + np.pi / 2 + np.pi, 2 * np.pi) - np.pi, 0.0, phi_end)
        theta = -np.pi / 2 + phi
        c_arc = np.stack([centre[0] + rc * np.cos(theta), centre[1] + rc * np.sin(theta), zeros], 1)
        t_arc = np.stack([-np.sin(theta), np.cos(theta), zeros], axis=1)
        end_theta = -np.pi / 2 + phi_end
        end = centre + rc * np.array([np.cos(end_theta), np.sin(end_theta), 0.0])
        t_end = np.array([-np.sin(end_theta), np.cos(end_theta), 0.0])
        s_out = np.clip((p - end) @ t_end, 0.0, self.exit_length_m)
        c_out = end + s_out[:, None] * t_end
        t_out = np.broadcast_to(t_end, p.shape)
        candidates = np.stack([c_in, c_arc, c_out])  # (3, k, 3)
        dist = np.linalg.norm(p[None] - candidates, axis=2)
        dist[1, p[:, 0] <= ls - rc] = np.inf  # the arc's circle is irrelevant far before the bend
        pick = np.argmin(dist, axis=0)
        rows = np.arange(len(p))
        c = candidates[pick, rows]
        t = np.stack([t_in, t_arc, t_out])[pick, rows]
        return c, t

    def query(self, p: np.ndarray, r: np.ndarray):
        c, tangent = self.centreline_closest(p)
        fallback = np.broadcast_to(np.array([0.0, 0.0, 1.0]), p.shape)
        outward, dist = _safe_direction(p - c, fallback)
        normal = -outward
        gap = self.inner_radius_m - r - dist
        before = p[:, 0] < 0.0
        if np.any(before):
            gap, normal = gap.copy(), normal.copy()
            gap[before], normal[before] = self._rim(p[before], r[before] if np.ndim(r) else r)
        t1, t2 = _tangent_basis(normal, tangent)
        return gap, normal, t1, t2

    def _rim(self, p: np.ndarray, r) -> tuple[np.ndarray, np.ndarray]:
        """Gap and normal (into the rod) of points before the mouth (x < 0), inside the bell mouth's wall
        R(x) = R_i + x²/(2 R_m): the first-order distance (R − r − ρ)/√(1 + R′²) along n ∝ (R′, −e_ρ)."""
        radial = p.copy()
        radial[:, 0] = 0.0
        fallback = np.broadcast_to(np.array([0.0, 0.0, 1.0]), p.shape)  # on the axis: as the wall's query
        e, rho = _safe_direction(radial, fallback)
        x = p[:, 0]
        wall = self.inner_radius_m + x * x / (2.0 * self.mouth_radius_m)
        slope = x / self.mouth_radius_m  # dR/dx (< 0 before the mouth)
        norm = np.sqrt(1.0 + slope * slope)
        normal = np.column_stack([slope, -e[:, 1], -e[:, 2]]) / norm[:, None]
        return (wall - r - rho) / norm, normal
