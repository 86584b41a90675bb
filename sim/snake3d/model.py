"""Immutable description of the 3D snake (paper 000, Sec. III, V, VIII-A) and its mutable state.

The model/state split follows MuJoCo: :class:`SnakeModel` never changes during a run; :class:`SnakeState` holds the
non-minimal absolute coordinates q_i = (r_Gi, p_i) and velocities u_i = (v_Gi in I, omega_i in B_i) of eq. 4–5 as flat
arrays that the numba kernels use directly.

Frames: link i's body frame B_i has e_z along the link towards link i+1 (so link 1 is the head: the serpenoid wave
runs from link 1 to link n). Lying flat, e_y^B is vertical (the horizontal joint axis) and e_x^B horizontal.
The ground is the plane z = 0 of frame I. A slope is modelled by tilting gravity in I, which is the same physics
as tilting the plane and keeps every contact formula of the paper unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# A block of max_iterations sweeps that ends with the contact-law residual (see SnakeModel) below CONTRACTING × its
# value half-way through was converging, only slowly (Gauss–Seidel on an ill-conditioned impact, e.g. a straight chain
# with free joints landing on its end spheres: residual 2.3e-5 -> 1.5e-5 m/s from sweep 500 to 1000, converged at
# 1296): it is continued from its iterate with the same r, since a smaller r only slows such an iteration (the sweeps
# needed grow as 1/r, measured in docs/snake3d.md). Otherwise (cycling, diverging) r is halved and the block restarts
# from the warm start. Either way the total budget stays (max_retries + 1) × max_iterations sweeps.
CONTRACTING = 0.9


class SnakeModelError(ValueError):
    """A model parameter is out of range; the message names the parameter and what is allowed."""


class SimulationDivergedError(RuntimeError):
    """The state became non-finite or the contact iteration failed; carries the time and the links concerned."""

    def __init__(self, message: str, t_s: float, links: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.t_s = t_s
        self.links = links


class ContactNotConvergedError(SimulationDivergedError):
    """The prox iteration of a step failed (every r reduction and step halving tried); the state is unchanged.
    ``sweeps`` and ``reductions`` count the work spent on the failed attempt."""

    def __init__(
        self, message: str, t_s: float, links: tuple[int, ...] = (), sweeps: int = 0, reductions: int = 0
    ) -> None:
        super().__init__(message, t_s, links)
        self.sweeps = sweeps
        self.reductions = reductions


@dataclass(frozen=True)
class SnakeModel:
    """Parameters of the Aiko model. Defaults are the paper's (Sec. VIII-A) with isotropic friction μ = 0.2.

    ``prox_mode`` chooses the prox parameters r of eq. 87–89:
    * ``"local"`` (default): r_N,a = prox_scale_n / A_NN,aa etc., where A is the Delassus matrix of the step with the
      joint constraints eliminated (Studer's local choice); robust and fast;
    * ``"paper"``: the paper's absolute r_N = 0.1, r_T = 0.01, r_V = 0.05 (slow convergence, kept for fidelity).

    A step has converged when a sweep changes the impulses by less than ``tolerance`` (N s, eq. 93) or changes the
    velocity by less than ``velocity_tolerance_m_s`` in the kinetic-energy norm ‖Δu‖_M / sqrt(total mass). The second
    test is needed because resting contacts are redundant (22 spheres on 26 degrees of freedom): their impulse
    distribution is not unique and drifts slowly under the iteration while the motion has long converged.
    Either way the step is accepted only if the contact laws (eq. 87–89) then hold to ``residual_tolerance_m_s``:
    max over contacts of ‖P − prox(P − rγ)‖ / r, a velocity.

    A step that does not converge within ``max_iterations`` sweeps is retried with r halved (``max_retries`` times),
    then as two half steps, recursively down to Δt / 2^``max_step_halvings``; only then does the simulator raise.
    Each sub-step must pass the same tests, so no unconverged step is ever accepted.
    """

    n_links: int = 11
    link_length_m: float = 0.122
    link_radius_m: float = 0.0525
    sphere_offset_m: float = 0.0393
    link_mass_kg: float = 7.5 / 11.0
    inertia_transverse_kg_m2: float = 9.63e-4
    inertia_axial_kg_m2: float = 2.35e-4
    gravity_m_s2: float = 9.81
    slope_rad: float = 0.0
    slope_azimuth_rad: float = 0.0
    mu_longitudinal: float = 0.2
    mu_transversal: float = 0.2
    mu_rolling: float = 0.05
    obstacles: tuple[tuple[float, float, float], ...] = ()
    mu_obstacle: float = 0.2
    kp_h_nm_rad: float = 40.0
    kd_h_nms_rad: float = 0.2
    kp_v_nm_rad: float = 800.0
    kd_v_nms_rad: float = 0.2
    dt_s: float = 2.5e-4
    prox_mode: str = "local"
    r_n: float = 0.1
    r_t: float = 0.01
    r_v: float = 0.05
    prox_scale_n: float = 1.0
    prox_scale_t: float = 1.0
    prox_scale_v: float = 1.0
    tolerance: float = 1e-9
    velocity_tolerance_m_s: float = 1e-7
    residual_tolerance_m_s: float = 1e-5
    max_iterations: int = 1000
    max_retries: int = 4
    max_step_halvings: int = 3
    contact_inner_iterations: int = 1
    joint_pd: str = "implicit"

    def __post_init__(self) -> None:
        positive = {
            "link_length_m": self.link_length_m,
            "link_radius_m": self.link_radius_m,
            "link_mass_kg": self.link_mass_kg,
            "inertia_transverse_kg_m2": self.inertia_transverse_kg_m2,
            "inertia_axial_kg_m2": self.inertia_axial_kg_m2,
            "mu_longitudinal": self.mu_longitudinal,
            "mu_transversal": self.mu_transversal,
            "mu_rolling": self.mu_rolling,
            "mu_obstacle": self.mu_obstacle,
            "dt_s": self.dt_s,
            "r_n": self.r_n,
            "r_t": self.r_t,
            "r_v": self.r_v,
            "prox_scale_n": self.prox_scale_n,
            "prox_scale_t": self.prox_scale_t,
            "prox_scale_v": self.prox_scale_v,
            "tolerance": self.tolerance,
            "velocity_tolerance_m_s": self.velocity_tolerance_m_s,
            "residual_tolerance_m_s": self.residual_tolerance_m_s,
        }
        for name, value in positive.items():
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SnakeModelError(f"snake3d.{name}: must be a finite number > 0, got {value!r}")
        non_negative = {
            "sphere_offset_m": self.sphere_offset_m,
            "gravity_m_s2": self.gravity_m_s2,
            "kp_h_nm_rad": self.kp_h_nm_rad,
            "kd_h_nms_rad": self.kd_h_nms_rad,
            "kp_v_nm_rad": self.kp_v_nm_rad,
            "kd_v_nms_rad": self.kd_v_nms_rad,
        }
        for name, value in non_negative.items():
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise SnakeModelError(f"snake3d.{name}: must be a finite number >= 0, got {value!r}")
        if not isinstance(self.n_links, int) or self.n_links < 1:
            raise SnakeModelError(f"snake3d.n_links: must be an integer >= 1, got {self.n_links!r}")
        if self.sphere_offset_m > self.link_length_m / 2:
            raise SnakeModelError(
                f"snake3d.sphere_offset_m: must be <= link_length_m/2 = {self.link_length_m / 2}, "
                f"got {self.sphere_offset_m}"
            )
        if not (0.0 <= self.slope_rad < math.pi / 2) or not math.isfinite(self.slope_azimuth_rad):
            raise SnakeModelError(f"snake3d.slope_rad: must be in [0, pi/2), got {self.slope_rad!r}")
        for k, obstacle in enumerate(self.obstacles):
            if len(obstacle) != 3 or not all(math.isfinite(v) for v in obstacle) or obstacle[2] <= 0:
                raise SnakeModelError(
                    f"snake3d.obstacles[{k}]: must be (x_m, y_m, radius_m) with finite values and radius > 0, "
                    f"got {obstacle!r}"
                )
        if self.joint_pd not in ("explicit", "implicit"):
            raise SnakeModelError(f"snake3d.joint_pd: must be 'explicit' or 'implicit', got {self.joint_pd!r}")
        if self.prox_mode not in ("local", "paper"):
            raise SnakeModelError(f"snake3d.prox_mode: must be 'local' or 'paper', got {self.prox_mode!r}")
        integers = (
            ("max_iterations", 1),
            ("max_retries", 0),
            ("max_step_halvings", 0),
            ("contact_inner_iterations", 1),
        )
        for name, least in integers:
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise SnakeModelError(f"snake3d.{name}: must be an integer >= {least}, got {value!r}")

    @property
    def n_joints(self) -> int:
        return self.n_links - 1

    @property
    def n_contacts(self) -> int:
        """Ground contacts: two end spheres per link, 0..n-1 the front spheres, n..2n-1 the rear ones (eq. 10)."""
        return 2 * self.n_links

    @property
    def n_all_contacts(self) -> int:
        """Ground contacts, then one contact per (link, obstacle) pair: 2n + i·n_obstacles + o."""
        return 2 * self.n_links + self.n_links * len(self.obstacles)

    def obstacle_array(self) -> np.ndarray:
        """Vertical cylinders (n_obstacles, 3): centre x, y and radius (m)."""
        return np.array(self.obstacles, dtype=np.float64).reshape(len(self.obstacles), 3)

    def gravity_vector(self) -> np.ndarray:
        """Gravity in frame I; on a slope it points downhill along the azimuth direction (ground stays z = 0)."""
        s, c = math.sin(self.slope_rad), math.cos(self.slope_rad)
        a = self.slope_azimuth_rad
        return self.gravity_m_s2 * np.array([s * math.cos(a), s * math.sin(a), -c])

    def mass_diagonal(self) -> np.ndarray:
        """Diagonal of M (eq. 47–48), length 6n."""
        link = np.array(
            [self.link_mass_kg] * 3
            + [self.inertia_transverse_kg_m2, self.inertia_transverse_kg_m2, self.inertia_axial_kg_m2]
        )
        return np.tile(link, self.n_links)

    def params_array(self) -> np.ndarray:
        """Flat float64 parameter vector for the numba kernels (layout in :data:`PARAM_INDEX`)."""
        g = self.gravity_vector()
        values = {
            "L": self.link_length_m,
            "Lsc": self.link_radius_m,
            "Lgs": self.sphere_offset_m,
            "m": self.link_mass_kg,
            "th1": self.inertia_transverse_kg_m2,
            "th3": self.inertia_axial_kg_m2,
            "gx": g[0],
            "gy": g[1],
            "gz": g[2],
            "mux": self.mu_longitudinal,
            "muy": self.mu_transversal,
            "muv": self.mu_rolling,
            "dt": self.dt_s,
            "paper": 1.0 if self.prox_mode == "paper" else 0.0,
            "rn": self.r_n if self.prox_mode == "paper" else self.prox_scale_n,
            "rt": self.r_t if self.prox_mode == "paper" else self.prox_scale_t,
            "rv": self.r_v if self.prox_mode == "paper" else self.prox_scale_v,
            "tol": self.tolerance,
            "vtol": self.velocity_tolerance_m_s * math.sqrt(self.n_links * self.link_mass_kg),
            "maxit": float(self.max_iterations),
            "retries": float(self.max_retries),
            "muo": self.mu_obstacle,
            "rtol": self.residual_tolerance_m_s,
            "inner": float(self.contact_inner_iterations),
            "halvings": float(self.max_step_halvings),
            "contracting": CONTRACTING,  # passed, not imported by the kernel: numba's cache freezes such globals
            "pd_implicit": 1.0 if self.joint_pd == "implicit" else 0.0,
        }
        return np.array([values[k] for k in PARAM_NAMES], dtype=np.float64)


PARAM_NAMES = (
    "L", "Lsc", "Lgs", "m", "th1", "th3", "gx", "gy", "gz", "mux", "muy", "muv", "dt", "paper",
    "rn", "rt", "rv", "tol", "maxit", "retries", "vtol", "inner", "muo", "rtol", "halvings",
    "contracting", "pd_implicit",
)  # fmt: skip
PARAM_INDEX = {name: i for i, name in enumerate(PARAM_NAMES)}


@dataclass
class SnakeState:
    """Mutable state: positions (n,3) in I, unit quaternions (n,4) wxyz (B_i -> I), velocities (n,3) in I,
    angular velocities (n,3) in B_i, the time, and the last contact impulses per contact
    (n_all_contacts, 4: N, T1, T2, V) used to warm-start the prox iteration (Sec. VII-B)."""

    t_s: float
    position_m: np.ndarray
    quaternion: np.ndarray
    velocity_m_s: np.ndarray
    omega_body_rad_s: np.ndarray
    impulse_cache: np.ndarray

    def copy(self) -> SnakeState:
        return SnakeState(
            self.t_s,
            self.position_m.copy(),
            self.quaternion.copy(),
            self.velocity_m_s.copy(),
            self.omega_body_rad_s.copy(),
            self.impulse_cache.copy(),
        )

    def check_finite(self) -> None:
        """Raise :class:`SimulationDivergedError` naming the first link with a non-finite coordinate."""
        for name in ("position_m", "quaternion", "velocity_m_s", "omega_body_rad_s"):
            bad = np.flatnonzero(~np.all(np.isfinite(getattr(self, name)), axis=1))
            if bad.size:
                links = tuple(int(i) + 1 for i in bad)
                raise SimulationDivergedError(
                    f"snake3d diverged at t = {self.t_s:.6f} s: non-finite {name} of link(s) {list(links)}",
                    self.t_s,
                    links,
                )
