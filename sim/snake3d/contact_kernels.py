"""The 3D simulator's contact solver, compiled (numba): which contacts are active at the midpoint, their rows in the
reduced coordinates, and the prox iteration for their impulses (paper 000, Sec. VII; the reference is
:mod:`sim.snake3d.reference`). Split from :mod:`sim.snake3d.fast`, whose `step` calls these in order."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.snake3d.parameters import (
    INNER_TOLERANCE_FACTOR,
    P_CONTRACTING,
    P_INNER,
    P_LGS,
    P_LSC,
    P_MAXIT,
    P_MUO,
    P_MUV,
    P_MUX,
    P_MUY,
    P_PAPER,
    P_RETRIES,
    P_RN,
    P_RT,
    P_RTOL,
    P_RV,
    P_TOL,
    P_VTOL,
)


@njit(cache=True)
def _max_eig_2x2(a00, a01, a10, a11):
    half_trace = 0.5 * (a00 + a11)
    det = a00 * a11 - a01 * a10
    return half_trace + math.sqrt(max(half_trace * half_trace - det, 0.0))


@njit(cache=True)
def _prox_ellipse(y0, y1, ax, ay):
    if ax <= 0.0 or ay <= 0.0:
        return 0.0, 0.0
    s = math.sqrt((y0 / ax) ** 2 + (y1 / ay) ** 2)
    if s > 1.0:
        return y0 / s, y1 / s
    return y0, y1


@njit(cache=True)
def _solve_contact(gamma0, A, P0, r_n, rt0, rt1, r_v, scale, mux, muy, muv, tol, inner, out, before, gamma):
    """Numba twin of reference.solve_contact (same operations in the same order); ``before`` and ``gamma`` are
    4-element work arrays (allocating them here cost as much as the update itself)."""
    for k in range(4):
        out[k] = P0[k]
    for _ in range(inner):
        for k in range(4):
            before[k] = out[k]
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[0] = max(0.0, out[0] - scale * r_n * gamma[0])
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[1], out[2] = _prox_ellipse(
            out[1] - scale * rt0 * gamma[1], out[2] - scale * rt1 * gamma[2], mux * out[0], muy * out[0]
        )
        for row in range(4):
            acc = gamma0[row]
            for col in range(4):
                acc += A[row, col] * (out[col] - P0[col])
            gamma[row] = acc
        out[3] = min(muv * out[0], max(-muv * out[0], out[3] - scale * r_v * gamma[3]))
        change = 0.0
        for k in range(4):
            change += abs(out[k] - before[k])
        if change < INNER_TOLERANCE_FACTOR * tol:
            break


@njit(cache=True)
def _gamma(Y, width, zhat, out):
    """out[d] = Σ_c Y[c, d] ẑ[c] for the 4 directions of a contact (4 independent sums, each in coordinate order)."""
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    g3 = 0.0
    for c in range(width):
        z = zhat[c]
        g0 += Y[c, 0] * z
        g1 += Y[c, 1] * z
        g2 += Y[c, 2] * z
        g3 += Y[c, 3] * z
    out[0] = g0
    out[1] = g1
    out[2] = g2
    out[3] = g3


@njit(cache=True)
def _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0):
    """Violation of the contact laws (eq. 87–89) in m/s: max over contacts of ‖P − prox(P − rγ)‖ / r."""
    residual = 0.0
    for k in range(m):
        _gamma(Yh[k], widths[k], zhat, gamma0)
        pn = max(0.0, P[k, 0] - rpar[k, 0] * gamma0[0])
        res = abs(pn - P[k, 0]) / rpar[k, 0]
        t1, t2 = _prox_ellipse(
            P[k, 1] - rpar[k, 1] * gamma0[1], P[k, 2] - rpar[k, 2] * gamma0[2], c_mu[k, 0] * P[k, 0],
            c_mu[k, 1] * P[k, 0],
        )  # fmt: skip
        res = max(res, math.sqrt(((t1 - P[k, 1]) / rpar[k, 1]) ** 2 + ((t2 - P[k, 2]) / rpar[k, 2]) ** 2))
        if rpar[k, 3] > 0.0:
            bound = c_mu[k, 2] * P[k, 0]
            pv = min(bound, max(-bound, P[k, 3] - rpar[k, 3] * gamma0[3]))
            res = max(res, abs(pv - P[k, 3]) / rpar[k, 3])
        residual = max(residual, res)
    return residual


@njit(cache=True)
def _active_contacts(posM, R, obstacles, prm, active, c_link, c_off, c_dir, c_mu):
    """Step 5a: the contacts active at the midpoint (link, body-point offset, directions (N, T1, T2), friction
    bounds); returns their number.
    Ground: the lowest points of the end spheres, T along / across the link (frame Π), rolling about the link axis.
    Obstacles: the point of the link capsule closest to a vertical cylinder, T horizontal / vertical, no rolling."""
    n = posM.shape[0]
    n_obs = obstacles.shape[0]
    lsc = prm[P_LSC]
    lgs = prm[P_LGS]
    mux, muy, muv = prm[P_MUX], prm[P_MUY], prm[P_MUV]
    m = 0
    for a in range(2 * n):
        i = a % n
        sign = 1.0 if a < n else -1.0
        if posM[i, 2] + sign * lgs * R[i, 2, 2] - lsc <= 0.0:
            active[m] = a
            c_link[m] = i
            for c in range(3):
                c_off[m, c] = sign * lgs * R[i, c, 2]
            c_off[m, 2] -= lsc
            ax = R[i, 0, 2]
            ay = R[i, 1, 2]
            norm = math.sqrt(ax * ax + ay * ay)
            if norm < 1e-9:  # vertical link: eq. 27 undefined, use the (horizontal) body e_x axis
                ax = R[i, 0, 0]
                ay = R[i, 1, 0]
                norm = math.sqrt(ax * ax + ay * ay)
            c_dir[m, 0, 0] = 0.0
            c_dir[m, 0, 1] = 0.0
            c_dir[m, 0, 2] = 1.0
            c_dir[m, 1, 0] = ax / norm
            c_dir[m, 1, 1] = ay / norm
            c_dir[m, 1, 2] = 0.0
            c_dir[m, 2, 0] = -ay / norm
            c_dir[m, 2, 1] = ax / norm
            c_dir[m, 2, 2] = 0.0
            c_mu[m, 0] = mux
            c_mu[m, 1] = muy
            c_mu[m, 2] = muv
            m += 1
    for i in range(n):
        hx = R[i, 0, 2]
        hy = R[i, 1, 2]
        h2 = hx * hx + hy * hy
        for o in range(n_obs):
            relx = posM[i, 0] - obstacles[o, 0]
            rely = posM[i, 1] - obstacles[o, 1]
            sp = 0.0
            if h2 >= 1e-12:
                sp = min(1.0, max(-1.0, -(relx * hx + rely * hy) / (lgs * h2)))
            cx = relx + sp * lgs * hx
            cy = rely + sp * lgs * hy
            dist = math.sqrt(cx * cx + cy * cy)
            if dist - lsc - obstacles[o, 2] <= 0.0:
                active[m] = 2 * n + i * n_obs + o
                c_link[m] = i
                nx = cx / dist if dist > 0.0 else 1.0
                ny = cy / dist if dist > 0.0 else 0.0
                for c in range(3):
                    c_off[m, c] = sp * lgs * R[i, c, 2]
                c_off[m, 0] -= lsc * nx
                c_off[m, 1] -= lsc * ny
                c_dir[m, 0, 0] = nx
                c_dir[m, 0, 1] = ny
                c_dir[m, 0, 2] = 0.0
                c_dir[m, 1, 0] = -ny  # e_z × n
                c_dir[m, 1, 1] = nx
                c_dir[m, 1, 2] = 0.0
                c_dir[m, 2, 0] = 0.0
                c_dir[m, 2, 1] = 0.0
                c_dir[m, 2, 2] = 1.0
                c_mu[m, 0] = prm[P_MUO]
                c_mu[m, 1] = prm[P_MUO]
                c_mu[m, 2] = 0.0
                m += 1

    return m


@njit(cache=True)
def _contact_rows(m, c_link, c_off, c_dir, c_mu, Nv, Nw, U, prm, row, Yh, blocks, widths, rpar):
    """Step 5b: each active contact's rows Ŷ = W_aᵀ N U⁻ᵀ, its Delassus block and prox parameters."""
    nz = U.shape[0]
    lsc = prm[P_LSC]
    for k in range(m):
        i = c_link[k]
        off = c_off[k]
        width = min(nz, 6 + 2 * i)
        widths[k] = width
        for dim in range(3):
            d0, d1, d2 = c_dir[k, dim, 0], c_dir[k, dim, 1], c_dir[k, dim, 2]
            rd0 = off[1] * d2 - off[2] * d1
            rd1 = off[2] * d0 - off[0] * d2
            rd2 = off[0] * d1 - off[1] * d0
            for c in range(width):
                row[c, dim] = (
                    d0 * Nv[i, 0, c] + d1 * Nv[i, 1, c] + d2 * Nv[i, 2, c]
                    + rd0 * Nw[i, 0, c] + rd1 * Nw[i, 1, c] + rd2 * Nw[i, 2, c]
                )  # fmt: skip
        ex = c_dir[k, 1]
        rolling = c_mu[k, 2] > 0.0  # rolling about the link axis: L_SC (e_x^Π)ᵀ ω_I
        for c in range(width):
            row[c, 3] = lsc * (ex[0] * Nw[i, 0, c] + ex[1] * Nw[i, 1, c]) if rolling else 0.0
        # back substitution U ŷ = row for the 4 directions at once (independent sums, each in the original order)
        Y = Yh[k]
        for r in range(width - 1, -1, -1):
            s0, s1, s2, s3 = row[r, 0], row[r, 1], row[r, 2], row[r, 3]
            for q in range(r + 1, width):
                u = U[r, q]
                s0 -= u * Y[q, 0]
                s1 -= u * Y[q, 1]
                s2 -= u * Y[q, 2]
                s3 -= u * Y[q, 3]
            urr = U[r, r]
            Y[r, 0] = s0 / urr
            Y[r, 1] = s1 / urr
            Y[r, 2] = s2 / urr
            Y[r, 3] = s3 / urr
        for d1 in range(4):
            for d2 in range(4):
                s = 0.0
                for c in range(width):
                    s += Y[c, d1] * Y[c, d2]
                blocks[k, d1, d2] = s
        B = blocks[k]
        mu1 = c_mu[k, 0]
        mu2 = c_mu[k, 1]
        if prm[P_PAPER] > 0.5:
            rpar[k, 0] = prm[P_RN]
            rpar[k, 1] = prm[P_RT] * mu1 / mu2
            rpar[k, 2] = prm[P_RT] * mu2 / mu1
            rpar[k, 3] = prm[P_RV]
        else:
            rpar[k, 0] = prm[P_RN] / B[0, 0]
            c_t = prm[P_RT] / _max_eig_2x2(
                mu1 * mu1 * B[1, 1], mu1 * mu2 * B[1, 2], mu2 * mu1 * B[2, 1], mu2 * mu2 * B[2, 2]
            )
            rpar[k, 1] = c_t * mu1 * mu1
            rpar[k, 2] = c_t * mu2 * mu2
            rpar[k, 3] = prm[P_RV] / B[3, 3] if B[3, 3] > 0.0 else 0.0


@njit(cache=True)
def _prox_iteration(
    m, active, widths, Yh, blocks, rpar, c_mu, cache, zhat_free, prm, P, change, zhat, zhat_sweep, gamma0, newP,
    work_before, work_gamma, out_stats, diagnostics,
):  # fmt: skip
    """Step 6: the contact impulses P by the prox iteration (block Gauss–Seidel over contacts) from the warm start in
    `cache`; after each block of maxit sweeps without convergence: continue with the same r if the iteration is still
    contracting, else restart with r halved (see model.CONTRACTING). Returns whether it converged (out_stats: sweeps,
    r reductions, contacts; on failure the three contacts that changed most)."""
    nz = zhat.shape[0]
    tol = prm[P_TOL]
    inner = int(prm[P_INNER])
    change[:] = 0.0
    scale = 1.0
    sweeps = 0
    converged = False
    residual = 0.0
    maxit = int(prm[P_MAXIT])
    retries = int(prm[P_RETRIES])
    reductions = 0
    restart = True
    for _attempt in range(retries + 1):
        if restart:
            for c in range(nz):
                zhat[c] = zhat_free[c]
            for k in range(m):
                for d in range(4):
                    P[k, d] = cache[active[k], d]
                    for c in range(widths[k]):
                        zhat[c] += Yh[k, c, d] * P[k, d]
        residual_mid = math.inf
        for sweep in range(maxit):
            sweeps += 1
            for c in range(nz):
                zhat_sweep[c] = zhat[c]
            sq_n = 0.0
            sq_t = 0.0
            sq_v = 0.0
            for k in range(m):
                wk = widths[k]
                _gamma(Yh[k], wk, zhat, gamma0)
                _solve_contact(
                    gamma0, blocks[k], P[k], rpar[k, 0], rpar[k, 1], rpar[k, 2], rpar[k, 3], scale, c_mu[k, 0],
                    c_mu[k, 1], c_mu[k, 2],
                    tol, inner, newP, work_before, work_gamma,
                )  # fmt: skip
                ch = 0.0
                for d in range(4):
                    delta = newP[d] - P[k, d]
                    if delta != 0.0:
                        for c in range(wk):
                            zhat[c] += Yh[k, c, d] * delta
                    ch += delta * delta
                    P[k, d] = newP[d]
                    if d == 0:
                        sq_n += delta * delta
                    elif d < 3:
                        sq_t += delta * delta
                    else:
                        sq_v += delta * delta
                change[k] = math.sqrt(ch)
            err = math.sqrt(sq_n) + math.sqrt(sq_t) + math.sqrt(sq_v)
            if not math.isfinite(err):
                break
            du = 0.0
            for c in range(nz):
                du += (zhat[c] - zhat_sweep[c]) ** 2
            if sweep == maxit // 2:
                residual_mid = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
            if err < tol or math.sqrt(du) < prm[P_VTOL]:
                # accept only if the contact laws hold to the residual tolerance (m/s)
                residual = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
                if residual <= prm[P_RTOL]:
                    converged = True
                    break
        if converged:
            break
        residual = _residual(m, widths, Yh, zhat, P, rpar, c_mu, gamma0)
        restart = not (math.isfinite(residual) and residual < prm[P_CONTRACTING] * residual_mid)
        if restart:
            scale *= 0.5
            reductions += 1
    out_stats[0] = sweeps
    out_stats[1] = reductions
    out_stats[2] = m
    if not converged:
        order = np.argsort(-change)
        for q in range(3):
            out_stats[3 + q] = active[order[q]] if q < m else -1
        return False
    diagnostics[0] = residual
    return True
