"""PyElastica on the rod of ``experiments/rod/rod_on_plane.toml`` (sim/cosserat's rod_on_plane scenario).

The rod is built from *our* scenario (so the two cannot drift apart): length, tapered radius (linear from base to
tip, sampled at PyElastica's element midpoints), Young's modulus, shear modulus from the Poisson ratio, density,
gravity, a free base at the scenario's initial pose (pitched about +y, tip just clear of the plane), and the plane
with the scenario's Coulomb coefficient (static = kinetic, isotropic).

What differs by design: PyElastica discretises the rod into n straight elements (ours: n sections of a
piecewise-linear strain field), integrates explicitly (position Verlet, ``elastica.PositionVerlet``) and models the
ground as a penalty spring-damper (``RodPlaneContactWithAnisotropicFriction``: stiffness ``k``, damping ``nu``)
with regularised friction below ``slip_velocity_tol``, where ours is implicit with a complementarity contact.
PyElastica's time step is therefore bounded by stability: :data:`LARGEST_STABLE_DT_S` is the largest step found
stable by :func:`largest_stable_dt` (halving search, run ``python benchmarks/peers/elastica_rod.py --find-dt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.cosserat.scenario import Scenario

# Found by `python benchmarks/peers/elastica_rod.py --find-dt` (20 elements, k and nu below); see largest_stable_dt.
LARGEST_STABLE_DT_S = 2.34375e-4
CONTACT_STIFFNESS_N_M = 1.0e2  # per element; the rod's ~0.04 kg weight then sinks ~0.2 mm into the plane
CONTACT_DAMPING_N_S_M = 1.0e-1
SLIP_VELOCITY_TOL_M_S = 1.0e-4


def _rotation_y(angle_rad: float) -> np.ndarray:
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


@dataclass
class ElasticaRod:
    """A PyElastica simulator holding the rod and the plane, ready to integrate."""

    simulator: object
    rod: object
    n_elements: int

    def total_mass_kg(self) -> float:
        return float(np.sum(self.rod.mass))


def build(scenario: Scenario, n_elements: int | None = None, dt_s: float = LARGEST_STABLE_DT_S) -> ElasticaRod:
    """The rod on its plane in PyElastica (see the module docstring). With the scenario's ``rod.damping_time_s`` > 0
    the rod gets PyElastica's ``AnalyticalLinearDamper`` at the rate of `damping_rate_per_s` (its time step
    ``dt_s``: the damper is exact for that step only)."""
    import elastica as ea

    model = scenario.model
    rod_d = model.rod
    n = n_elements or model.n_sections
    q0 = scenario.initial_state.q
    rotation_vector = q0[0:3]
    if abs(rotation_vector[0]) > 0 or abs(rotation_vector[2]) > 0:
        raise ValueError("the PyElastica peer rebuilds a base rotation about +y only (rod_on_plane)")
    R = _rotation_y(rotation_vector[1])
    start = q0[3:6].copy()
    direction = R @ np.array([1.0, 0.0, 0.0])  # our rod's reference axis is the base frame's e_x
    normal = R @ np.array([0.0, 0.0, 1.0])
    s_mid = (np.arange(n) + 0.5) / n
    radius = rod_d.radius_base_m + (rod_d.radius_tip_m - rod_d.radius_base_m) * s_mid
    material = rod_d.material
    shear_modulus = material.young_modulus_pa / (2.0 * (1.0 + material.poisson_ratio))

    class RodOnPlane(ea.BaseSystemCollection, ea.Forcing, ea.Contact, ea.Damping):
        pass

    sim = RodOnPlane()
    rod = ea.CosseratRod.straight_rod(
        n, start, direction, normal, rod_d.length_m, radius, material.density_kg_m3,
        youngs_modulus=material.young_modulus_pa, shear_modulus=shear_modulus,
    )  # fmt: skip
    sim.append(rod)
    sim.add_forcing_to(rod).using(ea.GravityForces, acc_gravity=np.asarray(model.gravity_m_s2, dtype=float))
    contact = model.contact
    plane = contact.obstacles[0]
    ground = ea.Plane(plane_origin=np.asarray(plane.point_m, dtype=float), plane_normal=np.asarray(plane.normal))
    sim.append(ground)
    mu = np.full(3, contact.friction_coefficient)  # forward, backward, sideways
    sim.detect_contact_between(rod, ground).using(
        ea.RodPlaneContactWithAnisotropicFriction,
        k=CONTACT_STIFFNESS_N_M,
        nu=CONTACT_DAMPING_N_S_M,
        slip_velocity_tol=SLIP_VELOCITY_TOL_M_S,
        static_mu_array=mu,
        kinetic_mu_array=mu,
    )
    gamma = damping_rate_per_s(scenario)
    if gamma > 0:
        sim.dampen(rod).using(ea.AnalyticalLinearDamper, uniform_damping_constant=gamma, time_step=dt_s)
    sim.finalize()
    return ElasticaRod(sim, rod, n)


def damping_rate_per_s(scenario: Scenario) -> float:
    """PyElastica's nearest damper to our Kelvin–Voigt ``rod.damping_time_s`` τ (0 without it): the uniform rate
    γ = ω₁²τ (v ← v·exp(−γ dt)) damps the first bending mode as ours does (our modal rate ζω = ω²τ/2; a velocity
    damper's amplitude rate γ/2). What differs: ours damps each mode ω at ω²τ/2, the higher ones more; PyElastica's
    damps every velocity at the one rate, the rod's fall and slide included, which ours never damps."""
    tau = scenario.model.rod.damping_time_s
    if tau <= 0:
        return 0.0
    from benchmarks.peers.elastica_bench import first_bending_frequency_rad_s

    return first_bending_frequency_rad_s(scenario) ** 2 * tau


def run(scenario: Scenario, duration_s: float, dt_s: float = LARGEST_STABLE_DT_S) -> dict:
    """Integrate for ``duration_s``; returns the end state summary (tip position, finiteness)."""
    import time

    import elastica as ea

    peer = build(scenario, dt_s=dt_s)
    stepper = ea.PositionVerlet()
    n_steps = int(round(duration_s / dt_s))
    t = 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n_steps):
        t = stepper.step(peer.simulator, t, dt_s)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    x = peer.rod.position_collection
    finite = bool(np.all(np.isfinite(x)))
    return {
        "simulator": "pyelastica",
        "dt_s": dt_s,
        "sim_time_s": n_steps * dt_s,
        "wall_time_s": wall,
        "cpu_time_s": cpu,
        "tip_m": x[:, -1].tolist(),
        "min_height_m": float(np.min(x[2])) if finite else math.nan,
        "finite": finite,
    }


def tip_path(scenario: Scenario, dt_s: float, n_steps: int) -> dict:
    """The tip (last node) after every one of ``n_steps`` steps of dt_s, with the CPU time of the stepping only
    (``time.process_time`` around each step: the recording is not counted; the bracketing adds ~1-3 %)."""
    import time

    import elastica as ea

    peer = build(scenario, dt_s=dt_s)
    stepper = ea.PositionVerlet()
    tips, t, cpu = np.empty((n_steps, 3)), 0.0, 0.0
    for k in range(n_steps):
        start = time.process_time()
        t = stepper.step(peer.simulator, t, dt_s)
        cpu += time.process_time() - start
        tips[k] = peer.rod.position_collection[:, -1]
    return {"tips_m": tips, "cpu_s": cpu, "steps": n_steps}


def stable(result: dict, length_m: float) -> bool:
    """Finite, not sunk through the plane and not blown up (every node within two rod lengths of the origin)."""
    return result["finite"] and result["min_height_m"] > -0.01 and abs(result["tip_m"][0]) < 2 * length_m


def largest_stable_dt(scenario: Scenario, duration_s: float, dt_start_s: float = 1e-3, bisections: int = 4) -> float:
    """Halve dt from ``dt_start_s`` until a run of ``duration_s`` stays :func:`stable`, then bisect between the last
    unstable and the first stable step ``bisections`` times; returns the largest stable step met."""
    length = scenario.model.rod.length_m
    dt = dt_start_s
    while not stable(run(scenario, duration_s, dt), length):
        dt /= 2
        if dt < 1e-8:
            raise RuntimeError("no stable time step found")
    good, bad = dt, 2 * dt
    for _ in range(bisections if good < dt_start_s else 0):
        mid = 0.5 * (good + bad)
        good, bad = (mid, bad) if stable(run(scenario, duration_s, mid), length) else (good, mid)
    return good


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from aiko.robots.rod_bench.experiment import load_rod_experiment

    scen = load_rod_experiment(root / "experiments" / "rod" / "rod_on_plane.toml")
    if "--find-dt" in sys.argv:
        print(json.dumps({"largest_stable_dt_s": largest_stable_dt(scen, scen.duration_s)}))
    else:
        print(json.dumps(run(scen, scen.duration_s)))
