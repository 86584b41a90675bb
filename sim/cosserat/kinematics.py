"""PLS kinematics: the forward sweep for poses g(X), Jacobians J(X) (η = J q̇) along the rod.

The strain is piecewise linear in X (hat functions on n sections): ξ(X) = ξ_ref(X) + Φ(X) θ, with θ the
nodal deviations from the reference strain (ξ_ref = [0,0,0,1,0,0] for a straight unstretched rod).
q = [α; θ], α = [φ; p0] the base pose in exponential coordinates, so q has 6 + 6(n+1) entries.

Between consecutive output points the sweep takes one 4th-order Magnus step (two Gauss points of the
linear strain): g₊ = g·exp(Ω), J₊ = Ad_{exp(−Ω)}(J + T_Ω ∂Ω/∂q). For a constant strain this is the
exact arc; for the linear PLS strain its error is O(h⁵) per step. The same routine runs on complex q
(complex-step differentiation), which is how J̇ q̇ is obtained exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from sim.cosserat._lie_extra import ad, ad_inverse_pose, mm, mv, se3_exp, se3_tangent, so3_exp, so3_left_jacobian

_SQRT3 = np.sqrt(3.0)


@numba.njit(cache=True)
def forward_sweep(q, xi_ref_nodes, x_nodes, x_points, section_of_point):
    """Poses and Jacobians at the sorted output points x_points (x_points[0] must be 0).

    section_of_point[i] is the section holding the interval [x_points[i-1], x_points[i]].
    Returns R (P,3,3), p (P,3), J (P,6,N) in the dtype of q (float or complex).
    """
    n_dof = q.shape[0]
    n_points = x_points.shape[0]
    dt = q.dtype
    R_out = np.zeros((n_points, 3, 3), dtype=dt)
    p_out = np.zeros((n_points, 3), dtype=dt)
    J_out = np.zeros((n_points, 6, n_dof), dtype=dt)

    phi = q[0:3].copy()
    R = so3_exp(phi)
    p = q[3:6].copy()
    J = np.zeros((6, n_dof), dtype=dt)
    Rt = R.T.copy()
    J[0:3, 0:3] = mm(Rt, so3_left_jacobian(phi))
    J[3:6, 3:6] = Rt
    R_out[0] = R
    p_out[0] = p
    J_out[0] = J

    eye6 = np.eye(6)
    for i in range(1, n_points):
        k = section_of_point[i]
        xa = x_points[i - 1]
        xb = x_points[i]
        h = xb - xa
        length = x_nodes[k + 1] - x_nodes[k]
        mid = 0.5 * (xa + xb)
        half = 0.5 * h / _SQRT3
        t1 = (mid - half - x_nodes[k]) / length
        t2 = (mid + half - x_nodes[k]) / length
        strain_k = xi_ref_nodes[k] + q[6 + 6 * k : 12 + 6 * k]
        strain_k1 = xi_ref_nodes[k + 1] + q[12 + 6 * k : 18 + 6 * k]
        xi1 = (1.0 - t1) * strain_k + t1 * strain_k1
        xi2 = (1.0 - t2) * strain_k + t2 * strain_k1
        c = _SQRT3 * h * h / 12.0
        ad1 = ad(xi1)
        ad2 = ad(xi2)
        omega = 0.5 * h * (xi1 + xi2) + c * mv(ad1, xi2)
        b_k = (0.5 * h * ((1.0 - t1) + (1.0 - t2))) * eye6 + c * ((1.0 - t2) * ad1 - (1.0 - t1) * ad2)
        b_k1 = (0.5 * h * (t1 + t2)) * eye6 + c * (t2 * ad1 - t1 * ad2)

        Re, pe = se3_exp(omega)
        adinv = ad_inverse_pose(Re, pe)
        tangent = mm(adinv, se3_tangent(omega))
        n_active = 18 + 6 * k
        # J_i = Ad_{exp(−Ω)} J_{i−1} (+ the two strain-node blocks), written in place: no temporaries
        J_prev = J_out[i - 1]
        J_cur = J_out[i]
        for r in range(6):
            for col in range(n_active):
                acc = adinv[r, 0] * J_prev[0, col]
                for c6 in range(1, 6):
                    acc += adinv[r, c6] * J_prev[c6, col]
                J_cur[r, col] = acc
        J_cur[:, 6 + 6 * k : 12 + 6 * k] += mm(tangent, b_k)
        J_cur[:, 12 + 6 * k : 18 + 6 * k] += mm(tangent, b_k1)
        p = p + mv(R, pe)
        R = mm(R, Re)
        R_out[i] = R
        p_out[i] = p
    return R_out, p_out, J_out


@dataclass(frozen=True)
class SweepGrid:
    """Where the sweep reports poses: section nodes, quadrature points, contact nodes and extra points.

    Every interval between consecutive points lies inside one strain section, so each Magnus step sees
    one linear strain.
    """

    x_nodes: np.ndarray  # (n+1,) strain section nodes
    x_points: np.ndarray  # (P,) sorted output points, x_points[0] = 0
    section_of_point: np.ndarray  # (P,) int64
    node_index: np.ndarray  # (n+1,) index into x_points of each strain node
    quad_index: np.ndarray  # (n*nq,) index of each quadrature point
    quad_weight_m: np.ndarray  # (n*nq,) Gauss weight × section length
    contact_index: np.ndarray  # (m+1,) index of each contact node
    contact_weight_m: np.ndarray  # (m+1,) lumped length ∫Ψ_j dX of each contact node
    extra_index: np.ndarray  # index of each extra point (markers, probes)

    @staticmethod
    def build(
        length_m: float,
        n_sections: int,
        n_quadrature: int,
        m_contact_sections: int,
        extra_points_m: tuple[float, ...] = (),
    ) -> SweepGrid:
        x_nodes = np.linspace(0.0, length_m, n_sections + 1)
        gx, gw = np.polynomial.legendre.leggauss(n_quadrature)
        h = length_m / n_sections
        quad_x = np.concatenate([x_nodes[k] + 0.5 * h * (gx + 1.0) for k in range(n_sections)])
        quad_w = np.tile(0.5 * h * gw, n_sections)
        if m_contact_sections > 0:
            contact_x = np.linspace(0.0, length_m, m_contact_sections + 1)
            cw = np.full(m_contact_sections + 1, length_m / m_contact_sections)
            cw[[0, -1]] *= 0.5
        else:
            contact_x, cw = np.zeros(0), np.zeros(0)
        extra = np.asarray(extra_points_m, dtype=float)
        all_x = np.concatenate([x_nodes, quad_x, contact_x, extra])
        x_points = np.unique(np.round(all_x / length_m, 13) * length_m)
        x_points[0] = 0.0

        def index_of(values):
            idx = np.searchsorted(x_points, np.round(values / length_m, 13) * length_m)
            return np.clip(idx, 0, len(x_points) - 1).astype(np.int64)

        mids = 0.5 * (x_points[1:] + np.concatenate([[0.0], x_points[1:-1]]))
        sections = np.clip(np.searchsorted(x_nodes, mids, side="right") - 1, 0, n_sections - 1)
        section_of_point = np.concatenate([[0], sections]).astype(np.int64)
        return SweepGrid(
            x_nodes=x_nodes,
            x_points=x_points,
            section_of_point=section_of_point,
            node_index=index_of(x_nodes),
            quad_index=index_of(quad_x),
            quad_weight_m=quad_w,
            contact_index=index_of(contact_x),
            contact_weight_m=cw,
            extra_index=index_of(extra),
        )
