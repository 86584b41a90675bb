"""The rod's residual forces in O(n): a forward sweep of poses and twists and a backward sweep of wrenches (numba).

Why: the step's residual needs J only through products, η = J q̇, J̇q̇, J Δq̇ (forward) and Σ_a J_aᵀ F_a (the
generalized force of body wrenches F_a at the sweep points: inertia, gravity, contact, tip loads). Forming J at
every point, as `kinematics.forward_sweep_with_rates` does for the Newton matrix, costs O(P·N) per residual
(P points, N dofs); the recursions below cost O(P).

The sweep's Magnus step gives J_i = A_i J_{i−1} + A_i T_i D_i, with A_i = Ad_{exp(−Ω_i)}, T_i the tangent map of
the exponential at Ω_i and D_i = ∂Ω_i/∂q, non-zero on the two strain nodes of the interval's section only
(`kinematics.forward_sweep_with_rates` builds J from exactly these blocks). Hence

  forward:   y_i = A_i y_{i−1} + A_i T_i (D_i w)                      (y_i = J_i w for any w)
  backward:  W_i = F_i + A_{i+1}ᵀ W_{i+1},   Σ_i J_iᵀF_i = J_0ᵀ W_0 + Σ_{i≥1} D_iᵀ (A_i T_i)ᵀ W_i,

the second by induction on Σ_{j≥i} J_jᵀF_j = J_iᵀW_i + Σ_{j>i} D_jᵀ(A_jT_j)ᵀW_j. Aᵀ moves a wrench [m; f] from a
point to the one before it: [R_e m + p_e × (R_e f); R_e f]. J̇q̇ rides along as the imaginary part of the twist at
q + iεq̇, as in `forward_sweep_with_rates` (the same complex step, O(1) per point).

The results equal the J-based sums of `forces.inertia_minus_gravity` and `contact.contact_generalized_force_and_slip`
up to rounding (tests/sim/cosserat/test_compiled_step.py compares the whole residual with `StepProblem`'s).
"""

from __future__ import annotations

import numba
import numpy as np

from sim.cosserat._lie_extra import exp_coefficients, so3_exp, so3_left_jacobian
from sim.cosserat.kinematics import (
    _SQRT3,
    _cross,
    _gauss_parameters,
    _left_jacobian_apply,
    _mm3_into,
    _rotation_transpose_apply,
    _tangent_q_apply,
)

# per interval i (row i; row 0 unused): the blocks the two sweeps need
#   geometry[i, 0:9] R_e (row-major), [9:12] p_e, [12:21] A = R_eᵀJ_l, [21:30] B = R_eᵀQ + C J_l
#   nodes[i, node, 0] s, [1:4] α, [4:7] β of ∂Ω/∂θ_node = [[X, 0], [Y, X]], X = s I + α̃, Y = β̃
N_GEOMETRY = 30


@numba.njit(cache=True)
def twist_sweep(
    q,
    v,
    dv,
    xi_ref_nodes,
    x_nodes,
    x_points,
    section_of_point,
    epsilon,
    R_out,
    p_out,
    eta,
    eta_dot,
    zeta,
    geometry,
    nodes,
):
    """Poses R (P,3,3), p (P,3), twists η = J q̇ (P,6), J̇q̇ (P,6), ζ = J dv (P,6) at the sweep points, written into
    the given arrays, and each interval's blocks (`geometry`, `nodes`) for `generalized_force`."""
    n_points = x_points.shape[0]
    # base: J(0) = blkdiag(Rᵀ J_l(φ), Rᵀ); η_c(0) = J(q_c) q̇ with φ_c = φ + iε φ̇
    R = so3_exp(q[0:3].copy())
    p = np.empty(3)
    for r in range(3):
        p[r] = q[3 + r]
        for s in range(3):
            R_out[0, r, s] = R[r, s]
        p_out[0, r] = p[r]
    phi_c0 = q[0] + 1j * epsilon * v[0]
    phi_c1 = q[1] + 1j * epsilon * v[1]
    phi_c2 = q[2] + 1j * epsilon * v[2]
    a_c, b_c, c_c, _, _ = exp_coefficients(phi_c0 * phi_c0 + phi_c1 * phi_c1 + phi_c2 * phi_c2)
    f0, f1, f2 = _left_jacobian_apply(phi_c0, phi_c1, phi_c2, b_c, c_c, v[0] + 0j, v[1] + 0j, v[2] + 0j)
    e0, e1, e2 = _rotation_transpose_apply(phi_c0, phi_c1, phi_c2, a_c, b_c, f0, f1, f2)
    e3, e4, e5 = _rotation_transpose_apply(phi_c0, phi_c1, phi_c2, a_c, b_c, v[3] + 0j, v[4] + 0j, v[5] + 0j)
    et = np.array([e0, e1, e2, e3, e4, e5])
    for r in range(6):
        eta[0, r] = et[r].real
        eta_dot[0, r] = et[r].imag / epsilon
    # ζ(0) = J(0) dv: Rᵀ J_l(φ) dv_φ, Rᵀ dv_p (real)
    a_r, b_r, c_r = a_c.real, b_c.real, c_c.real
    g0, g1, g2 = _left_jacobian_apply(q[0], q[1], q[2], b_r, c_r, dv[0], dv[1], dv[2])
    z0, z1, z2 = _rotation_transpose_apply(q[0], q[1], q[2], a_r, b_r, g0, g1, g2)
    z3, z4, z5 = _rotation_transpose_apply(q[0], q[1], q[2], a_r, b_r, dv[3], dv[4], dv[5])
    zt = np.array([z0, z1, z2, z3, z4, z5])
    for r in range(6):
        zeta[0, r] = zt[r]

    x1 = np.empty(6)
    x2 = np.empty(6)
    d1 = np.empty(6)
    d2 = np.empty(6)
    g1v = np.empty(6)
    g2v = np.empty(6)
    om = np.empty(6)
    om_dot = np.empty(6)
    om_ddot = np.empty(6)
    om_dv = np.empty(6)
    Re = np.empty((3, 3))
    Ret = np.empty((3, 3))
    Jl = np.empty((3, 3))
    Q = np.empty((3, 3))
    C = np.empty((3, 3))
    A = np.empty((3, 3))
    B = np.empty((3, 3))
    X = np.empty((3, 3))
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
            wk = dv[6 + 6 * k + j]
            wk1 = dv[12 + 6 * k + j]
            g1v[j] = (1.0 - t1) * wk + t1 * wk1
            g2v[j] = (1.0 - t2) * wk + t2 * wk1
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
        # ∂Ω/∂q dv (the same bilinear form as Ω̇, along dv)
        gw1 = _cross(g1v[0], g1v[1], g1v[2], x2[0], x2[1], x2[2])
        gw2 = _cross(x1[0], x1[1], x1[2], g2v[0], g2v[1], g2v[2])
        gv1 = _cross(g1v[3], g1v[4], g1v[5], x2[0], x2[1], x2[2])
        gv2 = _cross(g1v[0], g1v[1], g1v[2], x2[3], x2[4], x2[5])
        gv3 = _cross(x1[3], x1[4], x1[5], g2v[0], g2v[1], g2v[2])
        gv4 = _cross(x1[0], x1[1], x1[2], g2v[3], g2v[4], g2v[5])
        for j in range(3):
            om[j] = 0.5 * h * (x1[j] + x2[j]) + c * aw[j]
            om[3 + j] = 0.5 * h * (x1[3 + j] + x2[3 + j]) + c * (av1[j] + av2[j])
            om_dot[j] = 0.5 * h * (d1[j] + d2[j]) + c * (bw1[j] + bw2[j])
            om_dot[3 + j] = 0.5 * h * (d1[3 + j] + d2[3 + j]) + c * (bv1[j] + bv2[j] + bv3[j] + bv4[j])
            om_ddot[j] = 2.0 * c * cw[j]
            om_ddot[3 + j] = 2.0 * c * (cv1[j] + cv2[j])
            om_dv[j] = 0.5 * h * (g1v[j] + g2v[j]) + c * (gw1[j] + gw2[j])
            om_dv[3 + j] = 0.5 * h * (g1v[3 + j] + g2v[3 + j]) + c * (gv1[j] + gv2[j] + gv3[j] + gv4[j])

        # complex geometry at Ω_c = Ω + iε Ω̇ (its real part is the real geometry): η_c₊ = Ad_{exp(−Ω_c)}(η_c + T y_c)
        w0 = om[0] + 1j * epsilon * om_dot[0]
        w1 = om[1] + 1j * epsilon * om_dot[1]
        w2 = om[2] + 1j * epsilon * om_dot[2]
        r0 = om[3] + 1j * epsilon * om_dot[3]
        r1 = om[4] + 1j * epsilon * om_dot[4]
        r2 = om[5] + 1j * epsilon * om_dot[5]
        a_c, b_c, c1_c, c2_c, c3_c = exp_coefficients(w0 * w0 + w1 * w1 + w2 * w2)
        pe_c = _left_jacobian_apply(w0, w1, w2, b_c, c1_c, r0, r1, r2)
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
        za0 = et[0] + jy[0]
        za1 = et[1] + jy[1]
        za2 = et[2] + jy[2]
        zb0 = et[3] + qy[0] + jyb[0]
        zb1 = et[4] + qy[1] + jyb[1]
        zb2 = et[5] + qy[2] + jyb[2]
        pz = _cross(pe_c[0], pe_c[1], pe_c[2], za0, za1, za2)
        na = _rotation_transpose_apply(w0, w1, w2, a_c, b_c, za0, za1, za2)
        nb = _rotation_transpose_apply(w0, w1, w2, a_c, b_c, zb0 - pz[0], zb1 - pz[1], zb2 - pz[2])
        et[0], et[1], et[2] = na
        et[3], et[4], et[5] = nb
        for r in range(6):
            eta[i, r] = et[r].real
            eta_dot[i, r] = et[r].imag / epsilon

        # real geometry: exp(w̃) = I + a W + b W², J_l = I + b W + c1 W², W² = w wᵀ − θ² I
        a = a_c.real
        b = b_c.real
        c1 = c1_c.real
        c2 = c2_c.real
        c3 = c3_c.real
        t2w = om[0] * om[0] + om[1] * om[1] + om[2] * om[2]
        for r in range(3):
            for s in range(3):
                ww = om[r] * om[s]
                Re[r, s] = b * ww
                Jl[r, s] = c1 * ww
            Re[r, r] += 1.0 - b * t2w
            Jl[r, r] += 1.0 - c1 * t2w
        Re[0, 1] -= a * om[2]
        Re[0, 2] += a * om[1]
        Re[1, 0] += a * om[2]
        Re[1, 2] -= a * om[0]
        Re[2, 0] -= a * om[1]
        Re[2, 1] += a * om[0]
        Jl[0, 1] -= b * om[2]
        Jl[0, 2] += b * om[1]
        Jl[1, 0] += b * om[2]
        Jl[1, 2] -= b * om[0]
        Jl[2, 0] -= b * om[1]
        Jl[2, 1] += b * om[0]
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
            e = _cross(pe0, pe1, pe2, 1.0 if s == 0 else 0.0, 1.0 if s == 1 else 0.0, 1.0 if s == 2 else 0.0)
            for r in range(3):
                C[r, s] = -(Ret[r, 0] * e[0] + Ret[r, 1] * e[1] + Ret[r, 2] * e[2])
        _mm3_into(A, Ret, Jl)
        _mm3_into(B, Ret, Q)
        _mm3_into(X, C, Jl)
        for r in range(3):
            for s in range(3):
                B[r, s] += X[r, s]
        g = geometry[i]
        for r in range(3):
            for s in range(3):
                g[3 * r + s] = Re[r, s]
                g[12 + 3 * r + s] = A[r, s]
                g[21 + 3 * r + s] = B[r, s]
        g[9], g[10], g[11] = pe0, pe1, pe2
        for node in range(2):
            if node == 0:
                s_node = 0.5 * h * ((1.0 - t1) + (1.0 - t2))
                beta1 = 1.0 - t2
                beta2 = 1.0 - t1
            else:
                s_node = 0.5 * h * (t1 + t2)
                beta1 = t2
                beta2 = t1
            nd = nodes[i, node]
            nd[0] = s_node
            for j in range(3):
                nd[1 + j] = c * (beta1 * x1[j] - beta2 * x2[j])
                nd[4 + j] = c * (beta1 * x1[3 + j] - beta2 * x2[3 + j])

        # ζ₊ = Ad_{exp(−Ω)} ζ + [[A, 0], [B, A]] ∂Ω/∂q dv (real)
        zw0 = Ret[0, 0] * zt[0] + Ret[0, 1] * zt[1] + Ret[0, 2] * zt[2]
        zw1 = Ret[1, 0] * zt[0] + Ret[1, 1] * zt[1] + Ret[1, 2] * zt[2]
        zw2 = Ret[2, 0] * zt[0] + Ret[2, 1] * zt[1] + Ret[2, 2] * zt[2]
        zv0 = (
            C[0, 0] * zt[0]
            + C[0, 1] * zt[1]
            + C[0, 2] * zt[2]
            + Ret[0, 0] * zt[3]
            + Ret[0, 1] * zt[4]
            + Ret[0, 2] * zt[5]
        )
        zv1 = (
            C[1, 0] * zt[0]
            + C[1, 1] * zt[1]
            + C[1, 2] * zt[2]
            + Ret[1, 0] * zt[3]
            + Ret[1, 1] * zt[4]
            + Ret[1, 2] * zt[5]
        )
        zv2 = (
            C[2, 0] * zt[0]
            + C[2, 1] * zt[1]
            + C[2, 2] * zt[2]
            + Ret[2, 0] * zt[3]
            + Ret[2, 1] * zt[4]
            + Ret[2, 2] * zt[5]
        )
        for r in range(3):
            aw_r = A[r, 0] * om_dv[0] + A[r, 1] * om_dv[1] + A[r, 2] * om_dv[2]
            bv_r = B[r, 0] * om_dv[0] + B[r, 1] * om_dv[1] + B[r, 2] * om_dv[2]
            av_r = A[r, 0] * om_dv[3] + A[r, 1] * om_dv[4] + A[r, 2] * om_dv[5]
            if r == 0:
                zw0 += aw_r
                zv0 += bv_r + av_r
            elif r == 1:
                zw1 += aw_r
                zv1 += bv_r + av_r
            else:
                zw2 += aw_r
                zv2 += bv_r + av_r
        zt[0], zt[1], zt[2], zt[3], zt[4], zt[5] = zw0, zw1, zw2, zv0, zv1, zv2
        for r in range(6):
            zeta[i, r] = zt[r]

        for r in range(3):
            p[r] += R[r, 0] * pe0 + R[r, 1] * pe1 + R[r, 2] * pe2
        _mm3_into(R_new, R, Re)
        for r in range(3):
            for s in range(3):
                R[r, s] = R_new[r, s]
                R_out[i, r, s] = R[r, s]
            p_out[i, r] = p[r]


@numba.njit(cache=True)
def generalized_force(q, wrench, section_of_point, geometry, nodes, out):
    """out = Σ_i J_iᵀ F_i for body wrenches F (P,6) [moment; force] at the sweep points (the backward sweep; see
    the module docstring). `geometry`, `nodes` are `twist_sweep`'s."""
    n_points = wrench.shape[0]
    for j in range(out.shape[0]):
        out[j] = 0.0
    m0 = m1 = m2 = f0 = f1 = f2 = 0.0
    for i in range(n_points - 1, 0, -1):
        m0 += wrench[i, 0]
        m1 += wrench[i, 1]
        m2 += wrench[i, 2]
        f0 += wrench[i, 3]
        f1 += wrench[i, 4]
        f2 += wrench[i, 5]
        g = geometry[i]
        # y = (A T)ᵀ W = [Aᵀ m + Bᵀ f; Aᵀ f]
        yw0 = g[12] * m0 + g[15] * m1 + g[18] * m2 + g[21] * f0 + g[24] * f1 + g[27] * f2
        yw1 = g[13] * m0 + g[16] * m1 + g[19] * m2 + g[22] * f0 + g[25] * f1 + g[28] * f2
        yw2 = g[14] * m0 + g[17] * m1 + g[20] * m2 + g[23] * f0 + g[26] * f1 + g[29] * f2
        yv0 = g[12] * f0 + g[15] * f1 + g[18] * f2
        yv1 = g[13] * f0 + g[16] * f1 + g[19] * f2
        yv2 = g[14] * f0 + g[17] * f1 + g[20] * f2
        k = section_of_point[i]
        for node in range(2):
            nd = nodes[i, node]
            s = nd[0]
            # [[X, 0], [Y, X]]ᵀ y = [Xᵀ y_w + Yᵀ y_v; Xᵀ y_v], Xᵀ y = s y − α × y, Yᵀ y = −β × y
            aw = _cross(nd[1], nd[2], nd[3], yw0, yw1, yw2)
            bv = _cross(nd[4], nd[5], nd[6], yv0, yv1, yv2)
            av = _cross(nd[1], nd[2], nd[3], yv0, yv1, yv2)
            col = 6 + 6 * (k + node)
            out[col + 0] += s * yw0 - aw[0] - bv[0]
            out[col + 1] += s * yw1 - aw[1] - bv[1]
            out[col + 2] += s * yw2 - aw[2] - bv[2]
            out[col + 3] += s * yv0 - av[0]
            out[col + 4] += s * yv1 - av[1]
            out[col + 5] += s * yv2 - av[2]
        # W ← A_iᵀ W = [R_e m + p_e × (R_e f); R_e f]
        rf0 = g[0] * f0 + g[1] * f1 + g[2] * f2
        rf1 = g[3] * f0 + g[4] * f1 + g[5] * f2
        rf2 = g[6] * f0 + g[7] * f1 + g[8] * f2
        pm = _cross(g[9], g[10], g[11], rf0, rf1, rf2)
        rm0 = g[0] * m0 + g[1] * m1 + g[2] * m2 + pm[0]
        rm1 = g[3] * m0 + g[4] * m1 + g[5] * m2 + pm[1]
        rm2 = g[6] * m0 + g[7] * m1 + g[8] * m2 + pm[2]
        m0, m1, m2, f0, f1, f2 = rm0, rm1, rm2, rf0, rf1, rf2
    m0 += wrench[0, 0]
    m1 += wrench[0, 1]
    m2 += wrench[0, 2]
    f0 += wrench[0, 3]
    f1 += wrench[0, 4]
    f2 += wrench[0, 5]
    # base: J_0ᵀ W = [J_l(φ)ᵀ R m; R f]
    R = so3_exp(q[0:3].copy())
    Jl = so3_left_jacobian(q[0:3].copy())
    rm = np.empty(3)
    for r in range(3):
        rm[r] = R[r, 0] * m0 + R[r, 1] * m1 + R[r, 2] * m2
        out[3 + r] = R[r, 0] * f0 + R[r, 1] * f1 + R[r, 2] * f2
    for r in range(3):
        out[r] = Jl[0, r] * rm[0] + Jl[1, r] * rm[1] + Jl[2, r] * rm[2]


@numba.njit(cache=True)
def pose_sweep(q, xi_ref_nodes, x_nodes, x_points, section_of_point, R_out, p_out, geometry, nodes):
    """`twist_sweep` without velocities: poses and each interval's blocks only (real arithmetic), for static
    residuals (the strain observer) and the logged centreline."""
    n_points = x_points.shape[0]
    R = so3_exp(q[0:3].copy())
    p = np.empty(3)
    for r in range(3):
        p[r] = q[3 + r]
        for s in range(3):
            R_out[0, r, s] = R[r, s]
        p_out[0, r] = p[r]
    x1 = np.empty(6)
    x2 = np.empty(6)
    om = np.empty(6)
    Re = np.empty((3, 3))
    Ret = np.empty((3, 3))
    Jl = np.empty((3, 3))
    Q = np.empty((3, 3))
    C = np.empty((3, 3))
    A = np.empty((3, 3))
    B = np.empty((3, 3))
    X = np.empty((3, 3))
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
        aw = _cross(x1[0], x1[1], x1[2], x2[0], x2[1], x2[2])
        av1 = _cross(x1[3], x1[4], x1[5], x2[0], x2[1], x2[2])
        av2 = _cross(x1[0], x1[1], x1[2], x2[3], x2[4], x2[5])
        for j in range(3):
            om[j] = 0.5 * h * (x1[j] + x2[j]) + c * aw[j]
            om[3 + j] = 0.5 * h * (x1[3 + j] + x2[3 + j]) + c * (av1[j] + av2[j])
        t2w = om[0] * om[0] + om[1] * om[1] + om[2] * om[2]
        a, b, c1, c2, c3 = exp_coefficients(t2w)
        pe0, pe1, pe2 = _left_jacobian_apply(om[0], om[1], om[2], b, c1, om[3], om[4], om[5])
        for r in range(3):
            for s in range(3):
                ww = om[r] * om[s]
                Re[r, s] = b * ww
                Jl[r, s] = c1 * ww
            Re[r, r] += 1.0 - b * t2w
            Jl[r, r] += 1.0 - c1 * t2w
        Re[0, 1] -= a * om[2]
        Re[0, 2] += a * om[1]
        Re[1, 0] += a * om[2]
        Re[1, 2] -= a * om[0]
        Re[2, 0] -= a * om[1]
        Re[2, 1] += a * om[0]
        Jl[0, 1] -= b * om[2]
        Jl[0, 2] += b * om[1]
        Jl[1, 0] += b * om[2]
        Jl[1, 2] -= b * om[0]
        Jl[2, 0] -= b * om[1]
        Jl[2, 1] += b * om[0]
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
            e = _cross(pe0, pe1, pe2, 1.0 if s == 0 else 0.0, 1.0 if s == 1 else 0.0, 1.0 if s == 2 else 0.0)
            for r in range(3):
                C[r, s] = -(Ret[r, 0] * e[0] + Ret[r, 1] * e[1] + Ret[r, 2] * e[2])
        _mm3_into(A, Ret, Jl)
        _mm3_into(B, Ret, Q)
        _mm3_into(X, C, Jl)
        for r in range(3):
            for s in range(3):
                B[r, s] += X[r, s]
        g = geometry[i]
        for r in range(3):
            for s in range(3):
                g[3 * r + s] = Re[r, s]
                g[12 + 3 * r + s] = A[r, s]
                g[21 + 3 * r + s] = B[r, s]
        g[9], g[10], g[11] = pe0, pe1, pe2
        for node in range(2):
            if node == 0:
                s_node = 0.5 * h * ((1.0 - t1) + (1.0 - t2))
                beta1 = 1.0 - t2
                beta2 = 1.0 - t1
            else:
                s_node = 0.5 * h * (t1 + t2)
                beta1 = t2
                beta2 = t1
            nd = nodes[i, node]
            nd[0] = s_node
            for j in range(3):
                nd[1 + j] = c * (beta1 * x1[j] - beta2 * x2[j])
                nd[4 + j] = c * (beta1 * x1[3 + j] - beta2 * x2[3 + j])
        for r in range(3):
            p[r] += R[r, 0] * pe0 + R[r, 1] * pe1 + R[r, 2] * pe2
        _mm3_into(R_new, R, Re)
        for r in range(3):
            for s in range(3):
                R[r, s] = R_new[r, s]
                R_out[i, r, s] = R[r, s]
            p_out[i, r] = p[r]


@numba.njit(cache=True)
def positions(q, xi_ref_nodes, x_nodes, x_points, section_of_point):
    """The centreline points p (P,3) of the sweep (no Jacobians: the logged centreline, the camera's markers)."""
    n_points = x_points.shape[0]
    R_out = np.empty((n_points, 3, 3))
    p_out = np.empty((n_points, 3))
    geometry = np.empty((n_points, N_GEOMETRY))
    nodes = np.empty((n_points, 2, 7))
    pose_sweep(q, xi_ref_nodes, x_nodes, x_points, section_of_point, R_out, p_out, geometry, nodes)
    return R_out, p_out
