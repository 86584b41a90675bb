"""Static equilibrium (q̇ = 0) of a clamped rod on the same residual as the dynamics:
K θ − P_gravity(q) − P_point(q) = 0, solved by Newton with an exact complex-step Jacobian
(derivatives to machine precision, no step-size error) and load continuation for large deflections.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cosserat.dynamics import gravity_force, kinematics, point_load_force
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


def _generalized_load(model: RodModel, q: np.ndarray, load_factor: float) -> np.ndarray:
    g = model.grid
    R, p, J = forward_sweep(q, model.xi_ref_nodes.astype(q.dtype), g.x_nodes, g.x_points, g.section_of_point)
    from sim.cosserat.dynamics import Kinematics

    kin = Kinematics(R, p, J)
    return load_factor * (gravity_force(model, kin) + point_load_force(model, kin))


def static_residual(model: RodModel, q: np.ndarray, load_factor: float = 1.0) -> np.ndarray:
    """Generalized force imbalance on θ (α is held by the clamp)."""
    out = model.stiffness @ q[6:] - _generalized_load(model, q, load_factor)[6:]
    return out


def static_jacobian(model: RodModel, q: np.ndarray, load_factor: float = 1.0) -> np.ndarray:
    """∂(static residual)/∂θ: K minus the geometric stiffness, by the complex step."""
    n_theta = model.n_dof - 6
    jac = model.stiffness.copy()
    qc = q.astype(complex)
    for j in range(n_theta):
        qc[6 + j] += 1j * _CS
        jac[:, j] -= _generalized_load(model, qc, load_factor)[6:].imag / _CS
        qc[6 + j] -= 1j * _CS
    return jac


def solve_statics(
    model: RodModel,
    q0: np.ndarray | None = None,
    load_steps: int = 1,
    settings: NewtonSettings = _STATICS_NEWTON,
) -> StaticsResult:
    """Equilibrium of a clamped rod under gravity and the model's tip loads."""
    if model.base != "clamped":
        raise RodParameterError("statics needs a clamped base (base='clamped')")
    if not (isinstance(load_steps, int) and load_steps >= 1):
        raise RodParameterError(f"load_steps must be an integer >= 1, got {load_steps!r}")
    q = np.zeros(model.n_dof) if q0 is None else np.array(q0, dtype=float)
    diag = np.sqrt(np.diag(model.stiffness))
    total = 0
    for i in range(1, load_steps + 1):
        lf = i / load_steps

        def fun(theta, lf=lf):
            qq = q.copy()
            qq[6:] = theta
            r = static_residual(model, qq, lf) / diag
            jac = static_jacobian(model, qq, lf) / diag[:, None]
            return r / _residual_scale(model), jac / _residual_scale(model)

        result = solve(fun, q[6:], settings)
        q[6:] = result.x
        total += result.iterations
    kin = kinematics(model, q)
    tip = model.grid.node_index[-1]
    return StaticsResult(q, total, load_steps, kin.p[tip].copy(), kin.R[tip].copy())


def _residual_scale(model: RodModel) -> float:
    """Residual rows are divided by sqrt(K_ii) (units of sqrt(energy)); this makes them relative to the load."""
    f = float(np.linalg.norm(model.tip_force_n)) + float(np.linalg.norm(model.tip_moment_n_m)) / model.rod.length_m
    f += model.rod.mass_kg() * float(np.linalg.norm(model.gravity_m_s2))
    ei = model.rod.bending_stiffness_n_m2()
    return max(f * np.sqrt(model.rod.length_m**3 / ei), 1e-300)
