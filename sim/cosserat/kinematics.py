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

from sim.cosserat._lie_extra import (
    ad,
    ad_inverse_pose,
    exp_coefficients,
    mm,
    mv,
    se3_exp,
    se3_tangent,
    so3_exp,
    so3_left_jacobian,
)

_SQRT3 = np.sqrt(3.0)


@numba.njit(cache=True)
def _gauss_parameters(x_points, x_nodes, k, i):
    """Sub-step i of the sweep (from point i − 1 to i, inside section k): its length h and the two
    Gauss–Legendre points as fractions t of the section, where the linear strain is sampled (Magnus, 4th order)."""
    xa = x_points[i - 1]
    xb = x_points[i]
    h = xb - xa
    length = x_nodes[k + 1] - x_nodes[k]
    mid = 0.5 * (xa + xb)
    half = 0.5 * h / _SQRT3
    return h, (mid - half - x_nodes[k]) / length, (mid + half - x_nodes[k]) / length


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
        h, t1, t2 = _gauss_parameters(x_points, x_nodes, k, i)
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


# ---------------------------------------------------------------------------------------------------------
# Fast path of the dynamics: real J plus the twists η = J q̇ and J̇ q̇ in one allocation-free sweep.
#
# The step's residual needs J at every output point but J̇ only through the vector J̇ q̇. `forward_sweep` on
# complex q gives both, at the price of propagating the whole complex J (4× the real work) and ~60 small
# temporary arrays per point. Here J is propagated in real arithmetic, and only the 6-vector η_c = J(q_c) q̇
# at q_c = q + iε q̇ rides along in complex arithmetic (J̇ q̇ = Im η_c / ε, the same complex step):
#   η_c₊ = Ad_{exp(−Ω_c)} (η_c + T_{Ω_c} ∂Ω/∂q(q_c) q̇).
# Products with the small SE(3) matrices are written as cross products (w̃ x = w × x), which need no
# temporaries. `forward_sweep` on complex q stays the readable reference (tests compare the two).
# ---------------------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@numba.njit(cache=True)
def _left_jacobian_apply(w0, w1, w2, b, c, x0, x1, x2):
    """J_l(w) x = x + b w × x + c w × (w × x)."""
    y0, y1, y2 = _cross(w0, w1, w2, x0, x1, x2)
    z0, z1, z2 = _cross(w0, w1, w2, y0, y1, y2)
    return x0 + b * y0 + c * z0, x1 + b * y1 + c * z1, x2 + b * y2 + c * z2


@numba.njit(cache=True)
def _rotation_transpose_apply(w0, w1, w2, a, b, x0, x1, x2):
    """exp(w̃)ᵀ x = x − a w × x + b w × (w × x)."""
    y0, y1, y2 = _cross(w0, w1, w2, x0, x1, x2)
    z0, z1, z2 = _cross(w0, w1, w2, y0, y1, y2)
    return x0 - a * y0 + b * z0, x1 - a * y1 + b * z1, x2 - a * y2 + b * z2


@numba.njit(cache=True)
def _tangent_q_apply(w0, w1, w2, r0, r1, r2, c1, c2, c3, x0, x1, x2):
    """Q x, the lower-left block of T_Ω (`se3_tangent`), as nested cross products (W = w̃, P = ρ̃):
    Q = ½P + c1(WP + PW + WPW) + c2(WWP + PWW − 3WPW) + c3(WPWW + WWPW)."""
    px = _cross(r0, r1, r2, x0, x1, x2)  # P x
    wx = _cross(w0, w1, w2, x0, x1, x2)  # W x
    wpx = _cross(w0, w1, w2, px[0], px[1], px[2])  # W P x
    pwx = _cross(r0, r1, r2, wx[0], wx[1], wx[2])  # P W x
    wpwx = _cross(w0, w1, w2, pwx[0], pwx[1], pwx[2])  # W P W x
    wwpx = _cross(w0, w1, w2, wpx[0], wpx[1], wpx[2])  # W W P x
    wwx = _cross(w0, w1, w2, wx[0], wx[1], wx[2])  # W W x
    pwwx = _cross(r0, r1, r2, wwx[0], wwx[1], wwx[2])  # P W W x
    wpwwx = _cross(w0, w1, w2, pwwx[0], pwwx[1], pwwx[2])  # W P W W x
    wwpwx = _cross(w0, w1, w2, wpwx[0], wpwx[1], wpwx[2])  # W W P W x
    out0 = (
        0.5 * px[0]
        + c1 * (wpx[0] + pwx[0] + wpwx[0])
        + c2 * (wwpx[0] + pwwx[0] - 3.0 * wpwx[0])
        + c3 * (wpwwx[0] + wwpwx[0])
    )
    out1 = (
        0.5 * px[1]
        + c1 * (wpx[1] + pwx[1] + wpwx[1])
        + c2 * (wwpx[1] + pwwx[1] - 3.0 * wpwx[1])
        + c3 * (wpwwx[1] + wwpwx[1])
    )
    out2 = (
        0.5 * px[2]
        + c1 * (wpx[2] + pwx[2] + wpwx[2])
        + c2 * (wwpx[2] + pwwx[2] - 3.0 * wpwx[2])
        + c3 * (wpwwx[2] + wwpwx[2])
    )
    return out0, out1, out2


@numba.njit(cache=True)
def _mm3_into(out, a, b):
    for i in range(3):
        for j in range(3):
            out[i, j] = a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j]


@numba.njit(cache=True)
def forward_sweep_with_rates(q, v, xi_ref_nodes, x_nodes, x_points, section_of_point, epsilon):
    """Real poses R (P,3,3), p (P,3), Jacobians J (P,6,N) and the twists η = J q̇ and J̇ q̇ (P,6) at the
    output points; the same Magnus steps as `forward_sweep`. epsilon is the complex step of J̇ q̇."""
    n_dof = q.shape[0]
    n_points = x_points.shape[0]
    R_out = np.zeros((n_points, 3, 3))
    p_out = np.zeros((n_points, 3))
    J_out = np.zeros((n_points, 6, n_dof))
    eta_out = np.zeros((n_points, 6))
    eta_dot_out = np.zeros((n_points, 6))

    # base: J(0) = blkdiag(Rᵀ J_l(φ), Rᵀ); η_c(0) = J(q_c) q̇ with φ_c = φ + iε φ̇
    phi = q[0:3].copy()
    R = so3_exp(phi)
    p = q[3:6].copy()
    Rt = R.T.copy()
    J_out[0, 0:3, 0:3] = mm(Rt, so3_left_jacobian(phi))
    J_out[0, 3:6, 3:6] = Rt
    R_out[0] = R
    p_out[0] = p
    phi_c = q[0:3] + 1j * epsilon * v[0:3]
    a_c, b_c, c_c, _, _ = exp_coefficients(phi_c[0] * phi_c[0] + phi_c[1] * phi_c[1] + phi_c[2] * phi_c[2])
    f0, f1, f2 = _left_jacobian_apply(phi_c[0], phi_c[1], phi_c[2], b_c, c_c, v[0] + 0j, v[1] + 0j, v[2] + 0j)
    e0, e1, e2 = _rotation_transpose_apply(phi_c[0], phi_c[1], phi_c[2], a_c, b_c, f0, f1, f2)
    e3, e4, e5 = _rotation_transpose_apply(phi_c[0], phi_c[1], phi_c[2], a_c, b_c, v[3] + 0j, v[4] + 0j, v[5] + 0j)
    eta = np.array([e0, e1, e2, e3, e4, e5])
    for r in range(6):
        eta_out[0, r] = eta[r].real
        eta_dot_out[0, r] = eta[r].imag / epsilon

    x1 = np.empty(6)
    x2 = np.empty(6)
    d1 = np.empty(6)
    d2 = np.empty(6)
    om = np.empty(6)
    om_dot = np.empty(6)
    om_ddot = np.empty(6)
    Re = np.empty((3, 3))
    Ret = np.empty((3, 3))
    Jl = np.empty((3, 3))
    Q = np.empty((3, 3))
    C = np.empty((3, 3))  # −Reᵀ p̃e: lower-left block of Ad_{exp(−Ω)}
    A = np.empty((3, 3))  # Reᵀ J_l: diagonal blocks of Ad_{exp(−Ω)} T_Ω
    B = np.empty((3, 3))  # Reᵀ Q + C J_l: its lower-left block
    X = np.empty((3, 3))
    Y = np.empty((3, 3))
    AX = np.empty((3, 3))
    BX = np.empty((3, 3))
    AY = np.empty((3, 3))
    R_new = np.empty((3, 3))
    for i in range(1, n_points):
        k = section_of_point[i]
        h, t1, t2 = _gauss_parameters(x_points, x_nodes, k, i)
        c = _SQRT3 * h * h / 12.0
        for j in range(6):
            sk = xi_ref_nodes[k, j] + q[6 + 6 * k + j]
            sk1 = xi_ref_nodes[k + 1, j] + q[12 + 6 * k + j]
            x1[j] = (1.0 - t1) * sk + t1 * sk1
            x2[j] = (1.0 - t2) * sk + t2 * sk1
            vk = v[6 + 6 * k + j]
            vk1 = v[12 + 6 * k + j]
            d1[j] = (1.0 - t1) * vk + t1 * vk1
            d2[j] = (1.0 - t2) * vk + t2 * vk1
        # Ω = h/2 (ξ1 + ξ2) + c ad_ξ1 ξ2, with ad_a b = [a_w × b_w; a_v × b_w + a_w × b_v]; its rate along q̇
        # Ω̇ = h/2 (ξ̇1 + ξ̇2) + c (ad_ξ̇1 ξ2 + ad_ξ1 ξ̇2) and Ω̈ = 2c ad_ξ̇1 ξ̇2 (Ω is bilinear in the strains)
        aw = _cross(x1[0], x1[1], x1[2], x2[0], x2[1], x2[2])
        av1 = _cross(x1[3], x1[4], x1[5], x2[0], x2[1], x2[2])
        av2 = _cross(x1[0], x1[1], x1[2], x2[3], x2[4], x2[5])
        bw1 = _cross(d1[0], d1[1], d1[2], x2[0], x2[1], x2[2])
        bw2 = _cross(x1[0], x1[1], x1[2], d2[0], d2[1], d2[2])
        bv1 = _cross(d1[3], d1[4], d1[5], x2[0], x2[1], x2[2])
        bv2 = _cross(d1[0], d1[1], d1[2], x2[3], x2[4], x2[5])
        bv3 = _cross(x1[3], x1[4], x1[5], d2[0], d2[1], d2[2])
        bv4 = _cross(x1[0], x1[1], x1[2], d2[3], d2[4], d2[5])
        cw = _cross(d1[0], d1[1], d1[2], d2[0], d2[1], d2[2])
        cv1 = _cross(d1[3], d1[4], d1[5], d2[0], d2[1], d2[2])
        cv2 = _cross(d1[0], d1[1], d1[2], d2[3], d2[4], d2[5])
        for j in range(3):
            om[j] = 0.5 * h * (x1[j] + x2[j]) + c * aw[j]
            om[3 + j] = 0.5 * h * (x1[3 + j] + x2[3 + j]) + c * (av1[j] + av2[j])
            om_dot[j] = 0.5 * h * (d1[j] + d2[j]) + c * (bw1[j] + bw2[j])
            om_dot[3 + j] = 0.5 * h * (d1[3 + j] + d2[3 + j]) + c * (bv1[j] + bv2[j] + bv3[j] + bv4[j])
            om_ddot[j] = 2.0 * c * cw[j]
            om_ddot[3 + j] = 2.0 * c * (cv1[j] + cv2[j])

        # complex geometry at Ω_c = Ω + iε Ω̇ (its real part is the real geometry)
        w0 = om[0] + 1j * epsilon * om_dot[0]
        w1 = om[1] + 1j * epsilon * om_dot[1]
        w2 = om[2] + 1j * epsilon * om_dot[2]
        r0 = om[3] + 1j * epsilon * om_dot[3]
        r1 = om[4] + 1j * epsilon * om_dot[4]
        r2 = om[5] + 1j * epsilon * om_dot[5]
        a_c, b_c, c1_c, c2_c, c3_c = exp_coefficients(w0 * w0 + w1 * w1 + w2 * w2)
        pe_c = _left_jacobian_apply(w0, w1, w2, b_c, c1_c, r0, r1, r2)
        # η_c₊ = Ad_{exp(−Ω_c)}(η_c + T_{Ω_c} y_c), y_c = Ω̇ + iε Ω̈
        ya0 = om_dot[0] + 1j * epsilon * om_ddot[0]
        ya1 = om_dot[1] + 1j * epsilon * om_ddot[1]
        ya2 = om_dot[2] + 1j * epsilon * om_ddot[2]
        jy = _left_jacobian_apply(w0, w1, w2, b_c, c1_c, ya0, ya1, ya2)
        qy = _tangent_q_apply(w0, w1, w2, r0, r1, r2, c1_c, c2_c, c3_c, ya0, ya1, ya2)
        jyb = _left_jacobian_apply(
            w0,
            w1,
            w2,
            b_c,
            c1_c,
            om_dot[3] + 1j * epsilon * om_ddot[3],
            om_dot[4] + 1j * epsilon * om_ddot[4],
            om_dot[5] + 1j * epsilon * om_ddot[5],
        )
        za0 = eta[0] + jy[0]
        za1 = eta[1] + jy[1]
        za2 = eta[2] + jy[2]
        zb0 = eta[3] + qy[0] + jyb[0]
        zb1 = eta[4] + qy[1] + jyb[1]
        zb2 = eta[5] + qy[2] + jyb[2]
        pz = _cross(pe_c[0], pe_c[1], pe_c[2], za0, za1, za2)
        na = _rotation_transpose_apply(w0, w1, w2, a_c, b_c, za0, za1, za2)
        nb = _rotation_transpose_apply(w0, w1, w2, a_c, b_c, zb0 - pz[0], zb1 - pz[1], zb2 - pz[2])
        eta[0], eta[1], eta[2] = na
        eta[3], eta[4], eta[5] = nb
        for r in range(6):
            eta_out[i, r] = eta[r].real
            eta_dot_out[i, r] = eta[r].imag / epsilon

        # real geometry: exp(w̃) = I + a W + b W², J_l = I + b W + c1 W², W² = w wᵀ − θ² I
        a = a_c.real
        b = b_c.real
        c1 = c1_c.real
        c2 = c2_c.real
        c3 = c3_c.real
        wr = (om[0], om[1], om[2])
        t2w = wr[0] * wr[0] + wr[1] * wr[1] + wr[2] * wr[2]
        for r in range(3):
            for s in range(3):
                ww = wr[r] * wr[s]
                Re[r, s] = b * ww
                Jl[r, s] = c1 * ww
            Re[r, r] += 1.0 - b * t2w
            Jl[r, r] += 1.0 - c1 * t2w
        Re[0, 1] -= a * wr[2]
        Re[0, 2] += a * wr[1]
        Re[1, 0] += a * wr[2]
        Re[1, 2] -= a * wr[0]
        Re[2, 0] -= a * wr[1]
        Re[2, 1] += a * wr[0]
        Jl[0, 1] -= b * wr[2]
        Jl[0, 2] += b * wr[1]
        Jl[1, 0] += b * wr[2]
        Jl[1, 2] -= b * wr[0]
        Jl[2, 0] -= b * wr[1]
        Jl[2, 1] += b * wr[0]
        pe0 = pe_c[0].real
        pe1 = pe_c[1].real
        pe2 = pe_c[2].real
        for r in range(3):
            for s in range(3):
                Ret[r, s] = Re[s, r]
        for s in range(3):
            col = _tangent_q_apply(
                om[0],
                om[1],
                om[2],
                om[3],
                om[4],
                om[5],
                c1,
                c2,
                c3,
                1.0 if s == 0 else 0.0,
                1.0 if s == 1 else 0.0,
                1.0 if s == 2 else 0.0,
            )
            Q[0, s], Q[1, s], Q[2, s] = col
            # C = −Reᵀ p̃e: column s is −Reᵀ (pe × e_s)
            e = _cross(pe0, pe1, pe2, 1.0 if s == 0 else 0.0, 1.0 if s == 1 else 0.0, 1.0 if s == 2 else 0.0)
            for r in range(3):
                C[r, s] = -(Ret[r, 0] * e[0] + Ret[r, 1] * e[1] + Ret[r, 2] * e[2])
        _mm3_into(A, Ret, Jl)
        _mm3_into(B, Ret, Q)
        _mm3_into(X, C, Jl)  # X as scratch for C J_l
        for r in range(3):
            for s in range(3):
                B[r, s] += X[r, s]

        # J_i = Ad_{exp(−Ω)} J_{i−1} (rows 0–2: Reᵀ J_ω; rows 3–5: C J_ω + Reᵀ J_v), in place
        n_active = 18 + 6 * k
        J_prev = J_out[i - 1]
        J_cur = J_out[i]
        for r in range(3):
            g0, g1, g2 = Ret[r, 0], Ret[r, 1], Ret[r, 2]
            h0, h1, h2 = C[r, 0], C[r, 1], C[r, 2]
            for col in range(n_active):
                J_cur[r, col] = g0 * J_prev[0, col] + g1 * J_prev[1, col] + g2 * J_prev[2, col]
                J_cur[3 + r, col] = (
                    h0 * J_prev[0, col]
                    + h1 * J_prev[1, col]
                    + h2 * J_prev[2, col]
                    + g0 * J_prev[3, col]
                    + g1 * J_prev[4, col]
                    + g2 * J_prev[5, col]
                )
        # + Ad_{exp(−Ω)} T_Ω ∂Ω/∂θ_node: [[A, 0], [B, A]]·[[X, 0], [Y, X]] with ∂Ω/∂θ = s I + c(β1 ad_ξ1 − β2 ad_ξ2)
        for node in range(2):
            if node == 0:
                s_node = 0.5 * h * ((1.0 - t1) + (1.0 - t2))
                beta1 = 1.0 - t2
                beta2 = 1.0 - t1
            else:
                s_node = 0.5 * h * (t1 + t2)
                beta1 = t2
                beta2 = t1
            al0 = c * (beta1 * x1[0] - beta2 * x2[0])
            al1 = c * (beta1 * x1[1] - beta2 * x2[1])
            al2 = c * (beta1 * x1[2] - beta2 * x2[2])
            be0 = c * (beta1 * x1[3] - beta2 * x2[3])
            be1 = c * (beta1 * x1[4] - beta2 * x2[4])
            be2 = c * (beta1 * x1[5] - beta2 * x2[5])
            X[0, 0] = s_node
            X[0, 1] = -al2
            X[0, 2] = al1
            X[1, 0] = al2
            X[1, 1] = s_node
            X[1, 2] = -al0
            X[2, 0] = -al1
            X[2, 1] = al0
            X[2, 2] = s_node
            Y[0, 0] = 0.0
            Y[0, 1] = -be2
            Y[0, 2] = be1
            Y[1, 0] = be2
            Y[1, 1] = 0.0
            Y[1, 2] = -be0
            Y[2, 0] = -be1
            Y[2, 1] = be0
            Y[2, 2] = 0.0
            _mm3_into(AX, A, X)
            _mm3_into(BX, B, X)
            _mm3_into(AY, A, Y)
            base_col = 6 + 6 * (k + node)
            for r in range(3):
                for s in range(3):
                    J_cur[r, base_col + s] += AX[r, s]
                    J_cur[3 + r, base_col + 3 + s] += AX[r, s]
                    J_cur[3 + r, base_col + s] += BX[r, s] + AY[r, s]

        for r in range(3):
            p[r] += R[r, 0] * pe0 + R[r, 1] * pe1 + R[r, 2] * pe2
        _mm3_into(R_new, R, Re)
        R[:, :] = R_new
        R_out[i] = R
        p_out[i] = p
    return R_out, p_out, J_out, eta_out, eta_dot_out
