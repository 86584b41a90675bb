"""The rod's kinematic quantities and the forces on it: the sweep's poses, Jacobians and twists at a velocity
(`Kinematics`), the mass matrix, the inertial, gravity, elastic and dead-load generalized forces, the energy.

The inertial term of a step is ∫Jᵀ[ℳ(J Δq̇ + h J̇q̇) − h ad_ηᵀℳη] dX, where J̇q̇ comes exactly from one complex-step
sweep at q + iεq̇ (no C matrix is formed; `sim.cosserat.kinematics`). Each fast kernel has a plain reference
(`inertia_and_gravity`, `mass_matrix_reference`, `kinematics` on complex q) that tests/sim/cosserat/test_fast_paths.py
compares it with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from sim.cosserat._mass import composite_mass_matrix
from sim.cosserat._rod_recursion import positions
from sim.cosserat.kinematics import forward_sweep, forward_sweep_with_rates
from sim.cosserat.model import RodModel

COMPLEX_STEP = 1e-30  # ε of the complex step that gives J̇q̇ = Im J(q + iεq̇)q̇ / ε


@numba.njit(cache=True)
def inertia_and_gravity(J, Jdot, R, v, dv, h, mdiag, weights, index, gravity):
    """Σ_w Jᵀ[ℳ(J dv + h J̇ v) − h ad_ηᵀ ℳ η] and Σ_w J_vᵀ ρA Rᵀ g over the quadrature points."""
    n_dof = v.shape[0]
    q_inertia = np.zeros(n_dof)
    q_gravity = np.zeros(n_dof)
    for a in range(index.shape[0]):
        i = index[a]
        Ji = J[i]
        eta = Ji @ v
        acc = Jdot[i] @ v
        deta = Ji @ dv
        mom = mdiag[a] * eta
        w = eta[0:3]
        lin = eta[3:6]
        m1 = mom[0:3]
        m2 = mom[3:6]
        adt = np.empty(6)
        adt[0:3] = np.cross(m1, w) + np.cross(m2, lin)
        adt[3:6] = np.cross(m2, w)
        f = mdiag[a] * (deta + h * acc) - h * adt
        q_inertia += weights[a] * (Ji.T @ f)
        g_body = R[i].T @ gravity
        q_gravity += (weights[a] * mdiag[a, 3]) * (Ji[3:6].T @ g_body)
    return q_inertia, q_gravity


@numba.njit(cache=True)
def inertia_minus_gravity(J, eta, eta_dot, R, dv, h, mdiag, weights, index, gravity, section_of_point):
    """Σ_w Jᵀ[ℳ(J dv + h J̇q̇) − h ad_ηᵀℳη − h ρA (0, Rᵀg)] over the quadrature points, from the sweep's
    η = J q̇ and J̇ q̇ (allocation-free; `inertia_and_gravity` is the reference). J at a point of section s is
    zero beyond column 18 + 6s (later strain nodes), so the loops stop there (same sums: only zeros skipped)."""
    n_dof = dv.shape[0]
    out = np.zeros(n_dof)
    f = np.empty(6)
    for a in range(index.shape[0]):
        i = index[a]
        Ji = J[i]
        w0, w1, w2 = eta[i, 0], eta[i, 1], eta[i, 2]
        l0, l1, l2 = eta[i, 3], eta[i, 4], eta[i, 5]
        m = mdiag[a]
        m0, m1, m2 = m[0] * w0, m[1] * w1, m[2] * w2
        n0, n1, n2 = m[3] * l0, m[4] * l1, m[5] * l2
        # ad_ηᵀℳη = [m_ω × ω + m_v × v; m_v × ω]
        adt0 = m1 * w2 - m2 * w1 + n1 * l2 - n2 * l1
        adt1 = m2 * w0 - m0 * w2 + n2 * l0 - n0 * l2
        adt2 = m0 * w1 - m1 * w0 + n0 * l1 - n1 * l0
        adt3 = n1 * w2 - n2 * w1
        adt4 = n2 * w0 - n0 * w2
        adt5 = n0 * w1 - n1 * w0
        Ri = R[i]
        gb0 = Ri[0, 0] * gravity[0] + Ri[1, 0] * gravity[1] + Ri[2, 0] * gravity[2]
        gb1 = Ri[0, 1] * gravity[0] + Ri[1, 1] * gravity[1] + Ri[2, 1] * gravity[2]
        gb2 = Ri[0, 2] * gravity[0] + Ri[1, 2] * gravity[1] + Ri[2, 2] * gravity[2]
        n_active = min(18 + 6 * section_of_point[i], n_dof)
        for r in range(6):
            acc = 0.0
            for n in range(n_active):
                acc += Ji[r, n] * dv[n]
            f[r] = m[r] * (acc + h * eta_dot[i, r])
        f[0] -= h * adt0
        f[1] -= h * adt1
        f[2] -= h * adt2
        f[3] -= h * (adt3 + m[3] * gb0)
        f[4] -= h * (adt4 + m[3] * gb1)
        f[5] -= h * (adt5 + m[3] * gb2)
        wa = weights[a]
        f0, f1, f2, f3, f4, f5 = wa * f[0], wa * f[1], wa * f[2], wa * f[3], wa * f[4], wa * f[5]
        for n in range(n_active):
            out[n] += Ji[0, n] * f0 + Ji[1, n] * f1 + Ji[2, n] * f2 + Ji[3, n] * f3 + Ji[4, n] * f4 + Ji[5, n] * f5
    return out


@dataclass
class Kinematics:
    """Real poses and Jacobians at the sweep points and, when a velocity was given, J̇ (reference path) or
    the twists η = J q̇ and J̇ q̇ (fast path)."""

    R: np.ndarray
    p: np.ndarray
    J: np.ndarray
    Jdot: np.ndarray | None = None
    eta: np.ndarray | None = None
    eta_dot: np.ndarray | None = None


def kinematics(model: RodModel, q: np.ndarray, v: np.ndarray | None = None) -> Kinematics:
    """Reference kinematics: the real sweep, or with v the complex-step sweep of the full J̇."""
    g = model.grid
    if v is None:
        R, p, J = forward_sweep(q, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point)
        return Kinematics(R, p, J)
    qc = q + 1j * COMPLEX_STEP * v
    R, p, J = forward_sweep(qc, model.xi_ref_nodes.astype(complex), g.x_nodes, g.x_points, g.section_of_point)
    return Kinematics(R.real.copy(), p.real.copy(), J.real.copy(), J.imag / COMPLEX_STEP)


def kinematics_with_rates(model: RodModel, q: np.ndarray, v: np.ndarray) -> Kinematics:
    """Fast kinematics of the step: real J and the twists η = J v, J̇ v (no complex J)."""
    g = model.grid
    R, p, J, eta, eta_dot = forward_sweep_with_rates(
        q, v, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point, COMPLEX_STEP
    )
    return Kinematics(R, p, J, eta=eta, eta_dot=eta_dot)


def sweep_points(model: RodModel, q: np.ndarray) -> np.ndarray:
    """The centreline at every sweep point (P, 3), by a sweep of poses only (no Jacobians: what the logs and the
    camera need, O(n) instead of `kinematics`' O(n²))."""
    g = model.grid
    return positions(np.asarray(q, dtype=float), model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point)[1]


def centreline(model: RodModel, q: np.ndarray) -> np.ndarray:
    """The centreline at the strain nodes (n+1, 3) (`sweep_points`)."""
    return sweep_points(model, q)[model.grid.node_index]


def mass_matrix(model: RodModel, kin: Kinematics) -> np.ndarray:
    """M = ∫Jᵀ ℳ J dX by Gauss quadrature (symmetric positive definite for a free rod), assembled by composite
    inertias (`sim.cosserat._mass`; ≈ 4× faster than the plain product `mass_matrix_reference`)."""
    g = model.grid
    return composite_mass_matrix(
        kin.R,
        kin.p,
        kin.J,
        g.node_index,
        g.quad_index,
        g.section_of_point[g.quad_index],
        g.quad_weight_m,
        model.quad_inertia,
    )


def mass_matrix_reference(model: RodModel, kin: Kinematics) -> np.ndarray:
    """M = Bᵀ B with B = √(w ℳ) J stacked over the quadrature points: the reference of `mass_matrix`."""
    g = model.grid
    B = np.sqrt(g.quad_weight_m[:, None] * model.quad_inertia)[:, :, None] * kin.J[g.quad_index]
    B = B.reshape(-1, model.n_dof)
    return B.T @ B


def point_load_force(model: RodModel, kin: Kinematics) -> np.ndarray:
    """Generalized force of the dead tip force and moment (world frame)."""
    i = model.grid.node_index[-1]
    Rt = kin.R[i].T
    return kin.J[i, 3:6].T @ (Rt @ model.tip_force_n) + kin.J[i, 0:3].T @ (Rt @ model.tip_moment_n_m)


def gravity_force(model: RodModel, kin: Kinematics) -> np.ndarray:
    g = model.grid
    out = np.zeros(model.n_dof, dtype=kin.J.dtype)
    for a, i in enumerate(g.quad_index):
        out += g.quad_weight_m[a] * model.quad_inertia[a, 3] * (kin.J[i, 3:6].T @ (kin.R[i].T @ model.gravity_m_s2))
    return out


def elastic_force(model: RodModel, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(model.n_dof)
    out[6:] = model.stiffness @ q[6:] + model.damping @ v[6:]
    return out


def energy(model: RodModel, q: np.ndarray, v: np.ndarray) -> dict[str, float]:
    """Kinetic, elastic and gravitational energy (J) of the configuration."""
    kin = kinematics(model, q)
    g = model.grid
    kinetic = 0.5 * float(v @ mass_matrix(model, kin) @ v)
    elastic = 0.5 * float(q[6:] @ model.stiffness @ q[6:])
    heights = kin.p[g.quad_index] @ model.gravity_m_s2
    gravitational = -float(np.sum(g.quad_weight_m * model.quad_inertia[:, 3] * heights))
    return {
        "kinetic": kinetic,
        "elastic": elastic,
        "gravity": gravitational,
        "total": kinetic + elastic + gravitational,
    }
