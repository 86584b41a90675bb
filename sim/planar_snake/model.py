"""Planar n-link snake of Liljebäck et al. (paper 001, eq. 3–12): parameters, kinematics and dynamics terms.

Generalised coordinates q = (θ_1..θ_n, p_x, p_y): absolute link angles and the centre of mass. Link i+1 lies
ahead of link i along its tangent (x_{i+1} − x_i = l cos θ_i + l cos θ_{i+1}), so link n is the head.
Joint angle φ_i = θ_i − θ_{i+1} (φ = D θ); the joint torque u enters as Dᵀu.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["PlanarSnakeError", "PlanarSnakeModel", "link_centres", "link_jacobians", "mass_matrix"]


class PlanarSnakeError(ValueError):
    """Invalid model parameters or state (names the offending field and the allowed range)."""


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0.0:
        raise PlanarSnakeError(f"{name} must be a positive finite number, got {value!r}")
    return value


@dataclass(frozen=True)
class PlanarSnakeModel:
    """Immutable description: robot, ground, obstacles, joint servos and integration settings.

    The paper's values are the defaults (n = 10, l = 0.07 m, m = 1 kg, J = 0.0016 kg m², μ = 0.3, μ_o = 0.2).
    Obstacles are circles (eq. 13): ``obstacle_centres_m`` (k, 2), ``obstacle_radii_m`` (k,).
    """

    n_links: int = 10
    link_half_length_m: float = 0.07
    link_mass_kg: float = 1.0
    link_inertia_kgm2: float = 0.0016
    ground_mu: float = 0.3
    obstacle_mu: float = 0.2
    gravity_m_s2: float = 9.81
    obstacle_centres_m: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    obstacle_radii_m: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # joint servo (PD on the joint angle, torque saturated): how references become the torques u of eq. 9
    joint_kp_nm_rad: float = 20.0
    joint_kd_nms_rad: float = 1.0
    joint_torque_limit_nm: float = 10.0
    time_step_s: float = 1e-3
    # a contacted link whose gap opens beyond this has left the obstacle (eq. 40). A margin of 1 µm, not 0:
    # links that separate by less and come back are not counted (and paid for) as new impacts every step.
    detach_gap_m: float = 1e-6
    check_p_matrix: bool = True

    def __post_init__(self) -> None:
        if int(self.n_links) != self.n_links or self.n_links < 2:
            raise PlanarSnakeError(f"n_links must be an integer >= 2, got {self.n_links!r}")
        for name in (
            "link_half_length_m",
            "link_mass_kg",
            "link_inertia_kgm2",
            "gravity_m_s2",
            "time_step_s",
        ):
            _positive(name, getattr(self, name))
        for name in ("joint_kp_nm_rad", "joint_kd_nms_rad", "joint_torque_limit_nm", "detach_gap_m"):
            _positive(name, getattr(self, name))
        for name in ("ground_mu", "obstacle_mu"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise PlanarSnakeError(f"{name} must lie in [0, 1], got {v!r}")
        centres = np.asarray(self.obstacle_centres_m, dtype=float).reshape(-1, 2)
        radii = np.asarray(self.obstacle_radii_m, dtype=float).reshape(-1)
        if centres.shape[0] != radii.shape[0]:
            raise PlanarSnakeError(
                f"obstacle_centres_m has {centres.shape[0]} rows but obstacle_radii_m has {radii.shape[0]}"
            )
        if np.any(radii <= 0.0) or not np.all(np.isfinite(centres)):
            raise PlanarSnakeError("obstacle radii must be positive and centres finite")
        centres.setflags(write=False)
        radii.setflags(write=False)
        object.__setattr__(self, "obstacle_centres_m", centres)
        object.__setattr__(self, "obstacle_radii_m", radii)
        n = self.n_links
        A = np.eye(n - 1, n) + np.eye(n - 1, n, 1)
        D = np.eye(n - 1, n) - np.eye(n - 1, n, 1)
        DDt_inv = np.linalg.inv(D @ D.T)
        N = A.T @ DDt_inv @ D
        V = A.T @ DDt_inv @ A
        impulse = self.link_mass_kg * self.gravity_m_s2 * self.ground_mu * self.time_step_s
        limits = (np.full(n, impulse), np.full(n, 0.5 * impulse * self.link_half_length_m))
        object.__setattr__(self, "_ground_impulse_limits", limits)  # per step: μ m g h and μ m g l h / 2
        k = radii.size
        pair_links = np.repeat(np.arange(n, dtype=np.int64), k)  # every (link, obstacle) pair, link-major
        pair_obstacles = np.tile(np.arange(k, dtype=np.int64), n)
        for name, mat in (("A", A), ("D", D), ("N", N), ("V", V), ("Nt", N.T.copy()),
                          ("pair_links", pair_links), ("pair_obstacles", pair_obstacles)):  # fmt: skip
            mat.setflags(write=False)
            object.__setattr__(self, "_" + name, mat)

    # Structural matrices of eq. 3–10 (read-only).
    @property
    def A(self) -> np.ndarray:
        return self._A  # type: ignore[attr-defined]

    @property
    def D(self) -> np.ndarray:
        return self._D  # type: ignore[attr-defined]

    @property
    def N(self) -> np.ndarray:
        return self._N  # type: ignore[attr-defined]

    @property
    def V(self) -> np.ndarray:
        return self._V  # type: ignore[attr-defined]

    @property
    def n_dof(self) -> int:
        return self.n_links + 2

    @property
    def total_mass_kg(self) -> float:
        return self.n_links * self.link_mass_kg

    def with_obstacles(self, centres_m: np.ndarray, radii_m: np.ndarray) -> PlanarSnakeModel:
        from dataclasses import replace

        return replace(self, obstacle_centres_m=centres_m, obstacle_radii_m=radii_m)


def link_centres(model: PlanarSnakeModel, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Link CM coordinates (eq. 5): x = −l Nᵀ cos θ + e p_x, y = −l Nᵀ sin θ + e p_y."""
    n, l = model.n_links, model.link_half_length_m
    theta = q[:n]
    Nt = model._Nt  # type: ignore[attr-defined]
    return -l * Nt @ np.cos(theta) + q[n], -l * Nt @ np.sin(theta) + q[n + 1]


def link_jacobians(model: PlanarSnakeModel, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Jx, Jy), each (n, n+2): link CM velocities ẋ = Jx q̇, ẏ = Jy q̇ (eq. 6)."""
    n, l = model.n_links, model.link_half_length_m
    theta = q[:n]
    Nt = model._Nt  # type: ignore[attr-defined]
    Jx = np.zeros((n, n + 2))
    Jy = np.zeros((n, n + 2))
    Jx[:, :n] = l * Nt * np.sin(theta)[None, :]
    Jy[:, :n] = -l * Nt * np.cos(theta)[None, :]
    Jx[:, n] = 1.0
    Jy[:, n + 1] = 1.0
    return Jx, Jy


def link_acceleration_bias(model: PlanarSnakeModel, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Velocity-product part of the link CM accelerations: ẍ = Jx q̈ + bx, ÿ = Jy q̈ + by (differentiate eq. 6)."""
    n, l = model.n_links, model.link_half_length_m
    theta, w2 = q[:n], qd[:n] ** 2
    Nt = model._Nt  # type: ignore[attr-defined]
    return l * Nt @ (np.cos(theta) * w2), l * Nt @ (np.sin(theta) * w2)


def mass_matrix(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    """M(q) of eq. 12 with M_θ = J I + m l² (S V S + C V C) (eq. 10)."""
    n, l, m = model.n_links, model.link_half_length_m, model.link_mass_kg
    s, c = np.sin(q[:n]), np.cos(q[:n])
    V = model.V
    M = np.zeros((n + 2, n + 2))
    M[:n, :n] = model.link_inertia_kgm2 * np.eye(n) + m * l * l * (s[:, None] * V * s[None, :] + c[:, None] * V * c)
    M[n, n] = M[n + 1, n + 1] = n * m
    return M


def coriolis_force(model: PlanarSnakeModel, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """Velocity-product generalised force [W θ̇²; 0; 0] with W = m l² (C V S − S V C) (eq. 9–10)."""
    n, l, m = model.n_links, model.link_half_length_m, model.link_mass_kg
    s, c = np.sin(q[:n]), np.cos(q[:n])
    V = model.V
    W = m * l * l * (c[:, None] * V * s[None, :] - s[:, None] * V * c[None, :])
    out = np.zeros(n + 2)
    out[:n] = W @ (qd[:n] ** 2)
    return out


def kinetic_energy(model: PlanarSnakeModel, q: np.ndarray, qd: np.ndarray) -> float:
    return 0.5 * float(qd @ mass_matrix(model, q) @ qd)


def joint_angles(model: PlanarSnakeModel, q: np.ndarray) -> np.ndarray:
    """φ = D θ (φ_i = θ_i − θ_{i+1})."""
    return model.D @ q[: model.n_links]


def state_from_joint_angles(
    model: PlanarSnakeModel, joint_angles_rad: np.ndarray, head_angle_rad: float, com_m=(0.0, 0.0)
) -> np.ndarray:
    """q from joint angles, the head link's absolute angle θ_n and the CM position."""
    n = model.n_links
    phi = np.asarray(joint_angles_rad, dtype=float)
    if phi.shape != (n - 1,):
        raise PlanarSnakeError(f"joint_angles_rad must have {n - 1} entries, got shape {phi.shape}")
    theta = np.empty(n)
    theta[-1] = head_angle_rad
    for i in range(n - 2, -1, -1):
        theta[i] = theta[i + 1] + phi[i]
    return np.concatenate([theta, np.asarray(com_m, dtype=float)])
