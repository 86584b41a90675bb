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

import numba
import numpy as np

from sim.planar_snake.model import PlanarSnakeModel, link_acceleration_bias, link_centres, link_jacobians

__all__ = ["ContactTerms", "all_gaps", "contact_terms", "contact_terms_reference", "link_gaps_to"]


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


@numba.njit(cache=True)
def _gap_kernel(q, Nt, l, centres, radii, links, obstacles):  # pragma: no cover - compiled
    """Gaps of (link, obstacle) pairs straight from q (link CMs by eq. 5, computed once)."""
    n = Nt.shape[0]
    cs = np.cos(q[:n])
    sn = np.sin(q[:n])
    x, y = -l * (Nt @ cs) + q[n], -l * (Nt @ sn) + q[n + 1]
    out = np.empty(links.size)
    for c in range(links.size):
        i, j = links[c], obstacles[c]
        dx, dy = centres[j, 0] - x[i], centres[j, 1] - y[i]
        s = min(max(dx * cs[i] + dy * sn[i], -l), l)
        out[c] = np.sqrt((s * cs[i] - dx) ** 2 + (s * sn[i] - dy) ** 2) - radii[j]
    return out


@numba.njit(cache=True)
def _pair_gap(q, Nt, l, centres, radii, i, j):  # pragma: no cover - compiled
    n = Nt.shape[0]
    xi, yi = q[n], q[n + 1]
    for k in range(n):
        xi -= l * Nt[i, k] * np.cos(q[k])
        yi -= l * Nt[i, k] * np.sin(q[k])
    ct, st = np.cos(q[i]), np.sin(q[i])
    dx, dy = centres[j, 0] - xi, centres[j, 1] - yi
    s = min(max(dx * ct + dy * st, -l), l)
    return np.sqrt((s * ct - dx) ** 2 + (s * st - dy) ** 2) - radii[j]


@numba.njit(cache=True)
def _first_contact_kernel(q0, v, span, Nt, l, centres, radii, free, xtol):  # pragma: no cover - compiled
    """Earliest σ ∈ [0, span] at which a free link's gap along q0 + σ v reaches 0 (bracketed secant with
    bisection safeguard, to ``xtol``). Returns (σ, link, obstacle), link = −1 when no free link touches."""
    n, k = Nt.shape[0], radii.size
    q_end = q0 + span * v
    cs, sn = np.cos(q_end[:n]), np.sin(q_end[:n])
    x, y = -l * (Nt @ cs) + q_end[n], -l * (Nt @ sn) + q_end[n + 1]  # link CMs at the end of the span (eq. 5)
    best, bi, bj = np.inf, -1, -1
    for i in range(n):
        if not free[i]:
            continue
        for j in range(k):
            dx, dy = centres[j, 0] - x[i], centres[j, 1] - y[i]
            if dx * dx + dy * dy > (l + radii[j]) ** 2:
                continue  # farther than half a link plus the radius: cannot touch
            s = min(max(dx * cs[i] + dy * sn[i], -l), l)
            g_end = np.sqrt((s * cs[i] - dx) ** 2 + (s * sn[i] - dy) ** 2) - radii[j]
            if g_end > 0.0:
                continue
            g_lo = _pair_gap(q0, Nt, l, centres, radii, i, j)
            if g_lo <= 0.0:
                sigma = 0.0
            else:
                lo, hi, g_hi = 0.0, span, g_end
                sigma = hi
                for _ in range(200):
                    if hi - lo <= xtol:
                        break
                    mid = lo - g_lo * (hi - lo) / (g_hi - g_lo)  # secant inside the bracket
                    if not (lo < mid < hi) or (mid - lo) < 0.01 * (hi - lo) or (hi - mid) < 0.01 * (hi - lo):
                        mid = 0.5 * (lo + hi)
                    g_mid = _pair_gap(q0 + mid * v, Nt, l, centres, radii, i, j)
                    if g_mid > 0.0:
                        lo, g_lo = mid, g_mid
                    else:
                        hi, g_hi = mid, g_mid
                sigma = hi  # the gap is <= 0 at hi: never report a time before contact
            if sigma < best:
                best, bi, bj = sigma, i, j
    return best, bi, bj


def first_contact(model: PlanarSnakeModel, q0: np.ndarray, v: np.ndarray, span_s: float, free: np.ndarray,
                  xtol_s: float = 1e-13) -> tuple[float, int, int] | None:  # fmt: skip
    """Earliest time in [0, span_s] at which a free link touches an obstacle moving along q0 + σ v, or None."""
    if model.obstacle_radii_m.size == 0:
        return None
    sigma, i, j = _first_contact_kernel(np.asarray(q0, dtype=float), np.asarray(v, dtype=float), float(span_s),
                                        model._Nt, model.link_half_length_m, model.obstacle_centres_m,  # type: ignore[attr-defined]
                                        model.obstacle_radii_m, np.asarray(free, dtype=np.bool_), xtol_s)  # fmt: skip
    return None if i < 0 else (float(sigma), int(i), int(j))


def link_gaps_to(model: PlanarSnakeModel, q: np.ndarray, links, obstacles) -> np.ndarray:
    """Gaps of given (link, obstacle) pairs (compiled; ``_segment_geometry`` is the numpy reference)."""
    links = np.asarray(links, dtype=np.int64).ravel()
    obstacles = np.asarray(obstacles, dtype=np.int64).ravel()
    return _gap_kernel(np.asarray(q, dtype=float), model._Nt, model.link_half_length_m,  # type: ignore[attr-defined]
                       model.obstacle_centres_m, model.obstacle_radii_m, links, obstacles)  # fmt: skip


def all_gaps(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    """Gap of every link to every obstacle, shape (n, k)."""
    n, k = model.n_links, model.obstacle_radii_m.size
    if k == 0:
        return np.zeros((n, 0))
    return link_gaps_to(model, q, model._pair_links, model._pair_obstacles).reshape(n, k)  # type: ignore[attr-defined]


def all_gaps_reference(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    n, k = model.n_links, model.obstacle_radii_m.size
    links = np.repeat(np.arange(n)[:, None], k, axis=1)
    obstacles = np.repeat(np.arange(k)[None, :], n, axis=0)
    return _segment_geometry(model, q, links, obstacles)[3]


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


def contact_terms_reference(
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
        side * (np.sum(b_lin * normal, axis=-1) - 2.0 * theta_d * np.sum(v_lin * t, axis=-1)) - theta_d**2 * dist
    )
    v_perp = v_point - np.sum(n_c * v_point, axis=-1)[:, None] * n_c
    bias_end = np.sum(n_c * (b_lin - (s * theta_d**2)[:, None] * t), axis=-1) + np.sum(v_perp**2, axis=-1) / dist
    bias = np.where(interior, bias_interior, bias_end)
    return ContactTerms(links, obstacles, rows, bias, friction_map, gaps, side, v_t)


@numba.njit(cache=True)
def _contact_kernel(q, qd, Nt, l, centres, radii, links, obstacles):  # pragma: no cover - compiled
    """Same quantities as :func:`contact_terms_reference`, in loops (the hot path of every step)."""
    n = Nt.shape[0]
    theta = q[:n]
    x, y = -l * (Nt @ np.cos(theta)) + q[n], -l * (Nt @ np.sin(theta)) + q[n + 1]
    m = links.size
    rows = np.zeros((m, n + 2))
    fmap = np.zeros((n + 2, m))
    bias = np.zeros(m)
    gaps = np.zeros(m)
    side = np.zeros(m)
    vt = np.zeros(m)
    sn = np.sin(theta)
    cs = np.cos(theta)
    for c in range(m):
        i, j = links[c], obstacles[c]
        ct, st = cs[i], sn[i]
        dx, dy = centres[j, 0] - x[i], centres[j, 1] - y[i]
        s = min(max(dx * ct + dy * st, -l), l)
        rx, ry = s * ct - dx, s * st - dy
        dist = np.sqrt(rx * rx + ry * ry)
        gaps[c] = dist - radii[j]
        ncx, ncy = rx / dist, ry / dist
        nx, ny = -st, ct
        tcx, tcy = -ncy, ncx
        vx, vy, bx, by = qd[n], qd[n + 1], 0.0, 0.0
        for k in range(n):
            a = l * Nt[i, k]
            jx, jy = a * sn[k], -a * cs[k]
            rows[c, k] = ncx * jx + ncy * jy
            fmap[k, c] = tcx * jx + tcy * jy
            vx += jx * qd[k]
            vy += jy * qd[k]
            w2 = qd[k] * qd[k]
            bx += a * cs[k] * w2
            by += a * sn[k] * w2
        rows[c, n], rows[c, n + 1] = ncx, ncy
        fmap[n, c], fmap[n + 1, c] = tcx, tcy
        ncn = ncx * nx + ncy * ny
        rows[c, i] += s * ncn
        fmap[i, c] += s * (tcx * nx + tcy * ny)
        w = qd[i]
        vpx, vpy = vx + s * w * nx, vy + s * w * ny
        v_t = tcx * vpx + tcy * vpy
        vt[c] = v_t
        sg = 1.0 if v_t > 0 else (-1.0 if v_t < 0 else 0.0)
        for k in range(n + 2):
            fmap[k, c] *= sg
        side[c] = 1.0 if ncn >= 0 else -1.0
        if abs(s) < l:
            bias[c] = side[c] * (bx * nx + by * ny - 2.0 * w * (vx * ct + vy * st)) - w * w * dist
        else:
            vn = ncx * vpx + ncy * vpy
            px, py = vpx - vn * ncx, vpy - vn * ncy
            bias[c] = ncx * (bx - s * w * w * ct) + ncy * (by - s * w * w * st) + (px * px + py * py) / dist
    return rows, bias, fmap, gaps, side, vt


def contact_terms(
    model: PlanarSnakeModel, q: np.ndarray, qd: np.ndarray, links: np.ndarray, obstacles: np.ndarray
) -> ContactTerms:
    """Rows C̄, bias C̄̇q̇, friction map Λ, gaps and sides of the given contacts (compiled path)."""
    links = np.asarray(links, dtype=np.int64)
    obstacles = np.asarray(obstacles, dtype=np.int64)
    rows, bias, fmap, gaps, side, vt = _contact_kernel(
        np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(qd, dtype=float), model._Nt,  # type: ignore[attr-defined]
        model.link_half_length_m, model.obstacle_centres_m, model.obstacle_radii_m, links, obstacles,
    )  # fmt: skip
    return ContactTerms(links, obstacles, rows, bias, fmap, gaps, side, vt)
