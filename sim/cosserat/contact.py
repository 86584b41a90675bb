"""Frictional contact of one rod with rigid obstacles: the contact points' gaps, frames and Jacobians, the generalized
contact force and slip, the contact rows and columns of the Newton matrix, and the slack scales σ_λ, σ_δ, σ_v.

The rod is sphere-swept: gap = dist(p, obstacle) − r, contact point p − r n (`sim.cosserat.obstacles`). The laws that
turn the slacks into forces, gaps and slips are `sim.cosserat._slack_kernels.contact_laws` (numba) and
`sim.cosserat.slack` (their readable reference).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from sim.cosserat.forces import Kinematics
from sim.cosserat.model import RodModel
from sim.cosserat.obstacles import Plane


@dataclass
class ContactQuery:
    gap_m: np.ndarray  # (k,)
    normal: np.ndarray  # (k,3)
    t1: np.ndarray
    t2: np.ndarray
    jac_position: np.ndarray  # (k,3,N) world velocity of the centreline point
    jac_contact: np.ndarray  # (k,3,N) world velocity of the contact point p − r n


@numba.njit(cache=True)
def contact_point_jacobians(R, J, index, offset, section_of_point):
    """World Jacobians of the centreline points p (jac_pos = R J_v) and of the contact points p + d
    (jac_c = R J_v − d̃ R J_ω) for K = n_obstacles·k contact candidates; candidate a sits on sweep point
    index[a % k] with offset d = offset[a]. Loops instead of einsum/cross/tile: this runs at every residual.
    J at a point of section s is zero beyond column 18 + 6s, so those columns are left at zero."""
    k = index.shape[0]
    n_cand = offset.shape[0]
    n_dof = J.shape[2]
    jac_pos = np.zeros((n_cand, 3, n_dof))
    jac_c = np.zeros((n_cand, 3, n_dof))
    for a in range(n_cand):
        i = index[a % k]
        Ri = R[i]
        d0, d1, d2 = offset[a, 0], offset[a, 1], offset[a, 2]
        for n in range(min(18 + 6 * section_of_point[i], n_dof)):
            v0 = Ri[0, 0] * J[i, 3, n] + Ri[0, 1] * J[i, 4, n] + Ri[0, 2] * J[i, 5, n]
            v1 = Ri[1, 0] * J[i, 3, n] + Ri[1, 1] * J[i, 4, n] + Ri[1, 2] * J[i, 5, n]
            v2 = Ri[2, 0] * J[i, 3, n] + Ri[2, 1] * J[i, 4, n] + Ri[2, 2] * J[i, 5, n]
            w0 = Ri[0, 0] * J[i, 0, n] + Ri[0, 1] * J[i, 1, n] + Ri[0, 2] * J[i, 2, n]
            w1 = Ri[1, 0] * J[i, 0, n] + Ri[1, 1] * J[i, 1, n] + Ri[1, 2] * J[i, 2, n]
            w2 = Ri[2, 0] * J[i, 0, n] + Ri[2, 1] * J[i, 1, n] + Ri[2, 2] * J[i, 2, n]
            jac_pos[a, 0, n] = v0
            jac_pos[a, 1, n] = v1
            jac_pos[a, 2, n] = v2
            # v_c = v_p + ω × d
            jac_c[a, 0, n] = v0 + w1 * d2 - w2 * d1
            jac_c[a, 1, n] = v1 + w2 * d0 - w0 * d2
            jac_c[a, 2, n] = v2 + w0 * d1 - w1 * d0
    return jac_pos, jac_c


def contact_query_reference(model: RodModel, kin: Kinematics) -> ContactQuery:
    """Plain-numpy version of `contact_query` (the tests compare the numba path against it)."""
    c = model.contact
    idx = model.grid.contact_index
    R, p, J = kin.R[idx], kin.p[idx], kin.J[idx]
    r = model.contact_radius_m
    jac_pos = np.einsum("kij,kjn->kin", R, J[:, 3:6])
    jac_rot = np.einsum("kij,kjn->kin", R, J[:, 0:3])
    parts = [ob.query(p, r) for ob in c.obstacles]
    gap = np.concatenate([x[0] for x in parts])
    normal = np.concatenate([x[1] for x in parts])
    t1 = np.concatenate([x[2] for x in parts])
    t2 = np.concatenate([x[3] for x in parts])
    n_obs = len(c.obstacles)
    jac_pos = np.tile(jac_pos, (n_obs, 1, 1))
    jac_rot = np.tile(jac_rot, (n_obs, 1, 1))
    d = -np.tile(r, n_obs)[:, None] * normal  # contact point offset from the centreline
    # v_c = v_p + ω × d = v_p − d̃ ω
    jac_c = jac_pos - np.cross(d[:, :, None], jac_rot, axis=1)
    return ContactQuery(gap, normal, t1, t2, jac_pos, jac_c)


@functools.lru_cache(maxsize=32)
def _constant_plane_frame(plane: Plane, k: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A plane's gap offset and its (constant) normal and tangents tiled over k nodes, from its own query at the
    origin (gap = p·n + gap(0) − r), so the residual does not re-tile them at every evaluation."""
    gap0, normal, t1, t2 = plane.query(np.zeros((1, 3)), np.zeros(1))
    tiled = tuple(np.ascontiguousarray(np.broadcast_to(x[0], (k, 3))) for x in (normal, t1, t2))
    for x in tiled:
        x.setflags(write=False)
    return (float(gap0[0]), *tiled)


def _obstacle_query(ob, p: np.ndarray, r: np.ndarray):
    if isinstance(ob, Plane):
        gap0, normal, t1, t2 = _constant_plane_frame(ob, p.shape[0])
        return p @ normal[0] + gap0 - r, normal, t1, t2
    return ob.query(p, r)


def contact_query(model: RodModel, kin: Kinematics) -> ContactQuery:
    c = model.contact
    idx = model.grid.contact_index
    p = kin.p[idx]
    r = model.contact_radius_m
    if len(c.obstacles) == 1:
        gap, normal, t1, t2 = _obstacle_query(c.obstacles[0], p, r)
        d = -r[:, None] * normal  # contact point offset from the centreline
    else:
        parts = [_obstacle_query(ob, p, r) for ob in c.obstacles]
        gap = np.concatenate([x[0] for x in parts])
        normal = np.concatenate([x[1] for x in parts])
        t1 = np.concatenate([x[2] for x in parts])
        t2 = np.concatenate([x[3] for x in parts])
        d = -np.tile(r, len(c.obstacles))[:, None] * normal
    jac_pos, jac_c = contact_point_jacobians(kin.R, kin.J, idx, d, model.grid.section_of_point)
    return ContactQuery(gap, normal, t1, t2, jac_pos, jac_c)


@numba.njit(cache=True)
def contact_generalized_force_and_slip(jac_c, force, basis_t, v):
    """Σ_j J_c,jᵀ F_j and the tangential slip velocities [t1 t2]ᵀ J_c,j v (same as the einsums of the
    reference `_contact_reference`)."""
    n_cand, _, n_dof = jac_c.shape
    gen = np.zeros(n_dof)
    slip = np.zeros((n_cand, 2))
    for a in range(n_cand):
        vel0 = 0.0
        vel1 = 0.0
        vel2 = 0.0
        for n in range(n_dof):
            j0, j1, j2 = jac_c[a, 0, n], jac_c[a, 1, n], jac_c[a, 2, n]
            gen[n] += j0 * force[a, 0] + j1 * force[a, 1] + j2 * force[a, 2]
            vel0 += j0 * v[n]
            vel1 += j1 * v[n]
            vel2 += j2 * v[n]
        for b in range(2):
            slip[a, b] = basis_t[a, b, 0] * vel0 + basis_t[a, b, 1] * vel1 + basis_t[a, b, 2] * vel2
    return gen, slip


@numba.njit(cache=True)
def fill_contact_blocks(
    jac, free, jc, jp, normal, basis_t, df_dun, df_dut, row_scale, h, gap_m, slip_m_s, dgap_map, dslip_dun, dslip_du
):
    """Write the contact rows and columns of the Newton matrix (the plain-numpy reference is
    `StepProblem._jacobian_reference`)."""
    nf = free.shape[0]
    n_cand = jc.shape[0]
    for a in range(n_cand):
        c = nf + 3 * a
        for col in range(nf):
            n = free[col]
            j0, j1, j2 = jc[a, 0, n], jc[a, 1, n], jc[a, 2, n]
            # dynamic rows: −h s ∂(J_cᵀF)/∂u
            g = -h * row_scale[col]
            jac[col, c] = g * (j0 * df_dun[a, 0] + j1 * df_dun[a, 1] + j2 * df_dun[a, 2])
            jac[col, c + 1] = g * (j0 * df_dut[a, 0, 0] + j1 * df_dut[a, 1, 0] + j2 * df_dut[a, 2, 0])
            jac[col, c + 2] = g * (j0 * df_dut[a, 0, 1] + j1 * df_dut[a, 1, 1] + j2 * df_dut[a, 2, 1])
            # gap row: h nᵀ J_p / σ_δ; slip rows: [t1 t2]ᵀ J_c / σ_v
            jac[c, col] = (
                h * (normal[a, 0] * jp[a, 0, n] + normal[a, 1] * jp[a, 1, n] + normal[a, 2] * jp[a, 2, n]) / gap_m
            )
            for b in range(2):
                jac[c + 1 + b, col] = (basis_t[a, b, 0] * j0 + basis_t[a, b, 1] * j1 + basis_t[a, b, 2] * j2) / slip_m_s
        jac[c, c] = -dgap_map[a]
        for b in range(2):
            jac[c + 1 + b, c] = -dslip_dun[a, b]
            jac[c + 1 + b, c + 1] = -dslip_du[a, b, 0]
            jac[c + 1 + b, c + 2] = -dslip_du[a, b, 1]


@dataclass(frozen=True)
class ContactScales:
    force_n: float
    gap_m: float
    slip_m_s: float


def slack_scales(model: RodModel, settings, dt_s: float) -> ContactScales:
    """Scale factors σ_λ, σ_δ, σ_v of the contact nodes of `model` under `settings` (a `ContactSettings` or a
    pair contact: anything with m_sections and the three optional scales). Defaults are inertial: one node's
    weight, and the gap and slip that force produces on one node in one step (σ_λh²/m, σ_λh/m), so one slack
    unit moves every row comparably."""
    node_mass = model.rod.mass_kg() / settings.m_sections
    g_ref = max(float(np.linalg.norm(model.gravity_m_s2)), 1.0)
    force = settings.force_scale_n if settings.force_scale_n is not None else node_mass * g_ref
    gap = settings.gap_scale_m if settings.gap_scale_m is not None else force * dt_s**2 / node_mass
    slip = settings.slip_scale_m_s if settings.slip_scale_m_s is not None else force * dt_s / node_mass
    return ContactScales(force, gap, slip)


def contact_scales(model: RodModel, dt_s: float) -> ContactScales:
    return slack_scales(model, model.contact, dt_s)
