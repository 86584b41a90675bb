"""Strain observer (paper 004, eq. 61–63, sign fixed as in the notes): from marker positions to strains.

The rod's shape is taken as the one that minimises its potential energy ½θᵀKθ + V_gravity(θ) while passing
through the measured marker positions (position-only constraints: a camera sees points, not frames). The
KKT conditions  Kθ − P_g(q) − Σ_i J_p,iᵀ λ_i = 0,  p(X_i; q) − y_i = 0  are solved by Newton; the top-left
block uses the complex-step derivative of the generalized forces (exact to rounding). λ_i are the forces the
markers' "constraints" must apply: the unmodelled loads (contacts, the bench's pushing) seen by the camera.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cosserat._observer_kernels import observer_newton
from sim.cosserat.forces import Kinematics, gravity_force, kinematics
from sim.cosserat.kinematics import forward_sweep
from sim.cosserat.model import RodModel
from sim.cosserat.newton import ConvergenceError, NewtonSettings, solve
from sim.cosserat.rod import RodParameterError

_CS = 1e-30
_OBSERVER_NEWTON = NewtonSettings(tolerance=1e-10, max_iterations=40)


@dataclass
class ObserverResult:
    q: np.ndarray
    strain_nodes: np.ndarray  # (n+1, 6) total strains ξ_ref + θ at the strain nodes
    marker_forces_n: np.ndarray  # (k, 3) constraint forces at the markers (world)
    iterations: int


def _marker_indices(model: RodModel, markers_x_m: np.ndarray) -> np.ndarray:
    idx = model.grid.extra_index
    found = model.grid.x_points[idx]
    order = []
    for x in markers_x_m:
        j = int(np.argmin(np.abs(found - x)))
        if abs(found[j] - x) > 1e-9 * model.rod.length_m:
            raise RodParameterError(f"marker at X = {x} m is not an extra point of the model's sweep grid")
        order.append(idx[j])
    return np.array(order, dtype=np.int64)


def _forces(model: RodModel, q: np.ndarray, lam: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = model.grid
    R, p, J = forward_sweep(q, model.xi_ref_nodes.astype(q.dtype), g.x_nodes, g.x_points, g.section_of_point)
    kin = Kinematics(R, p, J)
    jp = np.einsum("kij,kjn->kin", R[idx], J[idx, 3:6])  # (k,3,N) world position Jacobians
    f = model.stiffness @ q[6:] - gravity_force(model, kin)[6:] - np.einsum("kin,ki->n", jp, lam)[6:]
    return f, p[idx]


def observe_strains(
    model: RodModel,
    base_alpha: np.ndarray,
    markers_x_m: np.ndarray,
    markers_position_m: np.ndarray,
    q0: np.ndarray | None = None,
    marker_compliance_m_per_n: float = 0.0,
    settings: NewtonSettings = _OBSERVER_NEWTON,
    compiled: bool = True,
) -> ObserverResult:
    """Strains of a clamped rod (base pose `base_alpha` = [φ; p0]) whose markers at arc lengths `markers_x_m`
    were seen at `markers_position_m` (k, 3). The model must list the markers in `extra_points_m`.

    marker_compliance_m_per_n = 0 makes the markers hard constraints (the paper); a positive compliance c
    ties each marker to its measurement by a spring (p − y + c·λ = 0), which stops measurement noise from
    being interpolated into strain (choose c ≈ noise / typical contact force).

    `q0` (the last frame's solution) warm-starts Newton; without one, or if Newton from it fails, the markers are
    moved to the measured ones in four stages (homotopy), which large shapes need. `compiled` (default) solves each
    stage by the compiled kernel (`_observer_kernels`: O(n) residual, finite-difference Jacobian, a few ms a frame);
    False by the readable Newton with the complex-step Jacobian (~0.5 s a frame), which the tests compare it with."""
    markers_x_m = np.asarray(markers_x_m, dtype=float)
    target = np.asarray(markers_position_m, dtype=float)
    y = target
    if y.shape != (len(markers_x_m), 3):
        raise RodParameterError(f"markers_position_m must be ({len(markers_x_m)}, 3), got {y.shape}")
    idx = _marker_indices(model, markers_x_m)
    n_theta, k = model.n_dof - 6, len(markers_x_m)
    q = np.zeros(model.n_dof) if q0 is None else np.array(q0, dtype=float)
    q[0:6] = base_alpha
    length = model.rod.length_m
    scale_f = float(np.max(np.diag(model.stiffness)))  # rows in units of the largest section stiffness
    if compiled:
        return _observe_compiled(model, q, idx, target, q0 is not None, marker_compliance_m_per_n, settings)

    def fun(x):
        qq = q.copy()
        qq[6:] = x[:n_theta]
        lam = x[n_theta:].reshape(k, 3) * scale_f / length
        f, p = _forces(model, qq, lam, idx)
        jac = np.zeros((n_theta + 3 * k, n_theta + 3 * k))
        qc = qq.astype(complex)
        for j in range(n_theta):
            qc[6 + j] += 1j * _CS
            fc, pc = _forces(model, qc, lam.astype(complex), idx)
            jac[:n_theta, j] = fc.imag / _CS
            jac[n_theta:, j] = pc.imag.reshape(-1) / _CS
            qc[6 + j] -= 1j * _CS
        kin = kinematics(model, qq)
        jp = np.einsum("kij,kjn->kin", kin.R[idx], kin.J[idx, 3:6])[:, :, 6:]
        jac[:n_theta, n_theta:] = -jp.reshape(3 * k, n_theta).T * scale_f / length
        c = marker_compliance_m_per_n
        r = np.concatenate([f / scale_f, (p - y + c * lam).reshape(-1) / length])
        jac[n_theta:, n_theta:] = np.eye(3 * k) * c * scale_f / length**2
        jac[:n_theta] /= scale_f
        jac[n_theta:, :n_theta] /= length
        return r, jac

    # homotopy from the markers of the initial guess to the measured ones: large shapes converge reliably
    start = kinematics(model, q).p[idx]
    x = np.concatenate([q[6:], np.zeros(3 * k)])
    iterations = 0
    for s in (0.25, 0.5, 0.75, 1.0):
        y = start + s * (target - start)
        try:
            result = solve(fun, x, settings)
        except ConvergenceError as exc:
            raise ConvergenceError(f"strain observer (homotopy {s:.2f}): {exc}") from None
        x = result.x
        iterations += result.iterations
    q[6:] = result.x[:n_theta]
    lam = result.x[n_theta:].reshape(k, 3) * scale_f / length
    return ObserverResult(q, q[6:].reshape(-1, 6) + model.xi_ref_nodes, lam, iterations)


def _observer_arrays(model: RodModel) -> tuple:
    g = model.grid
    n_nodes = model.n_sections + 1
    k_diag = np.diag(model.stiffness).reshape(n_nodes, 6).copy()
    k_off = np.diag(model.stiffness, 6).reshape(n_nodes - 1, 6).copy()
    return (
        model.xi_ref_nodes,
        g.x_nodes,
        g.x_points,
        g.section_of_point,
        g.quad_index,
        g.quad_weight_m,
        model.quad_inertia,
        k_diag,
        k_off,
        model.gravity_m_s2,
    )


def _observe_compiled(
    model: RodModel,
    q: np.ndarray,
    idx: np.ndarray,
    target: np.ndarray,
    warm: bool,
    compliance: float,
    settings: NewtonSettings,
) -> ObserverResult:
    """`observe_strains` by `_observer_kernels.observer_newton`: from the warm start directly, else (or if that
    fails) by the four-stage homotopy of the reference."""
    arrays = _observer_arrays(model)
    length = model.rod.length_m
    scale_f = float(np.max(np.diag(model.stiffness)))
    n_theta, k = model.n_dof - 6, len(idx)
    stats = np.zeros(2, dtype=np.int64)
    x0 = np.concatenate([q[6:], np.zeros(3 * k)])
    args = (arrays, idx, np.ascontiguousarray(target), float(compliance), scale_f, length)
    if warm:
        x = x0.copy()
        norm = observer_newton(x, q.copy(), *args, settings.tolerance, settings.max_iterations, stats)
        if stats[0]:
            return _observer_result(model, q, x, n_theta, k, scale_f, length, int(stats[1]))
    g = model.grid
    start = forward_sweep(q, model.xi_ref_nodes, g.x_nodes, g.x_points, g.section_of_point)[1][idx]
    x, iterations = x0.copy(), 0
    for s in (0.25, 0.5, 0.75, 1.0):
        stage = (arrays, idx, np.ascontiguousarray(start + s * (target - start)), *args[3:])
        norm = observer_newton(x, q.copy(), *stage, settings.tolerance, settings.max_iterations, stats)
        if not stats[0]:
            raise ConvergenceError(f"strain observer (homotopy {s:.2f}): |r|_inf = {norm:.3e} not converged")
        iterations += int(stats[1])
    return _observer_result(model, q, x, n_theta, k, scale_f, length, iterations)


def _observer_result(model, q, x, n_theta, k, scale_f, length, iterations) -> ObserverResult:
    q = q.copy()
    q[6:] = x[:n_theta]
    lam = x[n_theta:].reshape(k, 3) * scale_f / length
    return ObserverResult(q, q[6:].reshape(-1, 6) + model.xi_ref_nodes, lam, iterations)
