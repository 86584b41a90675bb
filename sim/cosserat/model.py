"""Rod model (immutable, precomputed) and rod state (mutable), in the MuJoCo model/data split."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.cosserat.constraints import PointConstraint
from sim.cosserat.kinematics import SweepGrid
from sim.cosserat.obstacles import CurvedTube, Cylinder, Plane
from sim.cosserat.rod import RodDescription, RodParameterError
from sim.cosserat.slack import Smoothing

STRAIGHT_STRAIN = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
BASE_MODES = ("free", "clamped")
Obstacle = Plane | Cylinder | CurvedTube


@dataclass(frozen=True, kw_only=True)
class ContactLaw:
    """The smoothed frictional contact law of m sections (m + 1 nodes), shared by a rod's obstacle contact
    (`ContactSettings`) and a rod–rod pair (`multirod.PairContact`); keyword-only, after the subclass's own fields.

    force_scale_n (σ_λ) converts the dimensionless slacks into nodal forces; by default the weight of one
    contact node's share of the rod. Gap and slip scales follow from it and the time step (σ_δ = σ_λ h²/m_node,
    σ_v = σ_λ h/m_node) so that one unit of slack moves the residual of every row by a comparable amount.

    gap_scale_m (σ_δ) and slip_scale_m_s (σ_v) override that inertial rule. They set how sharp the smoothed laws
    are in physical units: the sigmoid lets a node penetrate by up to 0.2785·σ_δ/c and creep while sticking at up
    to 0.2785·σ_v·|u_t|/c (|u_t| ≈ μΛ_n at the knee). The inertial rule suits inertia-dominated contact (a rod
    dropped on a plane); in a stiff, slow problem (a 0.3 mm rod pushed at 10 mm/s, where h²·k ≫ m_node) it gives
    σ_δ ≈ 5 mm and σ_v ≈ 2.6 m/s, i.e. smoothing widths larger than the clearance and the insertion speed.
    """

    friction_coefficient: float = 0.0
    m_sections: int = 20
    smoothing: Smoothing = field(default_factory=Smoothing)
    force_scale_n: float | None = None
    gap_scale_m: float | None = None
    slip_scale_m_s: float | None = None

    def check(self, what: str) -> None:
        """Validate the law's fields (`what` names the contact in the error)."""
        if not self.friction_coefficient >= 0:
            raise RodParameterError(f"{what} friction_coefficient must be >= 0, got {self.friction_coefficient!r}")
        if not (isinstance(self.m_sections, int) and self.m_sections >= 1):
            raise RodParameterError(f"{what} m_sections must be an integer >= 1, got {self.m_sections!r}")
        for key in ("force_scale_n", "gap_scale_m", "slip_scale_m_s"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise RodParameterError(f"{what} {key} must be > 0 (or None for the default), got {value!r}")


@dataclass(frozen=True)
class ContactSettings(ContactLaw):
    """Frictional contact of the rod's contact field with rigid obstacles:
    ``ContactSettings((Plane(),), friction_coefficient=0.5, m_sections=20, smoothing=Smoothing("sigmoid", 50))``."""

    obstacles: tuple[Obstacle, ...]

    def __post_init__(self) -> None:
        if not self.obstacles:
            raise RodParameterError("contact needs at least one obstacle")
        self.check("contact")


@dataclass(frozen=True, eq=False)
class RodModel:
    """Everything about a rod simulation that does not change during a run."""

    rod: RodDescription
    n_sections: int
    grid: SweepGrid
    xi_ref_nodes: np.ndarray  # (n+1, 6)
    stiffness: np.ndarray  # K (6(n+1) square) acting on θ
    damping: np.ndarray  # Kelvin–Voigt D acting on θ̇
    quad_inertia: np.ndarray  # (Q, 6) diagonal of ℳ at quadrature points
    contact_radius_m: np.ndarray  # (m+1,)
    gravity_m_s2: np.ndarray
    base: str
    contact: ContactSettings | None
    tip_force_n: np.ndarray  # dead load at the tip, world frame
    tip_moment_n_m: np.ndarray
    constraints: tuple[PointConstraint, ...] = ()
    constraint_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_dof(self) -> int:
        return 6 * (self.n_sections + 2)

    @property
    def free_dofs(self) -> np.ndarray:
        """Indices of q that the solver moves: all of them for a free rod, θ only for a clamped base."""
        start = 0 if self.base == "free" else 6
        return np.arange(start, self.n_dof)

    @property
    def n_contact_nodes(self) -> int:
        return 0 if self.contact is None else (self.contact.m_sections + 1) * len(self.contact.obstacles)


def build_model(
    rod: RodDescription,
    n_sections: int = 20,
    *,
    n_quadrature: int = 2,
    gravity_m_s2: tuple[float, float, float] = (0.0, 0.0, -9.81),
    base: str = "clamped",
    contact: ContactSettings | None = None,
    reference_strain: np.ndarray | None = None,
    tip_force_n: tuple[float, float, float] = (0.0, 0.0, 0.0),
    tip_moment_n_m: tuple[float, float, float] = (0.0, 0.0, 0.0),
    extra_points_m: tuple[float, ...] = (),
    constraints: tuple[PointConstraint, ...] = (),
) -> RodModel:
    """Precompute the sweep grid and the constant matrices K = ∫Φᵀ𝒦Φ and D = τK.

    reference_strain: (6,) or (n+1, 6) nodal strains of the stress-free shape (default straight, unstretched).
    constraints: point constraints along the rod (see `sim.cosserat.constraints`); their points join the sweep.
    """
    if not (isinstance(n_sections, int | np.integer) and n_sections >= 1):
        raise RodParameterError(f"n_sections must be an integer >= 1, got {n_sections!r}")
    if base not in BASE_MODES:
        raise RodParameterError(f"base must be one of {BASE_MODES}, got {base!r}")
    if not (isinstance(n_quadrature, int) and 1 <= n_quadrature <= 6):
        raise RodParameterError(f"n_quadrature must be an integer in 1..6, got {n_quadrature!r}")
    n = int(n_sections)
    m = contact.m_sections if contact is not None else 0
    constraints = tuple(constraints)
    for c in constraints:
        if not c.x_m <= rod.length_m:
            raise RodParameterError(f"constraint x_m {c.x_m} lies beyond the rod length {rod.length_m}")
    constraint_x = tuple(float(c.x_m) for c in constraints)
    grid = SweepGrid.build(rod.length_m, n, n_quadrature, m, tuple(extra_points_m) + constraint_x)
    if reference_strain is None:
        xi_ref = np.tile(STRAIGHT_STRAIN, (n + 1, 1))
    else:
        xi_ref = np.broadcast_to(np.asarray(reference_strain, dtype=float), (n + 1, 6)).copy()

    stiffness = np.zeros((6 * (n + 1), 6 * (n + 1)))
    gx, gw = np.polynomial.legendre.leggauss(4)  # exact for the r⁴ taper times the hat-function product
    h = rod.length_m / n
    for k in range(n):
        for xg, wg in zip(gx, gw, strict=True):
            t = 0.5 * (xg + 1.0)
            kd = rod.stiffness_diagonal(grid.x_nodes[k] + t * h)
            phi = np.array([1.0 - t, t])
            block = 0.5 * h * wg * np.einsum("a,b,i->aib", phi, phi, kd)
            for a in range(2):
                for b in range(2):
                    sl_a = slice(6 * (k + a), 6 * (k + a) + 6)
                    sl_b = slice(6 * (k + b), 6 * (k + b) + 6)
                    stiffness[sl_a, sl_b] += np.diag(block[a, :, b])
    quad_x = grid.x_points[grid.quad_index]
    contact_x = grid.x_points[grid.contact_index]
    return RodModel(
        rod=rod,
        n_sections=n,
        grid=grid,
        xi_ref_nodes=xi_ref,
        stiffness=stiffness,
        damping=rod.damping_time_s * stiffness,
        quad_inertia=rod.inertia_diagonal(quad_x),
        contact_radius_m=rod.radius_m(contact_x) if m else np.zeros(0),
        gravity_m_s2=np.asarray(gravity_m_s2, dtype=float),
        base=base,
        contact=contact,
        tip_force_n=np.asarray(tip_force_n, dtype=float),
        tip_moment_n_m=np.asarray(tip_moment_n_m, dtype=float),
        constraints=constraints,
        constraint_index=grid.extra_index[len(extra_points_m) :],
    )


@dataclass
class RodState:
    """Mutable state: time, generalized coordinates q = [α; θ], velocities q̇ and the contact slacks."""

    t_s: float
    q: np.ndarray
    v: np.ndarray
    slack: np.ndarray  # (n_contact_nodes, 3): [u_n, u_t1, u_t2]
    # the compiled step's Newton-matrix factors, reused by the next step of this trajectory
    # (`compiled_step.SolverCache`); a copy starts without, so a trajectory depends on its initial state only
    solver_cache: object | None = field(default=None, repr=False, compare=False)

    def copy(self) -> RodState:
        return RodState(self.t_s, self.q.copy(), self.v.copy(), self.slack.copy())


def initial_state(
    model: RodModel,
    base_rotation_vector: tuple[float, float, float] = (0.0, 0.0, 0.0),
    base_position_m: tuple[float, float, float] = (0.0, 0.0, 0.0),
    base_velocity: np.ndarray | None = None,
    theta: np.ndarray | None = None,
) -> RodState:
    """State at rest in the reference shape (or at the given θ), base at the given pose."""
    q = np.zeros(model.n_dof)
    q[0:3] = base_rotation_vector
    q[3:6] = base_position_m
    if theta is not None:
        q[6:] = theta
    v = np.zeros(model.n_dof)
    if base_velocity is not None:
        v[0:6] = base_velocity
    slack = np.zeros((model.n_contact_nodes, 3))
    slack[:, 0] = -1.0  # start separated
    return RodState(0.0, q, v, slack)
