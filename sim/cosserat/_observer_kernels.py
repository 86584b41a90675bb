"""The strain observer's Newton solve, compiled (numba): residual by the O(n) sweeps of `_rod_recursion`, Jacobian
by finite differences of it, LU and a backtracking line search, no Python per iteration.

Why: the readable observer (`observer.observe_strains` with `compiled=False`) forms its exact Jacobian by one
complex-step sweep of the full J per strain dof (~80 sweeps of O(P·N) per iterate, ~0.5 s a frame). The residual here
costs O(P), so the whole finite-difference Jacobian (one residual per unknown) costs less than one of those sweeps,
and its 1e-8 relative error only adds a 1e-8 contraction to Newton. Same equations, unknowns and scaling as the
reference (tests/sim/cosserat/test_observer.py compares the two).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from sim.cosserat._rod_recursion import generalized_force, pose_sweep
from sim.cosserat._step_kernels import lu_in_place, lu_solve


@numba.njit(cache=True)
def observer_residual(
    x, q, model, marker_index, target, compliance, scale_f, length, R, p, geometry, nodes, wrench, gen, out
):
    """r = [(Kθ − P_g − Σ J_pᵀλ)[θ rows] / scale_f; (p_i − y_i + c λ_i) / L] at x = [θ; λ L / scale_f]."""
    (xi_ref, x_nodes, x_points, section_of_point, quad_index, quad_weight, quad_inertia, k_diag, k_off, gravity) = model
    n_theta = q.shape[0] - 6
    k = marker_index.shape[0]
    for j in range(n_theta):
        q[6 + j] = x[j]
    pose_sweep(q, xi_ref, x_nodes, x_points, section_of_point, R, p, geometry, nodes)
    for i in range(wrench.shape[0]):
        for c in range(6):
            wrench[i, c] = 0.0
    for a in range(quad_index.shape[0]):  # gravity: [0; w ρA Rᵀg]
        i = quad_index[a]
        wm = quad_weight[a] * quad_inertia[a, 3]
        for c in range(3):
            wrench[i, 3 + c] += wm * (R[i, 0, c] * gravity[0] + R[i, 1, c] * gravity[1] + R[i, 2, c] * gravity[2])
    lam_unit = scale_f / length
    for m in range(k):  # the markers' forces λ (world): [0; Rᵀλ]
        i = marker_index[m]
        l0, l1, l2 = x[n_theta + 3 * m] * lam_unit, x[n_theta + 3 * m + 1] * lam_unit, x[n_theta + 3 * m + 2] * lam_unit
        for c in range(3):
            wrench[i, 3 + c] += R[i, 0, c] * l0 + R[i, 1, c] * l1 + R[i, 2, c] * l2
        for c in range(3):
            lam = x[n_theta + 3 * m + c] * lam_unit
            out[n_theta + 3 * m + c] = (p[i, c] - target[m, c] + compliance * lam) / length
    generalized_force(q, wrench, section_of_point, geometry, nodes, gen)
    n_nodes = k_diag.shape[0]
    for node in range(n_nodes):
        for c in range(6):
            j = 6 * node + c
            acc = k_diag[node, c] * x[j]
            if node + 1 < n_nodes:
                acc += k_off[node, c] * x[j + 6]
            if node > 0:
                acc += k_off[node - 1, c] * x[j - 6]
            out[j] = (acc - gen[6 + j]) / scale_f


@numba.njit(cache=True, nogil=True)
def observer_newton(x, q, model, marker_index, target, compliance, scale_f, length, tolerance, max_iterations, stats):
    """Newton on `observer_residual` from x (in place): finite-difference Jacobian (forward, step 1e-7·max(1, |x_j|)),
    LU, backtracking on ½‖r‖². Returns ‖r‖∞; stats = [converged, iterations]."""
    n_points = model[2].shape[0]
    size = x.shape[0]
    R = np.empty((n_points, 3, 3))
    p = np.empty((n_points, 3))
    geometry = np.empty((n_points, 30))
    nodes = np.empty((n_points, 2, 7))
    wrench = np.empty((n_points, 6))
    gen = np.empty(q.shape[0])
    r = np.empty(size)
    r_try = np.empty(size)
    x_try = np.empty(size)
    jac = np.empty((size, size))
    piv = np.empty(size, dtype=np.int64)
    dx = np.empty(size)
    args = (model, marker_index, target, compliance, scale_f, length, R, p, geometry, nodes, wrench, gen)
    observer_residual(x, q, *args, r)
    stats[0] = 0
    stats[1] = 0
    for iteration in range(max_iterations + 1):
        norm = 0.0
        for j in range(size):
            norm = max(norm, abs(r[j]))
        if norm <= tolerance:
            stats[0] = 1
            stats[1] = iteration
            observer_residual(x, q, *args, r)  # leaves q at x
            return norm
        if iteration == max_iterations or not math.isfinite(norm):
            break
        for j in range(size):
            x_try[j] = x[j]
        for j in range(size):
            step = 1e-7 * max(1.0, abs(x[j]))
            x_try[j] = x[j] + step
            observer_residual(x_try, q, *args, r_try)
            for i in range(size):
                jac[i, j] = (r_try[i] - r[i]) / step
            x_try[j] = x[j]
        for j in range(size):
            dx[j] = -r[j]
        if not lu_in_place(jac, piv):
            break
        lu_solve(jac, piv, dx)
        f0 = 0.0
        for j in range(size):
            f0 += r[j] * r[j]
        factor = 1.0
        accepted = False
        for _ in range(20):
            for j in range(size):
                x_try[j] = x[j] + factor * dx[j]
            observer_residual(x_try, q, *args, r_try)
            f = 0.0
            for j in range(size):
                f += r_try[j] * r_try[j]
            if f < f0:
                accepted = True
                break
            factor *= 0.5
        if not accepted:
            break
        for j in range(size):
            x[j] = x_try[j]
            r[j] = r_try[j]
        stats[1] = iteration + 1
    return np.inf
