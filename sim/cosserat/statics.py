"""Static equilibrium (q̇ = 0) of a clamped rod on the same residual as the dynamics:
K θ − P_gravity(q) − P_point(q) − Q_c(q, λ) = 0 and g(q) = 0 for the point constraints (unknowns θ and
the multipliers λ), solved by Newton with an exact complex-step Jacobian (derivatives to machine precision,
no step-size error) and load continuation for large deflections.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from sim import lie
from sim.cosserat.constraints import (
    PointConstraint,
    constraint_force,
    constraint_force_map,
    constraint_jacobian,
    constraint_residual,
    multiplier_scales,
    n_constraint_rows,
    row_scales,
)
from sim.cosserat.forces import Kinematics, gravity_force, kinematics, point_load_force
from sim.cosserat.kinematics import forward_sweep
from sim.cosserat.model import RodModel
from sim.cosserat.newton import NewtonSettings, solve
from sim.cosserat.rod import RodParameterError

_CS = 1e-30
_STATICS_NEWTON = NewtonSettings(tolerance=1e-10)


@dataclass
class StaticsResult:
    q: np.ndarray
    iterations: int
    load_steps: int
    tip_position_m: np.ndarray
    tip_rotation: np.ndarray
    # reaction of each constraint row: world force λ (N), then for "fixed" the section-frame moment μ (N·m)
    constraint_multipliers: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _generalized_load(
    model: RodModel, q: np.ndarray, load_factor: float, multipliers: np.ndarray | None = None
) -> np.ndarray:
    g = model.grid
    R, p, J = forward_sweep(q, model.xi_ref_nodes.astype(q.dtype), g.x_nodes, g.x_points, g.section_of_point)
    kin = Kinematics(R, p, J)
    out = load_factor * (gravity_force(model, kin) + point_load_force(model, kin))
    if model.constraints and multipliers is not None:
        out = out + constraint_force(model.constraints, model.constraint_index, R, J, multipliers)
    return out


def static_residual(
    model: RodModel, q: np.ndarray, load_factor: float = 1.0, multipliers: np.ndarray | None = None
) -> np.ndarray:
    """Generalized force imbalance on θ (α is held by the clamp), including the constraint reactions."""
    out = model.stiffness @ q[6:] - _generalized_load(model, q, load_factor, multipliers)[6:]
    return out


def static_jacobian(
    model: RodModel, q: np.ndarray, load_factor: float = 1.0, multipliers: np.ndarray | None = None
) -> np.ndarray:
    """∂(static residual)/∂θ: K minus the geometric stiffness (of loads and reactions), by the complex step."""
    n_theta = model.n_dof - 6
    jac = model.stiffness.copy()
    qc = q.astype(complex)
    for j in range(n_theta):
        qc[6 + j] += 1j * _CS
        jac[:, j] -= _generalized_load(model, qc, load_factor, multipliers)[6:].imag / _CS
        qc[6 + j] -= 1j * _CS
    return jac


def _constrained_system(model: RodModel, q: np.ndarray, lam: np.ndarray, lf: float, force_ref: float):
    """Rows [equilibrium on θ; g(q)/L per constraint] and their Jacobian in (θ, λ/force_ref).

    Multiplier unknowns are scaled by force_ref (N; moments by force_ref·L) and the position rows by 1/L so
    that all blocks are O(1) and the Newton tolerance means the same in each.
    """
    L = model.rod.length_m
    cons, idx = model.constraints, model.constraint_index
    kin = kinematics(model, q)
    r_eq = static_residual(model, q, lf, lam)
    jac_eq = static_jacobian(model, q, lf, lam)
    row_scale = row_scales(cons, L)
    unknown_scale = multiplier_scales(cons, force_ref, L)
    g_rows = row_scale * constraint_residual(cons, idx, kin.R, kin.p)
    G = row_scale[:, None] * constraint_jacobian(cons, idx, kin.R, kin.J)[:, 6:]
    B = -constraint_force_map(cons, idx, kin.R, kin.J)[6:] * unknown_scale[None, :]
    return r_eq, jac_eq, g_rows, G, B, unknown_scale


def solve_statics(
    model: RodModel,
    q0: np.ndarray | None = None,
    load_steps: int = 1,
    settings: NewtonSettings = _STATICS_NEWTON,
) -> StaticsResult:
    """Equilibrium of a clamped rod under gravity and the model's tip loads, with its point constraints."""
    if model.base != "clamped":
        raise RodParameterError("statics needs a clamped base (base='clamped')")
    if not (isinstance(load_steps, int) and load_steps >= 1):
        raise RodParameterError(f"load_steps must be an integer >= 1, got {load_steps!r}")
    q = np.zeros(model.n_dof) if q0 is None else np.array(q0, dtype=float)
    diag = np.sqrt(np.diag(model.stiffness))
    scale = _residual_scale(model)
    n_theta = model.n_dof - 6
    n_c = n_constraint_rows(model.constraints)
    force_ref = _load_scale_n(model)
    unknown_scale = multiplier_scales(model.constraints, force_ref, model.rod.length_m)
    x = np.concatenate([q[6:], np.zeros(n_c)])
    kin0 = kinematics(model, q)
    target = model
    total = 0
    for i in range(1, load_steps + 1):
        lf = i / load_steps
        if n_c:
            target = dataclasses.replace(model, constraints=_blended_targets(model, kin0, lf))

        def fun(x, lf=lf, model=target):
            qq = q.copy()
            qq[6:] = x[:n_theta]
            if not n_c:
                r = static_residual(model, qq, lf) / diag
                jac = static_jacobian(model, qq, lf) / diag[:, None]
                return r / scale, jac / scale
            lam = x[n_theta:] * unknown_scale
            r_eq, jac_eq, g_rows, G, B, _ = _constrained_system(model, qq, lam, lf, force_ref)
            r = np.concatenate([r_eq / diag / scale, g_rows])
            jac = np.block([[jac_eq / diag[:, None] / scale, B / diag[:, None] / scale], [G, np.zeros((n_c, n_c))]])
            return r, jac

        result = solve(fun, x, settings)
        x = result.x
        total += result.iterations
    q[6:] = x[:n_theta]
    multipliers = x[n_theta:] * unknown_scale if n_c else np.zeros(0)
    kin = kinematics(model, q)
    tip = model.grid.node_index[-1]
    return StaticsResult(q, total, load_steps, kin.p[tip].copy(), kin.R[tip].copy(), multipliers)


def _blended_targets(model: RodModel, kin0, fraction: float) -> tuple[PointConstraint, ...]:
    """Continuation of the constraint targets together with the loads: from the point's pose in the start
    configuration to the prescribed one (straight line in position, geodesic in rotation), so that a
    constraint far from the start shape (e.g. a rod bent into an arc) is reached in load steps."""
    out = []
    for c, i in zip(model.constraints, model.constraint_index, strict=True):
        p0, R0 = kin0.p[i], kin0.R[i]
        position = p0 + fraction * (np.asarray(c.position_m, dtype=float) - p0)
        rotation = R0 @ lie.exp_so3(fraction * lie.log_so3(R0.T @ np.asarray(c.rotation)))
        out.append(dataclasses.replace(c, position_m=tuple(position), rotation=rotation))
    return tuple(out)


def _load_scale_n(model: RodModel) -> float:
    """A force representative of the applied loads (N): tip force, tip moment / L and the weight; EI/L² for an
    unloaded rod (bent only by its point constraints)."""
    f = float(np.linalg.norm(model.tip_force_n)) + float(np.linalg.norm(model.tip_moment_n_m)) / model.rod.length_m
    f += model.rod.mass_kg() * float(np.linalg.norm(model.gravity_m_s2))
    return f if f > 0 else model.rod.bending_stiffness_n_m2() / model.rod.length_m**2


def _residual_scale(model: RodModel) -> float:
    """Residual rows are divided by sqrt(K_ii) (units of sqrt(energy)); this makes them relative to the load."""
    ei = model.rod.bending_stiffness_n_m2()
    return _load_scale_n(model) * np.sqrt(model.rod.length_m**3 / ei)
