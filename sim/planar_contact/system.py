"""The model interface of paper 003: a planar system with point contacts, evaluated at one state (q, q̇).

Every quantity the mode solver needs is collected in one immutable `ContactSnapshot`:
    M(q) q̈ + C(q, q̇) q̇ + g(q) = S τ + Jᵀ f,      ẋ = J q̇,   ẍ = J q̈ + J̇ q̇,
with contact coordinates and forces ordered per contact as (normal, tangential):
    x = (x_n1, x_t1, …, x_nk, x_tk),   f = (f_n1, f_t1, …).
Optional linear *physical* and *task* constraints act on z = [q̈; f] and τ (eq. 11–18).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class ContactModelError(ValueError):
    """Inconsistent model data (shapes, negative friction, unknown mode letters)."""


@dataclass(frozen=True)
class LinearConstraints:
    """Rows  eq_z z = eq_tau τ + eq_rhs  and  ineq_z z >= ineq_tau τ + ineq_rhs  on z = [q̈; f]."""

    eq_z: np.ndarray
    eq_tau: np.ndarray
    eq_rhs: np.ndarray
    ineq_z: np.ndarray
    ineq_tau: np.ndarray
    ineq_rhs: np.ndarray

    @staticmethod
    def empty(n_z: int, n_tau: int) -> LinearConstraints:
        return LinearConstraints(
            np.zeros((0, n_z)),
            np.zeros((0, n_tau)),
            np.zeros(0),
            np.zeros((0, n_z)),
            np.zeros((0, n_tau)),
            np.zeros(0),
        )

    @staticmethod
    def inequalities(ineq_z, ineq_tau, ineq_rhs) -> LinearConstraints:
        ineq_z = np.atleast_2d(np.asarray(ineq_z, float))
        ineq_tau = np.asarray(ineq_tau, float).reshape(ineq_z.shape[0], -1)
        n_z, n_tau = ineq_z.shape[1], ineq_tau.shape[1]
        return LinearConstraints(
            np.zeros((0, n_z)),
            np.zeros((0, n_tau)),
            np.zeros(0),
            ineq_z,
            ineq_tau,
            np.asarray(ineq_rhs, float).reshape(-1),
        )

    def merged(self, other: LinearConstraints) -> LinearConstraints:
        return LinearConstraints(
            np.vstack([self.eq_z, other.eq_z]),
            np.vstack([self.eq_tau, other.eq_tau]),
            np.concatenate([self.eq_rhs, other.eq_rhs]),
            np.vstack([self.ineq_z, other.ineq_z]),
            np.vstack([self.ineq_tau, other.ineq_tau]),
            np.concatenate([self.ineq_rhs, other.ineq_rhs]),
        )


@dataclass(frozen=True)
class ContactSnapshot:
    """A planar contact system evaluated at (q, q̇). Shapes: n = dim q, t = dim τ, k = contacts."""

    M: np.ndarray  # (n, n) mass matrix (may be singular for massless DOFs)
    bias: np.ndarray  # (n,) C(q, q̇) q̇ + g(q)
    S: np.ndarray  # (n, t) actuation matrix
    J: np.ndarray  # (2k, n) contact Jacobian, rows (n_1, t_1, n_2, t_2, …)
    Jdot_qdot: np.ndarray  # (2k,) J̇ q̇
    contact_velocity: np.ndarray  # (2k,) ẋ = J q̇ (passed separately so sensors may supply it)
    mu: np.ndarray  # (k,) Coulomb coefficients
    contact_names: tuple[str, ...] = ()
    physical: LinearConstraints | None = None
    task: LinearConstraints | None = None
    #: |ẋ| below these thresholds counts as zero in Table III (paper IV-C.3); per contact (normal, tangential)
    velocity_threshold: np.ndarray | None = None
    coordinate_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = self.M.shape[0]
        k = self.mu.size
        checks = {
            "M": (self.M.shape, (n, n)),
            "bias": (self.bias.shape, (n,)),
            "J": (self.J.shape, (2 * k, n)),
            "Jdot_qdot": (self.Jdot_qdot.shape, (2 * k,)),
            "contact_velocity": (self.contact_velocity.shape, (2 * k,)),
        }
        for name, (got, want) in checks.items():
            if got != want:
                raise ContactModelError(f"{name} has shape {got}, expected {want}")
        if self.S.shape[0] != n:
            raise ContactModelError(f"S has {self.S.shape[0]} rows, expected {n}")
        if np.any(self.mu < 0):
            raise ContactModelError(f"friction coefficients must be >= 0, got {self.mu}")
        if self.contact_names and len(self.contact_names) != k:
            raise ContactModelError(f"{len(self.contact_names)} contact names for {k} contacts")
        nz = n + 2 * k
        for label, cons in (("physical", self.physical), ("task", self.task)):
            if cons is not None and (cons.eq_z.shape[1] != nz or cons.ineq_z.shape[1] != nz):
                raise ContactModelError(f"{label} constraints must act on z = [q̈; f] of size {nz}")

    @property
    def n_q(self) -> int:
        return self.M.shape[0]

    @property
    def n_tau(self) -> int:
        return self.S.shape[1]

    @property
    def n_contacts(self) -> int:
        return self.mu.size

    @property
    def n_z(self) -> int:
        return self.n_q + 2 * self.n_contacts

    def thresholds(self) -> np.ndarray:
        if self.velocity_threshold is None:
            return np.full(2 * self.n_contacts, 1e-9)
        return np.asarray(self.velocity_threshold, float).reshape(2 * self.n_contacts)
