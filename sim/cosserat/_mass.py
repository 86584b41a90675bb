"""Mass matrix M = ∫Jᵀ ℳ J dX of the PLS rod by composite inertias (the rod's analogue of the CRBA).

Why not Bᵀ B: that dense product (B = √(wℳ) J over all 2n quadrature points, 12n × N) costs O(n·N²) and was the
largest single item of a Newton iteration after the sweep was made fast (≈ 0.1 ms at n = 20, ≈ 0.25 ms at n = 24).
The structure it ignores: the columns of the base and of strain node j stop changing at node j + 1 ("settle"),
after which the sweep only transports them, J(X)[:, c] = Ad_{g(X)⁻¹ g(X_m)} J(X_m)[:, c]. So with the composite
inertia of everything beyond node m,

    C_m = Σ_{points a beyond X_m} w_a Φ_aᵀ ℳ_a Φ_a,   Φ_a = Ad_{g_a⁻¹ g_m},   C_m = Ī_m + Φ_{m+1,m}ᵀ C_{m+1} Φ_{m+1,m},

the block of two settled column groups is J(X_m)[:, b1]ᵀ C_m J(X_m)[:, b2] with m the later settle node, and only
the two strain nodes of each section (which still change inside it) are summed point by point. Cost O(N²·6 +
n·N·72) instead of O(n·N²·6). `forces.mass_matrix_reference` (Bᵀ B) is the reference the tests compare with.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _relative_adjoint(out, Ra, pa, Rb, pb):
    """out = Ad_{g_a⁻¹ g_b} = [[R, 0], [p̃ R, R]] with R = R_aᵀ R_b, p = R_aᵀ (p_b − p_a)."""
    d0 = pb[0] - pa[0]
    d1 = pb[1] - pa[1]
    d2 = pb[2] - pa[2]
    q0 = Ra[0, 0] * d0 + Ra[1, 0] * d1 + Ra[2, 0] * d2
    q1 = Ra[0, 1] * d0 + Ra[1, 1] * d1 + Ra[2, 1] * d2
    q2 = Ra[0, 2] * d0 + Ra[1, 2] * d1 + Ra[2, 2] * d2
    for r in range(3):
        for c in range(3):
            v = Ra[0, r] * Rb[0, c] + Ra[1, r] * Rb[1, c] + Ra[2, r] * Rb[2, c]
            out[r, c] = v
            out[3 + r, 3 + c] = v
            out[r, 3 + c] = 0.0
    for c in range(3):
        # (p̃ R)[r, c] = (p × R[:, c])[r]
        out[3, c] = q1 * out[2, c] - q2 * out[1, c]
        out[4, c] = q2 * out[0, c] - q0 * out[2, c]
        out[5, c] = q0 * out[1, c] - q1 * out[0, c]


@numba.njit(cache=True)
def _congruence_add(out, phi, inertia, scale):
    """out += scale · Φᵀ A Φ for a 6×6 A given as a full matrix."""
    tmp = np.empty((6, 6))
    for e in range(6):
        for c in range(6):
            acc = 0.0
            for f in range(6):
                acc += inertia[e, f] * phi[f, c]
            tmp[e, c] = acc
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for e in range(6):
                acc += phi[e, r] * tmp[e, c]
            out[r, c] += scale * acc


@numba.njit(cache=True)
def composite_mass_matrix(R, p, J, node_index, quad_index, quad_section, weights, mdiag):
    """M (N×N) from the sweep's poses and Jacobians; mdiag (Q,6) is ℳ's diagonal at the quadrature points."""
    n_dof = J.shape[2]
    n_sec = node_index.shape[0] - 1
    M = np.zeros((n_dof, n_dof))
    section_inertia = np.zeros((n_sec + 1, 6, 6))
    phi = np.empty((6, 6))
    diag = np.zeros((6, 6))
    for a in range(quad_index.shape[0]):
        i = quad_index[a]
        s = quad_section[a]
        ns = node_index[s]
        wa = weights[a]
        for e in range(6):
            diag[e, e] = mdiag[a, e]
        _relative_adjoint(phi, R[i], p[i], R[ns], p[ns])
        _congruence_add(section_inertia[s], phi, diag, wa)
        # the section's two strain nodes (columns [6+6s, 18+6s)) point by point, lower triangle c1 ≤ c2
        first = 6 + 6 * s
        last = 18 + 6 * s
        Ji = J[i]
        for c2 in range(first, last):
            row = M[c2]
            for e in range(6):
                x = wa * mdiag[a, e] * Ji[e, c2]
                if x != 0.0:
                    for c1 in range(c2 + 1):
                        row[c1] += x * Ji[e, c1]

    # composite inertias C_m, m = n_sec … 0 (C_{n_sec} = 0: nothing lies beyond the tip)
    composite = np.zeros((n_sec + 1, 6, 6))
    for m in range(n_sec - 1, -1, -1):
        composite[m] = section_inertia[m]
        _relative_adjoint(phi, R[node_index[m + 1]], p[node_index[m + 1]], R[node_index[m]], p[node_index[m]])
        _congruence_add(composite[m], phi, composite[m + 1], 1.0)

    # settled blocks: column group b (0 = base, b = node b−1) settles at node b; rows of group m, columns of
    # groups ≤ m: J(X_m)[:, rows]ᵀ C_m J(X_m)[:, cols]
    Y = np.empty((6, 6))
    for m in range(n_sec):
        Jm = J[node_index[m]]
        start = 6 * m
        for e in range(6):
            for c in range(6):
                acc = 0.0
                for f in range(6):
                    acc += composite[m, e, f] * Jm[f, start + c]
                Y[e, c] = acc
        for c in range(6):
            c2 = start + c
            row = M[c2]
            for e in range(6):
                y = Y[e, c]
                if y != 0.0:
                    for c1 in range(c2 + 1):
                        row[c1] += y * Jm[e, c1]
    for c2 in range(n_dof):
        for c1 in range(c2):
            M[c1, c2] = M[c2, c1]
    return M
