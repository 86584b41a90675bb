"""Set-valued isotropic Coulomb ground friction, integrated implicitly at velocity level.

Paper 001 defers ground friction to its ref. [15]. We model each link as uniformly loaded by its weight m g:
a friction force on the CM bounded by the disk |f_i| ≤ μ m g, opposing the CM velocity when sliding, and a
friction torque bounded by |τ_i| ≤ μ m g l / 2 (the torque of a uniformly loaded rod spinning about its centre),
opposing the angular velocity. Force and torque limits are treated independently (a box-disk approximation of
the rod's true limit surface).

Sticking is handled exactly, not regularised: over a step of length h the friction impulses P solve
    v⁺ = v_free + H P,   P_i ∈ −∂(μ m g h |v_i⁺|)       (maximal dissipation, Moreau's sweeping process)
with H = Gᵀ M⁻¹ G the Delassus operator of the link velocities. When the applied forces stay inside the friction
limits the post-step velocity is exactly zero, so a resting snake whose joints hold still cannot creep.
Solved by block projected Gauss–Seidel (one 2-D disk block and one 1-D interval per link), warm-started.

Unknowns are ordered (P_x of links 1..n, P_y of links 1..n, torque impulses of links 1..n).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["solve_ground_friction", "solve_ground_friction_reference"]


@numba.njit(cache=True)
def _pgs(H, v_free, P, force_limit, torque_limit, max_sweeps, tol):  # pragma: no cover - compiled
    n = v_free.size // 3
    v = v_free + H @ P
    sweeps = 0
    for _ in range(max_sweeps):
        sweeps += 1
        change = 0.0
        for i in range(n):
            ix, iy, iw = i, n + i, 2 * n + i
            # translation: exact stick impulse if it fits inside the disk, else a projected gradient step
            a, b, d = H[ix, ix], H[ix, iy], H[iy, iy]
            det = a * d - b * b
            px = P[ix] - (d * v[ix] - b * v[iy]) / det
            py = P[iy] - (-b * v[ix] + a * v[iy]) / det
            if px * px + py * py > force_limit[i] * force_limit[i]:
                lam_max = 0.5 * (a + d) + np.sqrt(0.25 * (a - d) ** 2 + b * b)
                px = P[ix] - v[ix] / lam_max
                py = P[iy] - v[iy] / lam_max
                norm = np.sqrt(px * px + py * py)
                if norm > force_limit[i]:
                    px *= force_limit[i] / norm
                    py *= force_limit[i] / norm
            dx, dy = px - P[ix], py - P[iy]
            if dx != 0.0 or dy != 0.0:
                for k in range(3 * n):
                    v[k] += H[k, ix] * dx + H[k, iy] * dy
                P[ix], P[iy] = px, py
                change = max(change, abs(dx), abs(dy))
            # rotation: exact 1-D solve, clipped to the torque limit
            pw = P[iw] - v[iw] / H[iw, iw]
            if pw > torque_limit[i]:
                pw = torque_limit[i]
            elif pw < -torque_limit[i]:
                pw = -torque_limit[i]
            dw = pw - P[iw]
            if dw != 0.0:
                for k in range(3 * n):
                    v[k] += H[k, iw] * dw
                P[iw] = pw
                change = max(change, abs(dw))
        if change <= tol:
            break
    return sweeps


def solve_ground_friction(
    H: np.ndarray,
    v_free: np.ndarray,
    P_warm: np.ndarray,
    force_limit_ns: np.ndarray,
    torque_limit_nms: np.ndarray,
    max_sweeps: int = 300,
    tol: float = 1e-12,
) -> tuple[np.ndarray, int]:
    """Friction impulses P (3n,) and the number of sweeps. Limits are impulses: μ m g h and μ m g l h / 2."""
    P = np.array(P_warm, dtype=float, copy=True)
    sweeps = _pgs(np.ascontiguousarray(H), np.asarray(v_free, dtype=float), P, force_limit_ns, torque_limit_nms,
                  max_sweeps, tol)  # fmt: skip
    return P, int(sweeps)


def solve_ground_friction_reference(
    H: np.ndarray,
    v_free: np.ndarray,
    force_limit_ns: np.ndarray,
    torque_limit_nms: np.ndarray,
    iterations: int,
) -> np.ndarray:
    """Plain-numpy reference: projected gradient (Jacobi) on the same convex problem
    min ½ Pᵀ H P + v_freeᵀ P over the disk/interval set, with step 1/||H||. Slow, for tests."""
    n = v_free.size // 3
    P = np.zeros_like(v_free)
    step = 1.0 / np.linalg.norm(H, 2)
    for _ in range(iterations):
        P = P - step * (H @ P + v_free)
        f = np.stack([P[:n], P[n : 2 * n]])
        norm = np.maximum(np.linalg.norm(f, axis=0), 1e-300)
        f *= np.minimum(1.0, force_limit_ns / norm)
        P[:n], P[n : 2 * n] = f
        P[2 * n :] = np.clip(P[2 * n :], -torque_limit_nms, torque_limit_nms)
    return P
