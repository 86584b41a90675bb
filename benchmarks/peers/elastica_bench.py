"""PyElastica on the soft-rod bench's stick and slide tests (``experiments/rod/bench_{stick,slide}.toml``).

The rod is built from *our* scenario so the two cannot drift apart:

* **the composite rod** (silicone sheath with the taper, steel core): PyElastica builds a homogeneous rod from a radius
  and one material; its per-element stiffness and inertia arrays are then overwritten with ours, element by element
  at the element midpoints: ``bend_matrix`` = diag(E I, E I, G J) (at the Voronoi points), ``shear_matrix`` =
  diag(G A, G A, E A) (no shear correction factor, as ours), node masses from ρA per element, and the elements'
  mass second moments ρ·diag(I, I, J)·ℓ, all from `RodDescription.stiffness_diagonal` / `inertia_diagonal` (Σ over
  sheath and core, the parallel rule);
* **the base** prescribed over time as the UR3 moves it: node 0 and element 0's directors follow the scenario's
  `[base_motion]` (position and rotation vector, linear between the knots, as ours), with the matching velocities;
* **the table**: ``RodPlaneContactWithAnisotropicFriction`` (a penalty plane: stiffness ``k``, damping ``nu``,
  friction regularised below ``slip_velocity_tol``) with the file's μ as both static and kinetic coefficient;
* **damping**: ours is Kelvin–Voigt on the strain rates (τ·𝒦·ξ̇, modal damping ratio ζ = ωτ/2); PyElastica's
  ``AnalyticalLinearDamper`` damps absolute velocities (ζ = γ/(2ω) for a rate γ). γ is set so the first bending
  mode of the clamped rod has ours' ζ (γ = ω₁²τ). What differs: ours damps higher modes more (ζ ∝ ω), PyElastica's
  less (ζ ∝ 1/ω) and it also damps rigid motion, which our clamped, slowly pressed rod barely has.

PyElastica integrates explicitly (position Verlet): its step is bounded by stability (`largest_stable_dt`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from sim.cosserat.scenario import BaseMotion, Scenario

CONTACT_STIFFNESS_N_M = 2.0e3  # per node: the ~3 N of the press sink the tip by ~1.5 mm at most
CONTACT_DAMPING_N_S_M = 2.0
SLIP_VELOCITY_TOL_M_S = 1.0e-4


def _rotation(rotation_vector: np.ndarray) -> np.ndarray:
    theta = float(np.linalg.norm(rotation_vector))
    if theta < 1e-12:
        return np.eye(3)
    k = rotation_vector / theta
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(theta) * kx + (1.0 - math.cos(theta)) * kx @ kx


def _directors(R: np.ndarray) -> np.ndarray:
    """PyElastica's directors (rows d1, d2, d3) of our section frame R: d3 the tangent (our local x), d1 = R e_z."""
    d3 = R[:, 0]
    d1 = R[:, 2]
    return np.stack([d1, np.cross(d3, d1), d3])


class BasePath:
    """The scenario's base pose and rates as PyElastica's constraint asks for them (several times a step).

    The knots are arrays built once, a segment is found by bisection, and the directors are recomputed only when the
    rotation vector changes (both bench files hold it constant). Interpolating with `BaseMotion.alpha` and building the
    directors with numpy on every call was ~70 % of the peer's step in a profile: the comparison would have charged
    PyElastica for our bookkeeping."""

    def __init__(self, motion: BaseMotion | None, alpha0: np.ndarray) -> None:
        if motion is None:
            self.times_s = [0.0]
            self.alphas = np.asarray(alpha0, dtype=float)[None, :].copy()
        else:
            rotations = np.zeros((len(motion.times_s), 3)) if motion.rotation_vectors_rad is None else (
                np.asarray(motion.rotation_vectors_rad, dtype=float))  # fmt: skip
            self.times_s = [float(t) for t in motion.times_s]
            self.alphas = np.hstack([rotations, np.asarray(motion.positions_m, dtype=float)])
        self._rotation_vector = np.full(3, np.nan)
        self._directors = np.eye(3)

    def _segment(self, t_s: float) -> int:
        """Index i of the segment [t_i, t_i+1) holding t_s; -1 before the first knot, the last index after the last."""
        return bisect.bisect_right(self.times_s, t_s) - 1

    def alpha(self, t_s: float) -> np.ndarray:
        i = self._segment(t_s)
        if i < 0:
            return self.alphas[0]
        if i >= len(self.times_s) - 1:
            return self.alphas[-1]
        w = (t_s - self.times_s[i]) / (self.times_s[i + 1] - self.times_s[i])
        return (1.0 - w) * self.alphas[i] + w * self.alphas[i + 1]

    def pose(self, t_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Position of node 0 and element 0's directors (rows) at t_s."""
        alpha = self.alpha(t_s)
        if not np.array_equal(alpha[0:3], self._rotation_vector):
            self._rotation_vector = alpha[0:3].copy()
            self._directors = _directors(_rotation(self._rotation_vector))
        return alpha[3:6], self._directors

    def rates(self, t_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Velocity of node 0 (world) and angular velocity of element 0 (its own frame) at t_s."""
        i = self._segment(t_s)
        if i < 0 or i >= len(self.times_s) - 1:
            return np.zeros(3), np.zeros(3)
        slope = (self.alphas[i + 1] - self.alphas[i]) / (self.times_s[i + 1] - self.times_s[i])
        if not np.any(slope[0:3]):
            return slope[3:6], np.zeros(3)
        h = 1e-6  # a turning base (neither bench file has one): ω from Q̇ Qᵀ = −ω̃ (rows map world → local)
        d0 = _directors(_rotation(self.alpha(t_s)[0:3]))
        d1 = _directors(_rotation(self.alpha(t_s + h)[0:3]))
        w = -(d1 - d0) @ d0.T / h
        return slope[3:6], np.array([w[2, 1], w[0, 2], w[1, 0]])


class _Recorder:
    """What `series` asks the callback to do on its sampled steps (set before the run)."""

    def __init__(self) -> None:
        self.every = 1
        self.record = None  # record(system, step): called on the steps that are a multiple of ``every``


def _forward_class():
    import elastica as ea

    class Forward(ea.CallBackBaseClass):
        """PyElastica's callback, forwarding the sampled steps to the recorder."""

        def __init__(self, recorder: _Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        def make_callback(self, system, time, current_step: int) -> None:
            r = self.recorder
            if r.record is not None and current_step % r.every == 0:  # current_step: PyElastica's round(t / dt)
                r.record(system, current_step)

    return Forward


@dataclass
class ElasticaBench:
    simulator: object
    rod: object
    n_elements: int
    damping_rate_per_s: float
    recorder: _Recorder


def first_bending_frequency_rad_s(scenario: Scenario) -> float:
    """ω₁ of the clamped rod (`sim.cosserat.modes`)."""
    from sim.cosserat.modes import vibration_modes

    modes = vibration_modes(scenario.model, scenario.initial_state.q)
    return float(modes.omega_rad_s[0])


def build(scenario: Scenario, dt_s: float, n_elements: int | None = None) -> ElasticaBench:
    """The bench scenario in PyElastica (see the module docstring); dt_s is the damper's time step."""
    import elastica as ea

    model = scenario.model
    rod_d = model.rod
    n = n_elements or model.n_sections
    q0 = scenario.initial_state.q
    R0 = _rotation(q0[0:3])
    start = q0[3:6].copy()
    length = rod_d.length_m
    s_mid = (np.arange(n) + 0.5) / n * length
    s_vor = np.arange(1, n) / n * length
    radius = rod_d.radius_m(s_mid)
    rho = rod_d.material.density_kg_m3
    shear_modulus = rod_d.material.young_modulus_pa / (2.0 * (1.0 + rod_d.material.poisson_ratio))

    class Bench(ea.BaseSystemCollection, ea.Constraints, ea.Forcing, ea.Contact, ea.Damping, ea.CallBacks):
        pass

    sim = Bench()
    rod = ea.CosseratRod.straight_rod(
        n, start, R0[:, 0], R0[:, 2], length, radius, rho,
        youngs_modulus=rod_d.material.young_modulus_pa, shear_modulus=shear_modulus,
    )  # fmt: skip
    # the composite section (ours' per-length diagonals: [GJ, EI, EI, EA, GA, GA] and ρ[J, I, I, A, A, A])
    k_mid = rod_d.stiffness_diagonal(s_mid)
    k_vor = rod_d.stiffness_diagonal(s_vor)
    m_mid = rod_d.inertia_diagonal(s_mid)
    element_length = length / n
    for e in range(n):
        rod.shear_matrix[:, :, e] = np.diag([k_mid[e, 4], k_mid[e, 5], k_mid[e, 3]])
        inertia = np.diag([m_mid[e, 1], m_mid[e, 2], m_mid[e, 0]]) * element_length
        rod.mass_second_moment_of_inertia[:, :, e] = inertia
        rod.inv_mass_second_moment_of_inertia[:, :, e] = np.linalg.inv(inertia)
    for v in range(n - 1):
        rod.bend_matrix[:, :, v] = np.diag([k_vor[v, 1], k_vor[v, 2], k_vor[v, 0]])
    element_mass = m_mid[:, 3] * element_length
    rod.mass[:] = 0.0
    rod.mass[:-1] += 0.5 * element_mass
    rod.mass[1:] += 0.5 * element_mass
    sim.append(rod)

    path = BasePath(scenario.base_motion, q0[0:6])

    class PrescribedBase(ea.ConstraintBase):
        """Node 0 and element 0 follow the base pose of the scenario's [base_motion] (held after its last knot)."""

        def constrain_values(self, system, time) -> None:
            position, directors = path.pose(float(time))
            system.position_collection[:, 0] = position
            system.director_collection[:, :, 0] = directors

        def constrain_rates(self, system, time) -> None:
            velocity, omega = path.rates(float(time))
            system.velocity_collection[:, 0] = velocity
            system.omega_collection[:, 0] = omega

    sim.constrain(rod).using(PrescribedBase, constrained_position_idx=(0,), constrained_director_idx=(0,))
    sim.add_forcing_to(rod).using(ea.GravityForces, acc_gravity=np.asarray(model.gravity_m_s2, dtype=float))
    contact = model.contact
    plane = contact.obstacles[0]
    ground = ea.Plane(plane_origin=np.asarray(plane.point_m, dtype=float), plane_normal=np.asarray(plane.normal))
    sim.append(ground)
    mu = np.full(3, contact.friction_coefficient)
    sim.detect_contact_between(rod, ground).using(
        ea.RodPlaneContactWithAnisotropicFriction,
        k=CONTACT_STIFFNESS_N_M,
        nu=CONTACT_DAMPING_N_S_M,
        slip_velocity_tol=SLIP_VELOCITY_TOL_M_S,
        static_mu_array=mu,
        kinetic_mu_array=mu,
    )
    gamma = 0.0
    if rod_d.damping_time_s > 0:
        gamma = first_bending_frequency_rad_s(scenario) ** 2 * rod_d.damping_time_s
        sim.dampen(rod).using(
            ea.AnalyticalLinearDamper,
            uniform_damping_constant=gamma,  # a rate (1/s): v ← v·exp(−γ dt); the "translational" constant is N·s/m
            time_step=dt_s,
        )
    recorder = _Recorder()
    sim.collect_diagnostics(rod).using(_forward_class(), recorder=recorder)
    sim.finalize()
    return ElasticaBench(sim, rod, n, gamma, recorder)


def series(peer: ElasticaBench, scenario: Scenario, dt_s: float, sample_every_s: float) -> dict:
    """Run the scenario's duration; every ``sample_every_s`` the bench quantities (`benchmarks.peers.bench_accuracy`):
    the bending curvature about the section's d2 axis at the interior nodes, the table's total normal force and the
    tip's slide in the table plane.

    The normal force is read where PyElastica still holds it: its stepper zeroes the external forces at the end of a
    step, after the callbacks, so a recorder reads them *in* the step (they are the contact forces plus the weight
    applied at the step's force evaluation; the weight is taken off). The recorder runs after each step only on the
    sampled ones; the time counted is the stepping, recorder included (~1 µs on an unsampled step)."""
    import time

    import elastica as ea

    rod = peer.rod
    weight_z = rod.mass * float(np.asarray(scenario.model.gravity_m_s2)[2])
    n_steps = int(round(scenario.duration_s / dt_s))
    every = max(1, int(round(sample_every_s / dt_s)))
    samples: dict[str, list] = {"t_s": [], "kappa": [], "normal_force_n": [], "tip_slide_m": []}
    tip0 = rod.position_collection[0:2, -1].copy()
    stepper = ea.PositionVerlet()

    def record(system, step: int) -> None:
        samples["t_s"].append(step * dt_s)
        samples["kappa"].append(system.kappa[1].copy())
        samples["normal_force_n"].append(float(np.sum(system.external_forces[2]) - np.sum(weight_z)))
        samples["tip_slide_m"].append(float(np.linalg.norm(system.position_collection[0:2, -1] - tip0)))

    peer.recorder.record = record
    peer.recorder.every = every
    t, cpu = 0.0, 0.0
    for _ in range(1, n_steps + 1):
        start = time.process_time()
        t = stepper.step(peer.simulator, t, dt_s)
        cpu += time.process_time() - start
    finite = bool(np.all(np.isfinite(rod.position_collection)))
    out: dict = {key: np.asarray(value) for key, value in samples.items()}
    out.update({"cpu_s": cpu, "steps": n_steps, "finite": finite})
    return out
