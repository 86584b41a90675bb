"""The obstacles' gap and contact frame at one centreline point, compiled (numba) for the compiled step.

`sim.cosserat.obstacles` (numpy, per array of points) is the readable reference: each function here repeats its
operations point by point, and tests/sim/cosserat/test_compiled_step.py compares the two on points around every
kind of obstacle. An obstacle is packed as (kind, parameters) by `pack_obstacles`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from sim.cosserat.obstacles import CurvedTube, Cylinder, Plane

PLANE, CYLINDER, TUBE = 0, 1, 2
N_PARAMETERS = 10


def pack_obstacles(obstacles) -> tuple[np.ndarray, np.ndarray]:
    """(kinds (n,), parameters (n, N_PARAMETERS)) of a model's obstacles.

    Plane: unit normal, tangent basis t1, t2 (constant: the plane's own), n·point. Cylinder: centre, unit axis,
    radius, half length. Tube: inner radius, straight length, bend radius, bend angle, exit length, mouth radius."""
    kinds = np.zeros(len(obstacles), dtype=np.int64)
    params = np.zeros((len(obstacles), N_PARAMETERS))
    for o, ob in enumerate(obstacles):
        if isinstance(ob, Plane):
            n, t1, t2, offset = ob._frame
            kinds[o] = PLANE
            params[o, 0:3], params[o, 3:6], params[o, 6:9], params[o, 9] = n, t1, t2, offset
        elif isinstance(ob, Cylinder):
            axis = np.asarray(ob.axis, dtype=float)
            kinds[o] = CYLINDER
            params[o, 0:3] = ob.center_m
            params[o, 3:6] = axis / np.linalg.norm(axis)
            params[o, 6], params[o, 7] = ob.radius_m, ob.half_length_m
        elif isinstance(ob, CurvedTube):
            kinds[o] = TUBE
            params[o, 0:6] = (
                ob.inner_radius_m,
                ob.straight_length_m,
                ob.bend_radius_m,
                ob.bend_angle_rad,
                ob.exit_length_m,
                ob.mouth_radius_m,
            )
        else:
            raise TypeError(f"no compiled query for obstacle {ob!r}")
    return kinds, params


@numba.njit(cache=True)
def _tangent_basis(n0, n1, n2, p0, p1, p2, out_t1, out_t2):
    """`obstacles._tangent_basis` for one point: t1 the preferred direction projected on the plane ⟂ n, t2 = n × t1."""
    d = p0 * n0 + p1 * n1 + p2 * n2
    t0, t1, t2 = p0 - d * n0, p1 - d * n1, p2 - d * n2
    norm = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if norm < 1e-9:
        a0, a1, a2 = (1.0, 0.0, 0.0) if abs(n0) < 0.9 else (0.0, 1.0, 0.0)
        d = a0 * n0 + a1 * n1 + a2 * n2
        t0, t1, t2 = a0 - d * n0, a1 - d * n1, a2 - d * n2
        norm = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    t0, t1, t2 = t0 / norm, t1 / norm, t2 / norm
    out_t1[0], out_t1[1], out_t1[2] = t0, t1, t2
    out_t2[0] = n1 * t2 - n2 * t1
    out_t2[1] = n2 * t0 - n0 * t2
    out_t2[2] = n0 * t1 - n1 * t0


@numba.njit(cache=True)
def _tube_closest(prm, p):
    """`CurvedTube.centreline_closest` for one point: (closest centreline point, its tangent)."""
    ls, rc, phi_end, exit_len = prm[1], prm[2], prm[3], prm[4]
    best_c = np.zeros(3)
    best_t = np.zeros(3)
    # straight entry along +x
    c = np.array([min(p[0], ls), 0.0, 0.0])
    d_in = math.sqrt((p[0] - c[0]) ** 2 + (p[1] - c[1]) ** 2 + (p[2] - c[2]) ** 2)
    best, best_c[:], best_t[:] = d_in, c, np.array([1.0, 0.0, 0.0])
    # arc around (ls, rc, 0) from angle −π/2
    w0, w1 = p[0] - ls, p[1] - rc
    ang = math.atan2(w1, w0)
    phi = (ang + math.pi / 2 + math.pi) % (2 * math.pi) - math.pi
    phi = min(max(phi, 0.0), phi_end)
    theta = -math.pi / 2 + phi
    c_arc = np.array([ls + rc * math.cos(theta), rc + rc * math.sin(theta), 0.0])
    d_arc = math.sqrt((p[0] - c_arc[0]) ** 2 + (p[1] - c_arc[1]) ** 2 + (p[2] - c_arc[2]) ** 2)
    if p[0] <= ls - rc:
        d_arc = np.inf
    if d_arc < best:
        best = d_arc
        best_c[:] = c_arc
        best_t[0], best_t[1], best_t[2] = -math.sin(theta), math.cos(theta), 0.0
    # straight exit
    end_theta = -math.pi / 2 + phi_end
    e = np.array([ls + rc * math.cos(end_theta), rc + rc * math.sin(end_theta), 0.0])
    te = np.array([-math.sin(end_theta), math.cos(end_theta), 0.0])
    s = (p[0] - e[0]) * te[0] + (p[1] - e[1]) * te[1] + (p[2] - e[2]) * te[2]
    s = min(max(s, 0.0), exit_len)
    c_out = e + s * te
    d_out = math.sqrt((p[0] - c_out[0]) ** 2 + (p[1] - c_out[1]) ** 2 + (p[2] - c_out[2]) ** 2)
    if d_out < best:
        best_c[:] = c_out
        best_t[:] = te
    return best_c, best_t


@numba.njit(cache=True)
def obstacle_query(kind, prm, p, r, normal, t1, t2):
    """Gap of a node at centreline point p (3,) with radius r; its unit normal (into the rod) and tangent basis are
    written into normal, t1, t2 (3,) each."""
    if kind == PLANE:
        for e in range(3):
            normal[e] = prm[e]
            t1[e] = prm[3 + e]
            t2[e] = prm[6 + e]
        return p[0] * prm[0] + p[1] * prm[1] + p[2] * prm[2] - prm[9] - r
    if kind == CYLINDER:
        rel0, rel1, rel2 = p[0] - prm[0], p[1] - prm[1], p[2] - prm[2]
        s = rel0 * prm[3] + rel1 * prm[4] + rel2 * prm[5]
        s = min(max(s, -prm[7]), prm[7])
        d0, d1, d2 = rel0 - s * prm[3], rel1 - s * prm[4], rel2 - s * prm[5]
        dist = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if dist < 1e-14:
            normal[0], normal[1], normal[2] = 0.0, 0.0, 1.0
        else:
            normal[0], normal[1], normal[2] = d0 / dist, d1 / dist, d2 / dist
        _tangent_basis(normal[0], normal[1], normal[2], prm[3], prm[4], prm[5], t1, t2)
        return dist - prm[6] - r
    # the curved tube, from inside
    c, tangent = _tube_closest(prm, p)
    d0, d1, d2 = p[0] - c[0], p[1] - c[1], p[2] - c[2]
    dist = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    if dist < 1e-14:
        normal[0], normal[1], normal[2] = -0.0, -0.0, -1.0
    else:
        normal[0], normal[1], normal[2] = -d0 / dist, -d1 / dist, -d2 / dist
    gap = prm[0] - r - dist
    if p[0] < 0.0:  # before the mouth: the bell mouth's wall (`CurvedTube._rim`)
        rho = math.sqrt(p[1] * p[1] + p[2] * p[2])
        if rho < 1e-14:
            e1, e2 = 0.0, 1.0
        else:
            e1, e2 = p[1] / rho, p[2] / rho
        x = p[0]
        wall = prm[0] + x * x / (2.0 * prm[5])
        slope = x / prm[5]
        norm = math.sqrt(1.0 + slope * slope)
        normal[0], normal[1], normal[2] = slope / norm, -e1 / norm, -e2 / norm
        gap = (wall - r - rho) / norm
    _tangent_basis(normal[0], normal[1], normal[2], tangent[0], tangent[1], tangent[2], t1, t2)
    return gap
