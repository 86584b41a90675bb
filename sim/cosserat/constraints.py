"""Point constraints along the rod: position-only (articulated, a pin) and fixed (position and orientation).

A constraint at arc length X holds g(q) = 0 with
  position rows    g_p = p(X) − p*            (world frame, m)
  orientation rows g_R = log(R*ᵀ R(X))        (rotation vector, rad; "fixed" only)
and enters the equilibrium/momentum rows through Lagrange multipliers as the generalized force
  Q_c = J_v(X)ᵀ R(X)ᵀ λ  +  J_ω(X)ᵀ μ,
where λ is the world reaction force on the rod (N) and μ the reaction moment in the section frame (N·m).
The orientation rows' exact Jacobian is J_r⁻¹(g_R) J_ω; using J_ωᵀ μ as the force map (instead of its
transpose) only re-parametrises the multiplier (J_r⁻¹ is invertible for |g_R| < 2π), and gives μ a
physical meaning. The force map is written with plain array products so that it works on complex sweeps
(the statics Jacobian differentiates it by the complex step).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim import lie
from sim.cosserat.rod import RodParameterError

CONSTRAINT_KINDS = ("position", "fixed")


@dataclass(frozen=True)
class PointConstraint:
    """Hold the rod's centreline point at arc length `x_m` at `position_m` (and, if kind == "fixed", its
    section frame at `rotation`, default the world axes)."""

    x_m: float
    kind: str
    position_m: tuple[float, float, float]
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))

    def __post_init__(self) -> None:
        if self.kind not in CONSTRAINT_KINDS:
            raise RodParameterError(f"constraint kind must be one of {CONSTRAINT_KINDS}, got {self.kind!r}")
        if not (np.isfinite(self.x_m) and self.x_m > 0):
            raise RodParameterError(f"constraint x_m must be > 0 (the base is prescribed by `base`), got {self.x_m!r}")
        rot = np.asarray(self.rotation, dtype=float)
        if rot.shape != (3, 3) or not np.allclose(rot.T @ rot, np.eye(3), atol=1e-9):
            raise RodParameterError("constraint rotation must be a 3×3 rotation matrix")
        if np.asarray(self.position_m, dtype=float).shape != (3,):
            raise RodParameterError(f"constraint position_m must have 3 components, got {self.position_m!r}")

    @property
    def n_rows(self) -> int:
        return 3 if self.kind == "position" else 6


def n_constraint_rows(constraints: tuple[PointConstraint, ...]) -> int:
    return sum(c.n_rows for c in constraints)


def constraint_residual(constraints, index: np.ndarray, R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """g(q) stacked over the constraints: position error (m), then the rotation vector (rad) if fixed."""
    rows = []
    for c, i in zip(constraints, index, strict=True):
        rows.append(p[i] - np.asarray(c.position_m, dtype=float))
        if c.kind == "fixed":
            rows.append(lie.log_so3(np.asarray(c.rotation).T @ R[i]))
    return np.concatenate(rows) if rows else np.zeros(0)


def constraint_jacobian(constraints, index: np.ndarray, R: np.ndarray, J: np.ndarray) -> np.ndarray:
    """∂g/∂q (rows × n_dof): R J_v for the position, J_r⁻¹(g_R) J_ω for the orientation."""
    rows = []
    for c, i in zip(constraints, index, strict=True):
        rows.append(R[i] @ J[i, 3:6])
        if c.kind == "fixed":
            phi = lie.log_so3(np.asarray(c.rotation).T @ R[i])
            rows.append(lie.right_jacobian_so3_inv(phi) @ J[i, 0:3])
    return np.vstack(rows) if rows else np.zeros((0, J.shape[2]))


def constraint_force(constraints, index: np.ndarray, R: np.ndarray, J: np.ndarray, multipliers) -> np.ndarray:
    """Generalized force Q_c = Σ J_vᵀ Rᵀ λ + J_ωᵀ μ (complex-safe in R and J)."""
    out = np.zeros(J.shape[2], dtype=np.result_type(J, multipliers))
    k = 0
    for c, i in zip(constraints, index, strict=True):
        out = out + J[i, 3:6].T @ (R[i].T @ multipliers[k : k + 3])
        k += 3
        if c.kind == "fixed":
            out = out + J[i, 0:3].T @ multipliers[k : k + 3]
            k += 3
    return out


def constraint_force_map(constraints, index: np.ndarray, R: np.ndarray, J: np.ndarray) -> np.ndarray:
    """∂Q_c/∂(λ, μ): n_dof × rows (the columns of the force map)."""
    cols = []
    for c, i in zip(constraints, index, strict=True):
        cols.append(J[i, 3:6].T @ R[i].T)
        if c.kind == "fixed":
            cols.append(J[i, 0:3].T)
    return np.hstack(cols) if cols else np.zeros((J.shape[2], 0))


def row_scales(constraints, length_m: float) -> np.ndarray:
    """Divide position rows by L (rotation rows are already dimensionless) so gaps read as fractions of L."""
    return np.array([x for c in constraints for x in [1 / length_m] * 3 + ([1.0] * 3 if c.kind == "fixed" else [])])


def multiplier_scales(constraints, force_n: float, length_m: float) -> np.ndarray:
    """Units of the solver's multiplier unknowns: force_n for forces, force_n·L for moments."""
    return force_n * np.array(
        [x for c in constraints for x in [1.0] * 3 + ([length_m] * 3 if c.kind == "fixed" else [])]
    )
