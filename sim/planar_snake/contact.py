"""Link–obstacle geometry (paper 001, eq. 13–20): gap functions, contact side α, constraint rows, friction map.

The gap of link i to obstacle j is the distance from the circle to the link segment L_i (eq. 14) minus the
radius: g_ij = min_{s∈[-l,l]} |P_i + s t_i − c_j| − R_j, so L_i ∩ O_j ≠ ∅ ⇔ g_ij ≤ 0 (eq. 13–14).

Deviation from the paper, on purpose: the paper's constraint (16–19) is on the normal velocity of the link *CM*
(Assumption 5). A link that rotates about its CM then sweeps into the obstacle although the constraint holds,
which would break "no penetration". We use the exact gap gradient instead, C_i = ∂g_i/∂q: the normal velocity
of the material point touching the obstacle, n_c·(v_i + s* θ̇_i n_i). When the touching point is inside the
link, n_c = α_i n_i (α_i = α̃(i) of eq. 15) and C_i is the paper's row α_i C_i(q) plus the lever term α_i s* on
θ_i; the normal force then also exerts the torque s* λ about the CM. Tangential (friction) forces lie along the
link, so they exert no torque, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.planar_snake.model import PlanarSnakeModel, link_acceleration_bias, link_centres, link_jacobians

__all__ = ["ContactTerms", "all_gaps", "contact_terms", "link_gaps_to"]


def _segment_geometry(model: PlanarSnakeModel, q: np.ndarray, links: np.ndarray, obstacles: np.ndarray):
    """Closest point parameter s*, vector r = X − c from the obstacle centre to it, and the gap, per pair."""
    n, l = model.n_links, model.link_half_length_m
    x, y = link_centres(model, q)
    theta = q[:n][links]
    t = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    centres = model.obstacle_centres_m[obstacles]
    d = centres - np.stack([x[links], y[links]], axis=-1)
    s = np.clip(np.sum(d * t, axis=-1), -l, l)
    r = s[..., None] * t - d
    dist = np.sqrt(np.sum(r * r, axis=-1))
    return s, r, dist, dist - model.obstacle_radii_m[obstacles], t


def all_gaps(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    """Gap of every link to every obstacle, shape (n, k)."""
    n, k = model.n_links, model.obstacle_radii_m.size
    if k == 0:
        return np.zeros((n, 0))
    links = np.repeat(np.arange(n)[:, None], k, axis=1)
    obstacles = np.repeat(np.arange(k)[None, :], n, axis=0)
    return _segment_geometry(model, q, links, obstacles)[3]


def link_gaps_to(
    model: PlanarSnakeModel, q: np.ndarray, links: np.ndarray, obstacles: np.ndarray
) -> np.ndarray:
    """Gaps of given (link, obstacle) pairs."""
    return _segment_geometry(model, q, np.asarray(links), np.asarray(obstacles))[3]


@dataclass(frozen=True)
class ContactTerms:
    """Everything the LCPs (32) and (36) need for the m contacted links, in the order of ``links``."""

    links: np.ndarray  # (m,) link indices
    obstacles: np.ndarray  # (m,) obstacle index per contact
    rows: np.ndarray  # (m, n+2) C̄: ġ = C̄ q̇ (gap rate, positive = away from the obstacle)
    bias: np.ndarray  # (m,) C̄̇ q̇: g̈ = C̄ q̈ + bias
    friction_map: np.ndarray  # (n+2, m) Λ of eq. 30: obstacle friction generalised force = −μ_o Λ λ
    gaps: np.ndarray  # (m,)
    side: np.ndarray  # (m,) α_i ∈ {−1, +1}: side of the link the force acts on (eq. 15)
    tangential_velocity: np.ndarray  # (m,) slip velocity v_t along the contact tangent


def contact_terms(
    model: PlanarSnakeModel, q: np.ndarray, qd: np.ndarray, links: np.ndarray, obstacles: np.ndarray
) -> ContactTerms:
    n, l = model.n_links, model.link_half_length_m
    links = np.asarray(links, dtype=int)
    obstacles = np.asarray(obstacles, dtype=int)
    m = links.size
    s, r, dist, gaps, t = _segment_geometry(model, q, links, obstacles)
    n_c = r / dist[:, None]  # contact normal, from the obstacle to the link
    normal = np.stack([-t[:, 1], t[:, 0]], axis=-1)  # link normal n_i (local y axis, eq. 3)
    tangent_c = np.stack([-n_c[:, 1], n_c[:, 0]], axis=-1)
    Jx, Jy = link_jacobians(model, q)
    bx, by = link_acceleration_bias(model, q, qd)
    theta_d = qd[:n][links]
    v_lin = np.stack([Jx[links] @ qd, Jy[links] @ qd], axis=-1)
    v_point = v_lin + (s * theta_d)[:, None] * normal  # velocity of the touching material point
    nc_dot_ni = np.sum(n_c * normal, axis=-1)
    tc_dot_ni = np.sum(tangent_c * normal, axis=-1)

    rows = n_c[:, :1] * Jx[links] + n_c[:, 1:] * Jy[links]
    rows[np.arange(m), links] += s * nc_dot_ni
    v_t = np.sum(tangent_c * v_point, axis=-1)
    sgn = np.sign(v_t)
    friction_map = (tangent_c[:, :1] * Jx[links] + tangent_c[:, 1:] * Jy[links]).T.copy()
    friction_map[links, np.arange(m)] += s * tc_dot_ni
    friction_map *= sgn[None, :]

    b_lin = np.stack([bx[links], by[links]], axis=-1)
    interior = np.abs(s) < l
    side = np.where(nc_dot_ni >= 0.0, 1.0, -1.0)
    # second time derivative of the gap at fixed q̈ = 0 (derivation in docs/planar_snake.md)
    bias_interior = (
        side * (np.sum(b_lin * normal, axis=-1) - 2.0 * theta_d * np.sum(v_lin * t, axis=-1))
        - theta_d**2 * dist
    )
    v_perp = v_point - np.sum(n_c * v_point, axis=-1)[:, None] * n_c
    bias_end = (
        np.sum(n_c * (b_lin - (s * theta_d**2)[:, None] * t), axis=-1) + np.sum(v_perp**2, axis=-1) / dist
    )
    bias = np.where(interior, bias_interior, bias_end)
    return ContactTerms(links, obstacles, rows, bias, friction_map, gaps, side, v_t)
