"""The whole implicit-Euler step of one rod, compiled (numba): residual, Newton matrix, solve and the Newton loop with
no Python per iteration. `sim.cosserat.compiled_step` packs a model for it; `sim.cosserat.step_problem.StepProblem`
with `newton.solve` is the readable reference it is tested against (tests/sim/cosserat/test_compiled_step.py).

Same equations, unknowns and row scales as `StepProblem` (see its module docstring): x = [q̇ on the free dofs;
slacks (K,3)], r = [S·r_dyn; gap rows; slip rows] with S the row scale 1/(diag(M + hD + h²K)·v_ref), and the step is
accepted when `StepProblem.error_norm` ≤ the tolerance. What differs is how the root is found:

* **The residual in O(n)** (`_rod_recursion`): poses and twists by a forward sweep, Σ Jᵀ F by a backward sweep of
  body wrenches, instead of J at every point.
* **The Newton matrix by blocks.** With A = M + hD + h²K on the free dofs (symmetric positive definite), E = J_cᵀ
  (the contact points' world Jacobians, nf × 3K), C the gap and slip rows (3K × nf), and per contact node the 3 × 3
  blocks Φ = −h ∂F/∂u and D = ∂(gap, slip rows)/∂u of the contact laws, the Newton system is

      S A Δv + S E Φ Δu = −r₁,     C Δv + D Δu = −r₂,

  solved by the Schur complement on the slacks: (D − W Φ) Δu = −r₂ + C A⁻¹ (r₁/S), Δv = −A⁻¹(r₁/S) − G Φ Δu with
  G = A⁻¹E and W = C G. A, G, W and C depend on the configuration only (the *geometry*, O(N³)); Φ and D carry the
  active set (stick, slide, separation) and are cheap (3K × 3K).
* **Reused factorisations.** The geometry (Cholesky factor of A, G, W, C, diag A) is kept across iterations and
  steps and rebuilt only when the iteration contracts poorly (‖r‖ falls by less than `refresh_ratio` in an accepted
  step), when a line search fails, or when the step length changes; Φ and D are exact at every iterate. It is the
  quasi-Newton matrix of `StepProblem.jacobian` (which already drops the configuration dependence of M and of the
  contact geometry), frozen in those terms for a few iterations: a chord method in the smooth part, Newton in the
  nonsmooth one. The row scale S is fixed per step from diag A of the geometry at hand.

Plain loops throughout (no BLAS): the result does not depend on the OpenBLAS kernel.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from sim.cosserat._mass import composite_mass_matrix
from sim.cosserat._obstacle_kernels import obstacle_query
from sim.cosserat._rod_recursion import N_GEOMETRY, generalized_force, twist_sweep
from sim.cosserat._slack_kernels import contact_laws_kernel, trigonometric_slack_from_regular
from sim.cosserat.contact import contact_point_jacobians
from sim.cosserat.forces import COMPLEX_STEP
from sim.cosserat.kinematics import forward_sweep_with_rates

# stats[0]: why the kernel returned
CONVERGED = 0
NOT_CONVERGED = 1  # max_iterations reached
STALLED = 2  # no descent along a fresh Newton direction
NOT_FINITE = 3
SINGULAR = 4  # A not positive definite, or the Schur complement singular, at a fresh geometry
MAPPED_RESIDUAL = 5  # a regular-coordinate solution whose trigonometric residual misses the tolerance
# geo_state[0]: 1 when chol, gmat, wmat, cmat, diag_a hold a geometry; geo_state[1]: the step length h it was built for


# --- dense linear algebra (plain loops: deterministic across BLAS kernels) -------------------------------------------
# Written so the inner loops run along contiguous rows (axpy form, which LLVM vectorises), not as dot products (a
# reduction it may not reorder without fast-math).
_PANEL = 4  # pivot rows (columns) per pass of the Cholesky (LU) factorisation
# The two factorisations each write their fused four-row update inline: moved into a shared helper (even inlined) it
# cost them 25–200 % (measured), as the panel then arrives as an argument that LLVM cannot prove distinct from `a`.
WEAK_COUPLING = 1e-6  # a node's W Φ_a against its D_a below which the step takes Φ_a as 0 (`newton_direction`)


@numba.njit(cache=True)
def cholesky_in_place(a):
    """A = UᵀU for the symmetric positive definite a, in place: U in the upper triangle, Uᵀ mirrored into the lower
    one (each triangular solve then runs along rows). False if a pivot is not positive.

    Right-looking, four pivot rows at a time: the trailing rows take the four rank-1 updates in one pass (each
    element updated in the same order, k ascending, so the factor is bitwise the one-row-at-a-time factor), which
    reads and writes the trailing matrix a quarter as often: ~2× faster on n = 84–132."""
    n = a.shape[0]
    panel = np.empty((_PANEL, n))  # the panel's finished rows of U, copied: no aliasing with the rows they update
    k0 = 0
    while k0 < n:
        kb = min(_PANEL, n - k0)
        for t in range(kb):  # finish the panel's rows: each takes the updates of the panel rows before it
            k = k0 + t
            for s in range(t):
                f = panel[s, k]
                if f != 0.0:
                    for j in range(k, n):
                        a[k, j] -= f * panel[s, j]
            d = a[k, k]
            if not d > 0.0:
                return False
            d = math.sqrt(d)
            inv = 1.0 / d
            a[k, k] = d
            panel[t, k] = d
            for j in range(k + 1, n):
                a[k, j] *= inv
                panel[t, j] = a[k, j]
        for i in range(k0 + kb, n):  # the trailing rows
            if kb == _PANEL and panel[0, i] != 0.0 and panel[1, i] != 0.0 and panel[2, i] != 0.0 and panel[3, i] != 0.0:
                f0, f1, f2, f3 = panel[0, i], panel[1, i], panel[2, i], panel[3, i]
                for j in range(i, n):
                    a[i, j] = (((a[i, j] - f0 * panel[0, j]) - f1 * panel[1, j]) - f2 * panel[2, j]) - f3 * panel[3, j]
            else:  # a zero multiplier skips its update, as one row at a time does
                for t in range(kb):
                    f = panel[t, i]
                    if f != 0.0:
                        for j in range(i, n):
                            a[i, j] -= f * panel[t, j]
        k0 += kb
    for i in range(n):
        for k in range(i):
            a[i, k] = a[k, i]
    return True


@numba.njit(cache=True)
def cholesky_solve(chol, b, out):
    """out = A⁻¹ b from `cholesky_in_place`'s factor (b is not changed)."""
    n = chol.shape[0]
    for i in range(n):
        out[i] = b[i]
    for k in range(n):  # Uᵀ y = b, along the rows of U
        yk = out[k] / chol[k, k]
        out[k] = yk
        row = chol[k]
        for i in range(k + 1, n):
            out[i] -= row[i] * yk
    for k in range(n - 1, -1, -1):  # U x = y, along the rows of Uᵀ
        xk = out[k] / chol[k, k]
        out[k] = xk
        row = chol[k]
        for i in range(k):
            out[i] -= row[i] * xk


@numba.njit(cache=True)
def cholesky_solve_rows(chol, m):
    """m ← A⁻¹ m for a matrix of right-hand sides m (n × r), row by row (r-long axpy updates from a copy of the
    finished row: with no aliasing between the rows LLVM vectorises the update, ~2× the speed of row views)."""
    n = chol.shape[0]
    r = m.shape[1]
    row_k = np.empty(r)
    for k in range(n):
        inv = 1.0 / chol[k, k]
        for c in range(r):
            m[k, c] *= inv
            row_k[c] = m[k, c]
        for i in range(k + 1, n):
            f = chol[k, i]
            if f != 0.0:
                for c in range(r):
                    m[i, c] -= f * row_k[c]
    for k in range(n - 1, -1, -1):
        inv = 1.0 / chol[k, k]
        for c in range(r):
            m[k, c] *= inv
            row_k[c] = m[k, c]
        for i in range(k):
            f = chol[k, i]
            if f != 0.0:
                for c in range(r):
                    m[i, c] -= f * row_k[c]


@numba.njit(cache=True)
def lu_in_place(a, piv):
    """LU factorisation with partial pivoting, in place (Doolittle, row pivots in piv). False if singular.

    Four pivot columns a pass, as `cholesky_in_place`: the panel's columns are eliminated (pivot search, full row
    swaps, multipliers) with the updates confined to the panel, then the pivot rows' trailing parts are finished in
    step order and the rows below take the four deferred updates in one sweep. Every element gets the same updates in
    the same order as one column at a time (the multipliers travel with their rows through the swaps), so the
    factors are bitwise those of the unblocked elimination; ~1.5× faster on the contact blocks (39–63)."""
    n = a.shape[0]
    row_k = np.empty(n)
    pivot_rows = np.empty((_PANEL, n))  # the panel's finished pivot rows (trailing part), copied: no aliasing
    k0 = 0
    while k0 < n:
        kb = min(_PANEL, n - k0)
        k_end = k0 + kb
        for t in range(kb):  # eliminate the panel's columns, updating the panel only
            k = k0 + t
            p = k
            big = abs(a[k, k])
            for i in range(k + 1, n):
                v = abs(a[i, k])
                if v > big:
                    big = v
                    p = i
            piv[k] = p
            if not big > 0.0:
                return False
            if p != k:
                for j in range(n):
                    a[k, j], a[p, j] = a[p, j], a[k, j]
            inv = 1.0 / a[k, k]
            for j in range(k + 1, k_end):
                row_k[j] = a[k, j]
            for i in range(k + 1, n):
                f = a[i, k] * inv
                a[i, k] = f
                if f != 0.0:
                    for j in range(k + 1, k_end):
                        a[i, j] -= f * row_k[j]
        if k_end == n:
            break
        for t in range(kb):  # the pivot rows' trailing parts: the earlier panel steps' updates, in order
            k = k0 + t
            for s in range(t):
                f = a[k, k0 + s]
                if f != 0.0:
                    for j in range(k_end, n):
                        a[k, j] -= f * pivot_rows[s, j]
            for j in range(k_end, n):
                pivot_rows[t, j] = a[k, j]
        for i in range(k_end, n):  # the rows below: the panel's updates of their trailing part
            f0 = a[i, k0]
            if kb == _PANEL and f0 != 0.0 and a[i, k0 + 1] != 0.0 and a[i, k0 + 2] != 0.0 and a[i, k0 + 3] != 0.0:
                f1, f2, f3 = a[i, k0 + 1], a[i, k0 + 2], a[i, k0 + 3]
                for j in range(k_end, n):
                    a[i, j] = (
                        ((a[i, j] - f0 * pivot_rows[0, j]) - f1 * pivot_rows[1, j]) - f2 * pivot_rows[2, j]
                    ) - f3 * pivot_rows[3, j]
            else:  # a zero multiplier skips its update, as one column at a time does
                for s in range(kb):
                    f = a[i, k0 + s]
                    if f != 0.0:
                        for j in range(k_end, n):
                            a[i, j] -= f * pivot_rows[s, j]
        k0 = k_end
    return True


@numba.njit(cache=True)
def lu_solve(lu, piv, b):
    """Solve with `lu_in_place`'s factors, b overwritten by the solution."""
    n = lu.shape[0]
    for k in range(n):
        p = piv[k]
        if p != k:
            b[k], b[p] = b[p], b[k]
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= lu[i, k] * b[k]
        b[i] = s
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, n):
            s -= lu[i, k] * b[k]
        b[i] = s / lu[i, i]


# --- the residual ----------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def contact_geometry(model, p_points, gap, normal, t1, t2):
    """Gap and frame of every contact candidate (obstacle o, node j: a = o·(m+1) + j) at the sweep's points."""
    contact_index, contact_radius, obstacle_kinds, obstacle_params = model[9], model[10], model[11], model[12]
    k1 = contact_index.shape[0]
    for a in range(gap.shape[0]):
        o = a // k1
        j = a % k1
        gap[a] = obstacle_query(
            obstacle_kinds[o],
            obstacle_params[o],
            p_points[contact_index[j]],
            contact_radius[j],
            normal[a],
            t1[a],
            t2[a],
        )


@numba.njit(cache=True)
def evaluate(model, law, h, q_prev, v_prev, n_fixed, v_base, row_scale, x, predict_from, ws, r):
    """The scaled residual r at x (and, in ws, everything the Newton solve and the step's report need).

    predict_from: slacks (K,3) of the last step to warm-start from (separated nodes get u_n = −gap/σ_δ at this x's
    configuration: `step_problem.predicted_slack`), written into x; or an empty array."""
    (xi_ref, x_nodes, x_points, section_of_point, _, quad_index, _, quad_weight, quad_inertia, contact_index,
     contact_radius, _, _, k_diag, k_off, d_diag, d_off, gravity, tip_index, tip_force, tip_moment) = model  # fmt: skip
    kind, sharpness, eps, mu, force_scale, gap_scale, slip_scale = law
    (v, q, dv, R, p, eta, eta_dot, zeta, geometry, nodes, wrench, r_dyn, gap, normal, t1, t2, slip, force, df_dun,
     df_dut, dgap_map, dslip_dun, dslip_du) = ws  # fmt: skip
    n_dof = v.shape[0]
    nf = n_dof - n_fixed
    n_cand = gap.shape[0]
    for j in range(n_fixed):
        v[j] = v_base[j]
    for j in range(nf):
        v[n_fixed + j] = x[j]
    for j in range(n_dof):
        q[j] = q_prev[j] + h * v[j]
        dv[j] = v[j] - v_prev[j]
    twist_sweep(q, v, dv, xi_ref, x_nodes, x_points, section_of_point, COMPLEX_STEP, R, p, eta, eta_dot, zeta,
                geometry, nodes)  # fmt: skip
    slack = x[nf : nf + 3 * n_cand].reshape((n_cand, 3))
    if n_cand:
        contact_geometry(model, p, gap, normal, t1, t2)
        if predict_from.shape[0]:
            for a in range(n_cand):
                for c in range(3):
                    slack[a, c] = predict_from[a, c]
                if predict_from[a, 0] < 0.0:
                    slack[a, 0] = -gap[a] / gap_scale
    for i in range(wrench.shape[0]):
        for c in range(6):
            wrench[i, c] = 0.0
    # inertia and gravity at the quadrature points: w ℳ(J Δq̇ + h J̇q̇) − h w ad_ηᵀℳη − h w ρA (0, Rᵀg)
    for a in range(quad_index.shape[0]):
        i = quad_index[a]
        m = quad_inertia[a]
        w0, w1, w2 = eta[i, 0], eta[i, 1], eta[i, 2]
        l0, l1, l2 = eta[i, 3], eta[i, 4], eta[i, 5]
        m0, m1, m2 = m[0] * w0, m[1] * w1, m[2] * w2
        n0, n1, n2 = m[3] * l0, m[4] * l1, m[5] * l2
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
        wa = quad_weight[a]
        wrench[i, 0] += wa * (m[0] * (zeta[i, 0] + h * eta_dot[i, 0]) - h * adt0)
        wrench[i, 1] += wa * (m[1] * (zeta[i, 1] + h * eta_dot[i, 1]) - h * adt1)
        wrench[i, 2] += wa * (m[2] * (zeta[i, 2] + h * eta_dot[i, 2]) - h * adt2)
        wrench[i, 3] += wa * (m[3] * (zeta[i, 3] + h * eta_dot[i, 3]) - h * (adt3 + m[3] * gb0))
        wrench[i, 4] += wa * (m[4] * (zeta[i, 4] + h * eta_dot[i, 4]) - h * (adt4 + m[3] * gb1))
        wrench[i, 5] += wa * (m[5] * (zeta[i, 5] + h * eta_dot[i, 5]) - h * (adt5 + m[3] * gb2))
    if tip_index >= 0:  # the dead tip force and moment (world): −h [Rᵀ M; Rᵀ F]
        Ri = R[tip_index]
        for c in range(3):
            wrench[tip_index, c] -= h * (Ri[0, c] * tip_moment[0] + Ri[1, c] * tip_moment[1] + Ri[2, c] * tip_moment[2])
            wrench[tip_index, 3 + c] -= h * (
                Ri[0, c] * tip_force[0] + Ri[1, c] * tip_force[1] + Ri[2, c] * tip_force[2]
            )
    if n_cand:
        laws = contact_laws_kernel(kind, sharpness, eps, mu, force_scale, slack, normal, t1, t2)
        gap_map, dgap, slip_map, dslip_da, dbound = laws[2], laws[3], laws[7], laws[8], laws[4]
        k1 = contact_index.shape[0]
        for a in range(n_cand):
            i = contact_index[a % k1]
            rad = contact_radius[a % k1]
            Ri = R[i]
            f0, f1, f2 = laws[11][a, 0], laws[11][a, 1], laws[11][a, 2]
            d0, d1, d2 = -rad * normal[a, 0], -rad * normal[a, 1], -rad * normal[a, 2]
            # the contact point's velocity R η_v + (R η_ω) × d and its slip along t1, t2
            wv0 = Ri[0, 0] * eta[i, 0] + Ri[0, 1] * eta[i, 1] + Ri[0, 2] * eta[i, 2]
            wv1 = Ri[1, 0] * eta[i, 0] + Ri[1, 1] * eta[i, 1] + Ri[1, 2] * eta[i, 2]
            wv2 = Ri[2, 0] * eta[i, 0] + Ri[2, 1] * eta[i, 1] + Ri[2, 2] * eta[i, 2]
            vc0 = Ri[0, 0] * eta[i, 3] + Ri[0, 1] * eta[i, 4] + Ri[0, 2] * eta[i, 5] + wv1 * d2 - wv2 * d1
            vc1 = Ri[1, 0] * eta[i, 3] + Ri[1, 1] * eta[i, 4] + Ri[1, 2] * eta[i, 5] + wv2 * d0 - wv0 * d2
            vc2 = Ri[2, 0] * eta[i, 3] + Ri[2, 1] * eta[i, 4] + Ri[2, 2] * eta[i, 5] + wv0 * d1 - wv1 * d0
            slip[a, 0] = t1[a, 0] * vc0 + t1[a, 1] * vc1 + t1[a, 2] * vc2
            slip[a, 1] = t2[a, 0] * vc0 + t2[a, 1] * vc1 + t2[a, 2] * vc2
            # the force at p + d as a body wrench at the sweep point: −h [(Rᵀd) × (Rᵀf); Rᵀf]
            fb0 = Ri[0, 0] * f0 + Ri[1, 0] * f1 + Ri[2, 0] * f2
            fb1 = Ri[0, 1] * f0 + Ri[1, 1] * f1 + Ri[2, 1] * f2
            fb2 = Ri[0, 2] * f0 + Ri[1, 2] * f1 + Ri[2, 2] * f2
            db0 = Ri[0, 0] * d0 + Ri[1, 0] * d1 + Ri[2, 0] * d2
            db1 = Ri[0, 1] * d0 + Ri[1, 1] * d1 + Ri[2, 1] * d2
            db2 = Ri[0, 2] * d0 + Ri[1, 2] * d1 + Ri[2, 2] * d2
            wrench[i, 0] -= h * (db1 * fb2 - db2 * fb1)
            wrench[i, 1] -= h * (db2 * fb0 - db0 * fb2)
            wrench[i, 2] -= h * (db0 * fb1 - db1 * fb0)
            wrench[i, 3] -= h * fb0
            wrench[i, 4] -= h * fb1
            wrench[i, 5] -= h * fb2
            for c in range(3):
                force[a, c] = laws[11][a, c]
                df_dun[a, c] = laws[12][a, c]
                df_dut[a, c, 0] = laws[13][a, c, 0]
                df_dut[a, c, 1] = laws[13][a, c, 1]
            dgap_map[a] = dgap[a]
            for b in range(2):
                dslip_dun[a, b] = dslip_da[a, b] * dbound[a]
                dslip_du[a, b, 0] = laws[10][a, b, 0]
                dslip_du[a, b, 1] = laws[10][a, b, 1]
            r[nf + 3 * a] = gap[a] / gap_scale - gap_map[a]
            r[nf + 3 * a + 1] = slip[a, 0] / slip_scale - slip_map[a, 0]
            r[nf + 3 * a + 2] = slip[a, 1] / slip_scale - slip_map[a, 1]
    generalized_force(q, wrench, section_of_point, geometry, nodes, r_dyn)
    # h (K θ + D θ̇): K and D are block tridiagonal with diagonal blocks (`model.build_model`)
    n_nodes = k_diag.shape[0]
    for node in range(n_nodes):
        for c in range(6):
            g = 6 + 6 * node + c
            acc = k_diag[node, c] * q[g] + d_diag[node, c] * v[g]
            if node + 1 < n_nodes:
                acc += k_off[node, c] * q[g + 6] + d_off[node, c] * v[g + 6]
            if node > 0:
                acc += k_off[node - 1, c] * q[g - 6] + d_off[node - 1, c] * v[g - 6]
            r_dyn[g] += h * acc
    for j in range(nf):
        r[j] = r_dyn[n_fixed + j] * row_scale[j]


@numba.njit(cache=True)
def error_norm(x, r, nf, v_ref):
    """`StepProblem.error_norm`: ‖r‖∞, the dynamic rows relative to the larger of v_ref and the iterate's speed."""
    speed = 0.0
    for j in range(nf):
        speed = max(speed, abs(x[j]))
    ratio = max(1.0, speed / v_ref) if nf else 1.0
    dynamic = 0.0
    for j in range(nf):
        dynamic = max(dynamic, abs(r[j]))
    others = 0.0
    for j in range(nf, r.shape[0]):
        others = max(others, abs(r[j]))
    return max(dynamic / ratio, others)


@numba.njit(cache=True)
def merit(r):
    s = 0.0
    for j in range(r.shape[0]):
        s += r[j] * r[j]
    return 0.5 * s


@numba.njit(cache=True)
def all_finite(r):
    for j in range(r.shape[0]):
        if not math.isfinite(r[j]):
            return False
    return True


# --- the Newton matrix -----------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def refresh_geometry(model, law, h, q_prev, n_fixed, x, v, chol, gmat, wmat, cmat, diag_a, geo_state):
    """The configuration-dependent blocks of the Newton matrix at x (see the module docstring). False if A is not
    positive definite."""
    (xi_ref, x_nodes, x_points, section_of_point, node_index, quad_index, quad_section, quad_weight, quad_inertia,
     contact_index, contact_radius, _, _, k_diag, k_off, d_diag, d_off, _, _, _, _) = model  # fmt: skip
    gap_scale, slip_scale = law[5], law[6]
    n_dof = v.shape[0]
    nf = n_dof - n_fixed
    q = np.empty(n_dof)
    for j in range(n_dof):
        q[j] = q_prev[j] + h * v[j]
    R, p, J, _, _ = forward_sweep_with_rates(q, v, xi_ref, x_nodes, x_points, section_of_point, COMPLEX_STEP)
    M = composite_mass_matrix(R, p, J, node_index, quad_index, quad_section, quad_weight, quad_inertia)
    for i in range(nf):
        for j in range(nf):
            chol[i, j] = M[n_fixed + i, n_fixed + j]
    n_nodes = k_diag.shape[0]
    for node in range(n_nodes):
        for c in range(6):
            g = 6 + 6 * node + c - n_fixed
            chol[g, g] += h * d_diag[node, c] + h * h * k_diag[node, c]
            if node + 1 < n_nodes:
                off = h * d_off[node, c] + h * h * k_off[node, c]
                chol[g, g + 6] += off
                chol[g + 6, g] += off
    for j in range(nf):
        diag_a[j] = chol[j, j]
    geo_state[0] = 0.0
    if not cholesky_in_place(chol):
        return False
    n_cand = cmat.shape[0] // 3
    if n_cand:
        gap = np.empty(n_cand)
        normal = np.empty((n_cand, 3))
        t1 = np.empty((n_cand, 3))
        t2 = np.empty((n_cand, 3))
        contact_geometry(model, p, gap, normal, t1, t2)
        k1 = contact_index.shape[0]
        offset = np.empty((n_cand, 3))
        for a in range(n_cand):
            for c in range(3):
                offset[a, c] = -contact_radius[a % k1] * normal[a, c]
        jac_pos, jac_c = contact_point_jacobians(R, J, contact_index, offset, section_of_point)
        for a in range(n_cand):
            for j in range(nf):
                n = n_fixed + j
                jp0, jp1, jp2 = jac_pos[a, 0, n], jac_pos[a, 1, n], jac_pos[a, 2, n]
                jc0, jc1, jc2 = jac_c[a, 0, n], jac_c[a, 1, n], jac_c[a, 2, n]
                cmat[3 * a, j] = h * (normal[a, 0] * jp0 + normal[a, 1] * jp1 + normal[a, 2] * jp2) / gap_scale
                cmat[3 * a + 1, j] = (t1[a, 0] * jc0 + t1[a, 1] * jc1 + t1[a, 2] * jc2) / slip_scale
                cmat[3 * a + 2, j] = (t2[a, 0] * jc0 + t2[a, 1] * jc1 + t2[a, 2] * jc2) / slip_scale
                # E: the contact point's world Jacobian rows as columns, J_c,eᵀ
                gmat[j, 3 * a] = jc0
                gmat[j, 3 * a + 1] = jc1
                gmat[j, 3 * a + 2] = jc2
        cholesky_solve_rows(chol, gmat)  # G = A⁻¹E
        nz = 3 * n_cand
        w_row = np.empty(nz)
        for i in range(nz):  # W = C G, along G's rows (accumulated in a separate row: no aliasing, vectorised)
            for c in range(nz):
                w_row[c] = 0.0
            for j in range(nf):
                f = cmat[i, j]
                if f != 0.0:
                    for c in range(nz):
                        w_row[c] += f * gmat[j, c]
            for c in range(nz):
                wmat[i, c] = w_row[c]
    geo_state[0] = 1.0
    geo_state[1] = h
    return True


@numba.njit(cache=True)
def _solve_node_block(d, rhs, out):
    """out = D_a⁻¹ rhs for one node's slack block D_a = [[d00, 0, 0], [d10, d11, d12], [d20, d21, d22]] (the gap row
    depends on u_n only). False if singular."""
    if d[0, 0] == 0.0:
        return False
    x0 = rhs[0] / d[0, 0]
    b1 = rhs[1] - d[1, 0] * x0
    b2 = rhs[2] - d[2, 0] * x0
    det = d[1, 1] * d[2, 2] - d[1, 2] * d[2, 1]
    if det == 0.0:
        return False
    out[0] = x0
    out[1] = (b1 * d[2, 2] - d[1, 2] * b2) / det
    out[2] = (d[1, 1] * b2 - d[2, 1] * b1) / det
    return True


@numba.njit(cache=True)
def newton_direction(h, nf, r, row_scale, chol, gmat, wmat, cmat, ws, dx, weak_coupling):
    """dx solving the Newton system at the iterate whose residual is r (ws holds its contact-law derivatives).
    False if the Schur complement is singular.

    Nodes whose force does not move with their slacks (Φ_a = 0 to rounding: separated, or Heaviside-stuck) have Z's
    column block D_a alone, so Z is block triangular: the other ("active") nodes' block is solved first, then each
    of these nodes by its own 3×3 block. Only the active block is factorised (a few nodes on the bench's table).
    A node whose W Φ_a is below `weak_coupling` of its own D_a is taken as Φ_a = 0 (the step passes
    `WEAK_COUPLING`; 0 gives the exact direction). On the bench a separated node in the smooth law's tail has
    Φ_a ~ 1e-13 and W Φ_a ~ 1e-8 of D_a: dropping it changes Z far less than the chord iteration's frozen geometry
    already does, so the iterations are the same and the solution the same to the tolerance (the residual decides
    convergence, not the matrix), and the factorised block is the nodes really on the table (13 → 1 there)."""
    df_dun, df_dut, dgap_map, dslip_dun, dslip_du = ws[18], ws[19], ws[20], ws[21], ws[22]
    n_cand = dgap_map.shape[0]
    nz = 3 * n_cand
    g = np.empty(nf)
    y = np.empty(nf)
    for j in range(nf):
        g[j] = r[j] / row_scale[j]
    cholesky_solve(chol, g, y)
    if nz == 0:
        for j in range(nf):
            dx[j] = -y[j]
        return True
    phi = np.empty((n_cand, 3, 3))  # Φ_a = −h ∂F_a/∂u_a: world force component × (u_n, u_t1, u_t2)
    d_blocks = np.zeros((n_cand, 3, 3))  # D_a
    phi_max = 0.0
    for a in range(n_cand):
        for e in range(3):
            phi[a, e, 0] = -h * df_dun[a, e]
            phi[a, e, 1] = -h * df_dut[a, e, 0]
            phi[a, e, 2] = -h * df_dut[a, e, 1]
            for c in range(3):
                phi_max = max(phi_max, abs(phi[a, e, c]))
        d_blocks[a, 0, 0] = -dgap_map[a]
        for b in range(2):
            d_blocks[a, 1 + b, 0] = -dslip_dun[a, b]
            d_blocks[a, 1 + b, 1] = -dslip_du[a, b, 0]
            d_blocks[a, 1 + b, 2] = -dslip_du[a, b, 1]
    active = np.empty(n_cand, dtype=np.int64)
    n_active = 0
    for a in range(n_cand):
        big = 0.0
        d_big = 0.0
        for e in range(3):
            for c in range(3):
                big = max(big, abs(phi[a, e, c]))
                d_big = max(d_big, abs(d_blocks[a, e, c]))
        if not big > 1e-14 * phi_max:
            continue
        coupling = 0.0  # the largest entry of W's column block a: coupling · big bounds what Φ_a adds to Z
        for i in range(nz):
            for e in range(3):
                coupling = max(coupling, abs(wmat[i, 3 * a + e]))
        if coupling * big > weak_coupling * d_big:
            active[n_active] = a
            n_active += 1
    rhs = np.empty(nz)  # −r₂ + C A⁻¹(r₁/S)
    for i in range(nz):
        s = -r[nf + i]
        c_row = cmat[i]
        for j in range(nf):
            s += c_row[j] * y[j]
        rhs[i] = s
    dz = np.empty(nz)
    na = 3 * n_active
    za = np.empty((na, na))
    for ia in range(n_active):  # Z_AA = D_AA − W_AA Φ_A
        a = active[ia]
        for ib in range(n_active):
            b = active[ib]
            for ra in range(3):
                w_row = wmat[3 * a + ra]
                for c in range(3):
                    s = -(
                        w_row[3 * b] * phi[b, 0, c] + w_row[3 * b + 1] * phi[b, 1, c] + w_row[3 * b + 2] * phi[b, 2, c]
                    )
                    if a == b:
                        s += d_blocks[a, ra, c]
                    za[3 * ia + ra, 3 * ib + c] = s
    dza = np.empty(na)
    for ia in range(n_active):
        for ra in range(3):
            dza[3 * ia + ra] = rhs[3 * active[ia] + ra]
    if na:
        pa = np.empty(na, dtype=np.int64)
        if not lu_in_place(za, pa):
            return False
        lu_solve(za, pa, dza)
    for a in range(n_cand):
        for c in range(3):
            dz[3 * a + c] = 0.0
    for ia in range(n_active):
        for c in range(3):
            dz[3 * active[ia] + c] = dza[3 * ia + c]
    # the other nodes: D_a dz_a = rhs_a + W_aA Φ_A dz_A
    t = np.zeros(nz)  # Φ dz (active nodes only: the others' Φ is zero)
    for ia in range(n_active):
        b = active[ia]
        for e in range(3):
            t[3 * b + e] = phi[b, e, 0] * dz[3 * b] + phi[b, e, 1] * dz[3 * b + 1] + phi[b, e, 2] * dz[3 * b + 2]
    is_active = np.zeros(n_cand, dtype=np.bool_)
    for ia in range(n_active):
        is_active[active[ia]] = True
    node_rhs = np.empty(3)
    node_dz = np.empty(3)
    for a in range(n_cand):
        if is_active[a]:
            continue
        for ra in range(3):
            w_row = wmat[3 * a + ra]
            s = rhs[3 * a + ra]
            for ib in range(n_active):
                b = active[ib]
                s += w_row[3 * b] * t[3 * b] + w_row[3 * b + 1] * t[3 * b + 1] + w_row[3 * b + 2] * t[3 * b + 2]
            node_rhs[ra] = s
        if not _solve_node_block(d_blocks[a], node_rhs, node_dz):
            return False
        for c in range(3):
            dz[3 * a + c] = node_dz[c]
    for j in range(nf):  # Δv = −y − G Φ Δz
        s = -y[j]
        row = gmat[j]
        for c in range(nz):
            s -= row[c] * t[c]
        dx[j] = s
    for i in range(nz):
        dx[nf + i] = dz[i]
    return True


@numba.njit(cache=True)
def solve_step(
    model, law, check_law, h, q_prev, v_prev, n_fixed, v_base, start_slack, v_ref, settings,
    chol, gmat, wmat, cmat, diag_a, geo_state, ws, x, stats,
):  # fmt: skip
    """One implicit-Euler step from the warm start in x (velocities; its slacks come from start_slack, predicted).

    settings = (tolerance, max_iterations, nonmonotone_steps, line_search_steps, refresh_ratio). check_law: the law
    of the model's own (trigonometric) slacks when `law` is the Heaviside law of its regular coordinates (kind −1:
    none). On return x holds the solution (model slacks), ws the last evaluation, stats = [status, iterations,
    geometry refreshes, residual evaluations]; the return value is the error norm reached."""
    tolerance, max_iterations, nonmonotone_steps, line_search_steps, refresh_ratio = settings
    n_dof = q_prev.shape[0]
    nf = n_dof - n_fixed
    size = x.shape[0]
    nz = size - nf
    v = ws[0]
    row_scale = np.empty(nf)
    r = np.empty(size)
    r_try = np.empty(size)
    x_try = np.empty(size)
    dx = np.empty(size)
    empty = np.empty((0, 3))
    for c in range(4):
        stats[c] = 0
    if geo_state[0] == 0.0 or geo_state[1] != h:
        # the warm start's velocities (the slacks only enter Φ and D): v as `evaluate` sets it
        for j in range(n_fixed):
            v[j] = v_base[j]
        for j in range(nf):
            v[n_fixed + j] = x[j]
        stats[2] += 1
        if not refresh_geometry(model, law, h, q_prev, n_fixed, x, v, chol, gmat, wmat, cmat, diag_a, geo_state):
            stats[0] = SINGULAR
            return np.inf
        fresh = True
    else:
        fresh = False
    for j in range(nf):
        row_scale[j] = 1.0 / (diag_a[j] * v_ref)
    evaluate(model, law, h, q_prev, v_prev, n_fixed, v_base, row_scale, x, start_slack, ws, r)
    stats[3] += 1
    if not all_finite(r):
        stats[0] = NOT_FINITE
        return np.inf
    f = merit(r)
    best = f
    free_steps = nonmonotone_steps
    iterations = 0
    status = NOT_CONVERGED
    while True:
        if error_norm(x, r, nf, v_ref) <= tolerance:
            status = CONVERGED
            break
        if iterations >= max_iterations:
            break
        iterations += 1
        if not newton_direction(h, nf, r, row_scale, chol, gmat, wmat, cmat, ws, dx, WEAK_COUPLING):
            if fresh:
                status = SINGULAR
                break
            stats[2] += 1
            if not refresh_geometry(model, law, h, q_prev, n_fixed, x, v, chol, gmat, wmat, cmat, diag_a, geo_state):
                status = SINGULAR
                break
            fresh = True
            continue
        f0 = f
        accepted = False
        step = 1.0
        for attempt in range(line_search_steps + 1):
            for j in range(size):
                x_try[j] = x[j] + step * dx[j]
            evaluate(model, law, h, q_prev, v_prev, n_fixed, v_base, row_scale, x_try, empty, ws, r_try)
            stats[3] += 1
            finite = all_finite(r_try)
            f_try = merit(r_try) if finite else np.inf
            if finite and f_try < f0:
                accepted = True
            elif attempt == 0 and finite and free_steps > 0 and f_try < 1e4 * best:
                # a few non-monotone full steps, as `newton.solve`
                free_steps -= 1
                accepted = True
            if accepted:
                break
            step *= 0.5
        if not accepted:
            # ws holds a trial point's evaluation: evaluate x again (its laws are the next direction's)
            evaluate(model, law, h, q_prev, v_prev, n_fixed, v_base, row_scale, x, empty, ws, r)
            stats[3] += 1
            if fresh:
                status = STALLED
                break
            stats[2] += 1
            for j in range(n_fixed):
                v[j] = v_base[j]
            for j in range(nf):
                v[n_fixed + j] = x[j]
            if not refresh_geometry(model, law, h, q_prev, n_fixed, x, v, chol, gmat, wmat, cmat, diag_a, geo_state):
                status = SINGULAR
                break
            fresh = True
            continue
        for j in range(size):
            x[j] = x_try[j]
            r[j] = r_try[j]
        f = f_try
        best = min(best, f)
        fresh = False
        if f > refresh_ratio * refresh_ratio * f0 and error_norm(x, r, nf, v_ref) > tolerance:
            # poor contraction: the frozen geometry is too far from this iterate
            stats[2] += 1
            if not refresh_geometry(model, law, h, q_prev, n_fixed, x, v, chol, gmat, wmat, cmat, diag_a, geo_state):
                status = SINGULAR
                break
            fresh = True
    stats[1] = iterations
    norm = error_norm(x, r, nf, v_ref)
    if status == CONVERGED and check_law[0] >= 0:
        # a regular-coordinate (Heaviside) solution: map to the model's trigonometric slacks and accept it only if
        # the model's own residual there meets the tolerance (`dynamics._back_to_model_slacks`)
        n_cand = nz // 3
        regular = x[nf:].reshape((n_cand, 3)).copy()
        mapped = trigonometric_slack_from_regular(check_law[1], check_law[3], regular)
        for a in range(n_cand):
            for c in range(3):
                x[nf + 3 * a + c] = mapped[a, c]
        evaluate(model, check_law, h, q_prev, v_prev, n_fixed, v_base, row_scale, x, empty, ws, r)
        stats[3] += 1
        norm = error_norm(x, r, nf, v_ref)
        if not norm <= tolerance:
            status = MAPPED_RESIDUAL
    if status != CONVERGED:
        geo_state[0] = 0.0  # built at an iterate of a failed solve: not a matrix to start the next one from
    stats[0] = status
    return norm


def workspace(n_dof: int, n_points: int, n_cand: int) -> tuple:
    """The arrays `evaluate` writes (see its unpacking for their order)."""
    return (
        np.zeros(n_dof),  # v
        np.zeros(n_dof),  # q
        np.zeros(n_dof),  # dv
        np.zeros((n_points, 3, 3)),  # R
        np.zeros((n_points, 3)),  # p
        np.zeros((n_points, 6)),  # eta
        np.zeros((n_points, 6)),  # eta_dot
        np.zeros((n_points, 6)),  # zeta
        np.zeros((n_points, N_GEOMETRY)),  # geometry
        np.zeros((n_points, 2, 7)),  # nodes
        np.zeros((n_points, 6)),  # wrench
        np.zeros(n_dof),  # r_dyn
        np.zeros(n_cand),  # gap
        np.zeros((n_cand, 3)),  # normal
        np.zeros((n_cand, 3)),  # t1
        np.zeros((n_cand, 3)),  # t2
        np.zeros((n_cand, 2)),  # slip
        np.zeros((n_cand, 3)),  # force
        np.zeros((n_cand, 3)),  # df_dun
        np.zeros((n_cand, 3, 2)),  # df_dut
        np.zeros(n_cand),  # dgap_map
        np.zeros((n_cand, 2)),  # dslip_dun
        np.zeros((n_cand, 2, 2)),  # dslip_du
    )
