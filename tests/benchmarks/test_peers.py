"""The peer models of benchmarks/peers/ are the same models as ours (no times are asserted here)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sim.snake3d import SnakeModel, posture_state
from sim.snake3d.kinematics import rotation_matrices

ROOT = Path(__file__).resolve().parents[2]


def _peer(model: SnakeModel, state, cone: str = "pyramidal"):
    pytest.importorskip("mujoco")
    from benchmarks.peers.mujoco_aiko import MujocoAiko

    return MujocoAiko.build(model, state, cone)


def test_mujoco_aiko_has_our_links_masses_and_joints():
    model = SnakeModel()
    peer = _peer(model, posture_state(model))
    m = peer.mj_model
    assert m.nbody - 1 == model.n_links
    assert peer.total_mass_kg() == pytest.approx(model.n_links * model.link_mass_kg, rel=1e-12)
    assert m.njnt == 1 + 2 * model.n_joints and m.nu == 2 * model.n_joints
    assert m.npair == model.n_links
    np.testing.assert_allclose(m.body_inertia[1:], [[9.63e-4, 9.63e-4, 2.35e-4]] * model.n_links)
    np.testing.assert_allclose(m.geom_size[1:, :2], [[model.link_radius_m, model.sphere_offset_m]] * model.n_links)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_mujoco_aiko_poses_match_ours_in_a_bent_posture(cone):
    """Random cardan angles: MuJoCo's link positions and orientations are ours (joint convention R_y(α_h) R_x(α_v))."""
    model = SnakeModel()
    rng = np.random.default_rng(3)
    angles = rng.uniform(-0.6, 0.6, (model.n_joints, 2))
    state = posture_state(model, angles, head_direction_rad=0.4)
    peer = _peer(model, state, cone)
    np.testing.assert_allclose(peer.mj_data.xpos[1:], state.position_m, atol=1e-12)
    np.testing.assert_allclose(peer.mj_data.xmat[1:].reshape(-1, 3, 3), rotation_matrices(state.quaternion), atol=1e-12)
    np.testing.assert_allclose(peer.joint_angles(), angles, atol=1e-12)


def test_mujoco_aiko_servo_is_our_pd_law_with_the_reference_rate():
    model = SnakeModel()
    rng = np.random.default_rng(4)
    state = posture_state(model, rng.uniform(-0.3, 0.3, (model.n_joints, 2)))
    peer = _peer(model, state)
    import mujoco

    qvel = rng.normal(0, 0.5, peer.mj_model.nv)
    peer.mj_data.qvel[:] = qvel
    ref, rate = rng.uniform(-0.5, 0.5, (model.n_joints, 2)), rng.normal(0, 1, (model.n_joints, 2))
    peer.set_references(ref, rate)
    mujoco.mj_forward(peer.mj_model, peer.mj_data)
    alpha, alpha_dot = peer.joint_angles(), qvel[6:].reshape(-1, 2)
    kp = np.array([model.kp_h_nm_rad, model.kp_v_nm_rad])
    kd = np.array([model.kd_h_nms_rad, model.kd_v_nms_rad])
    expected = kp * (ref - alpha) + kd * (rate - alpha_dot)
    np.testing.assert_allclose(peer.mj_data.actuator_force.reshape(-1, 2), expected, rtol=1e-12, atol=1e-12)


def test_mujoco_aiko_friction_is_anisotropic_along_the_link():
    """A straight snake along a diagonal: every contact's first tangent is the link axis, with μ_x, μ_y, and the
    rolling bound μ_V L_SC about it."""
    model = SnakeModel(mu_longitudinal=0.1, mu_transversal=0.5)
    peer = _peer(model, posture_state(model, head_direction_rad=0.7, height_m=-1e-4))
    d = peer.mj_data
    assert d.ncon == model.n_contacts
    axis = d.xmat[1].reshape(3, 3)[:, 2]
    frames = np.array(d.contact.frame[: d.ncon]).reshape(-1, 3, 3)
    np.testing.assert_allclose(frames[:, 0], [[0, 0, 1]] * d.ncon, atol=1e-12)
    np.testing.assert_allclose(np.abs(frames[:, 1] @ axis), 1.0, atol=1e-12)
    friction = np.array(d.contact.friction[: d.ncon])
    np.testing.assert_allclose(friction[:, :2], [[0.1, 0.5]] * d.ncon)
    assert friction[0, 3] == pytest.approx(model.mu_rolling * model.link_radius_m)
    assert math.isclose(abs(axis[2]), 0.0, abs_tol=1e-12)


def test_elastica_rod_is_our_rod():
    pytest.importorskip("elastica")
    from aiko.robots.rod_bench.experiment import load_rod_experiment
    from benchmarks.peers import elastica_rod

    scenario = load_rod_experiment(ROOT / "experiments" / "rod" / "rod_on_plane.toml")
    peer = elastica_rod.build(scenario)
    rod = scenario.model.rod
    assert peer.n_elements == scenario.model.n_sections == 20
    r0, r1 = rod.radius_base_m, rod.radius_tip_m
    mass = rod.material.density_kg_m3 * math.pi * rod.length_m * (r0 * r0 + r0 * r1 + r1 * r1) / 3
    assert peer.total_mass_kg() == pytest.approx(mass, rel=1e-3)
    x = peer.rod.position_collection
    assert np.linalg.norm(x[:, -1] - x[:, 0]) == pytest.approx(rod.length_m, rel=1e-12)
    np.testing.assert_allclose(x[:, 0], scenario.initial_state.q[3:6])
    assert x[2, -1] == pytest.approx(0.1054 - 0.3 * math.sin(math.radians(20)), abs=1e-9)  # tip just clear


def test_fastest_configuration_rule_keeps_our_outcome_and_gives_the_peer_any_finite_run():
    """Ours: the cheapest step whose distance stays within 5 % of our 0.25 ms run; MuJoCo: the cheapest finite,
    warning-free run whatever its step change; a diverged run of ours never qualifies."""
    from benchmarks.peers.compare import choose_fastest

    ours = [
        {"dt_s": 2.5e-4, "cpu_s": 0.50, "distance_m": 0.800},
        {"dt_s": 5e-4, "cpu_s": 0.27, "distance_m": 0.830},  # +3.75 %: qualifies
        {"dt_s": 1e-3, "cpu_s": 0.14, "distance_m": 0.900},  # +12.5 %: too far, although cheapest
    ]
    theirs = [
        {"dt_s": 2.5e-4, "cone": "pyramidal", "cpu_s": 0.70, "distance_m": 0.45, "ok": True},
        {"dt_s": 5e-4, "cone": "pyramidal", "cpu_s": 0.38, "distance_m": 0.56, "ok": True},  # +24 %: still counts
        {"dt_s": 1e-3, "cone": "pyramidal", "cpu_s": 0.13, "distance_m": math.nan, "ok": False},  # NaN
        {"dt_s": 2.5e-4, "cone": "elliptic", "cpu_s": 1.40, "distance_m": 0.38, "ok": True},
    ]
    best_ours, best_theirs = choose_fastest(ours, theirs)
    assert best_ours["dt_s"] == 5e-4 and best_ours["step_change"] == pytest.approx(0.0375)
    assert (best_theirs["dt_s"], best_theirs["cone"]) == (5e-4, "pyramidal")
    assert best_theirs["step_change"] == pytest.approx(0.11 / 0.45)
    ours[1]["cpu_s"] = math.inf  # that step diverged: back to the reference step
    assert choose_fastest(ours, theirs)[0]["dt_s"] == 2.5e-4


def _bench_scenario(name: str = "bench_slide", **overrides):
    from aiko.robots.rod_bench.experiment import load_rod_experiment

    return load_rod_experiment(ROOT / "experiments" / "rod" / f"{name}.toml", overrides or None)


def test_elastica_bench_base_path_is_our_base_motion():
    """The peer's prescribed base (a bisection over the knots, directors cached) is `BaseMotion.alpha`, and its rates
    are the pose's time derivative, before, inside and after the knots."""
    from benchmarks.peers.elastica_bench import BasePath, _directors, _rotation

    scenario = _bench_scenario()
    motion = scenario.base_motion
    path = BasePath(motion, scenario.initial_state.q[0:6])
    for t in np.concatenate([[-0.1, 0.0, 0.5, 2.0, 5.0, 7.0], np.random.default_rng(1).uniform(0.0, 5.0, 40)]):
        np.testing.assert_allclose(path.alpha(t), motion.alpha(t), atol=1e-15)
        position, directors = path.pose(t)
        np.testing.assert_allclose(position, motion.alpha(t)[3:6], atol=1e-15)
        np.testing.assert_allclose(directors, _directors(_rotation(motion.alpha(t)[0:3])), atol=1e-15)
    for t in (0.25, 1.2, 3.3, 6.0):  # away from the knots: the one-sided difference is the segment's slope
        h = 1e-6
        velocity, omega = path.rates(t)
        np.testing.assert_allclose(velocity, (path.alpha(t + h)[3:6] - path.alpha(t)[3:6]) / h, atol=1e-9)
        np.testing.assert_allclose(omega, 0.0)  # the bench files hold the rotation


def test_elastica_bench_base_path_turns_with_a_rotating_base():
    """ω of element 0 in its own frame, for a base turning about the world z at 0.5 rad/s (no bench file does)."""
    from benchmarks.peers.elastica_bench import BasePath, _directors, _rotation
    from sim.cosserat.scenario import BaseMotion

    motion = BaseMotion((0.0, 2.0), ((0, 0, 0.1), (0, 0, 0.1)), ((0, 0, 0), (0, 0, 1.0)))
    path = BasePath(motion, np.zeros(6))
    _, omega = path.rates(1.0)
    world = np.array([0.0, 0.0, 0.5])
    np.testing.assert_allclose(omega, _directors(_rotation(np.array([0, 0, 0.5]))) @ world, atol=1e-5)


def test_elastica_bench_is_our_composite_rod_damped_at_our_first_mode():
    pytest.importorskip("elastica")
    from benchmarks.peers import elastica_bench

    scenario = _bench_scenario("bench_stick")
    rod_d = scenario.model.rod
    peer = elastica_bench.build(scenario, 2.5e-5)
    n = peer.n_elements
    s_mid = (np.arange(n) + 0.5) / n * rod_d.length_m
    k = rod_d.stiffness_diagonal(s_mid)
    np.testing.assert_allclose(peer.rod.shear_matrix[2, 2, :], k[:, 3])  # EA, the sheath's and the core's
    m = rod_d.inertia_diagonal(s_mid)[:, 3] * rod_d.length_m / n
    assert peer.rod.mass.sum() == pytest.approx(m.sum(), rel=1e-12)
    # the damper is a rate γ (1/s) giving the first bending mode our modal damping ratio ω₁τ/2
    omega_1 = elastica_bench.first_bending_frequency_rad_s(scenario)
    assert peer.damping_rate_per_s == pytest.approx(omega_1**2 * rod_d.damping_time_s)
    assert 0.01 < peer.damping_rate_per_s / (2 * omega_1) < 1.0


def test_elastica_bench_reads_the_table_force_before_pyelastica_clears_it():
    """PyElastica zeroes the external forces at a step's end; the sampled normal force is read in the step. Free of
    the table, it is 0 (the weight taken off what was applied; a read after the step gives +weight). Pressed 1.5 cm
    into it at the start, it is the penalty law's Σ k·(r − z) over the elements whose midpoints are within a radius
    of the table (PyElastica's plane contact acts at element midpoints, ours at the contact nodes: docs/bench.md)."""
    pytest.importorskip("elastica")
    from benchmarks.peers import elastica_bench

    dt_s = 2.5e-5
    free = _bench_scenario("bench_stick", **{"run.duration_s": 0.02})
    out = elastica_bench.series(elastica_bench.build(free, dt_s), free, dt_s, 0.01)
    assert out["finite"] and len(out["t_s"]) == 2
    np.testing.assert_allclose(out["normal_force_n"], 0.0, atol=1e-9)

    z_base = 0.1929 - 0.015
    pressed = _bench_scenario(
        "bench_stick",
        **{"run.duration_s": 2 * dt_s, "initial.base_position_m": [0.0, 0.0, z_base],
           "base_motion.positions_m": [[0.0, 0.0, z_base]] * 3},
    )  # fmt: skip
    peer = elastica_bench.build(pressed, dt_s)
    rod = peer.rod
    midpoint_z = 0.5 * (rod.position_collection[2, 1:] + rod.position_collection[2, :-1])
    expected_n = elastica_bench.CONTACT_STIFFNESS_N_M * np.sum(np.clip(rod.radius - midpoint_z, 0.0, None))
    assert expected_n > 10.0  # the last elements are well inside the table
    out = elastica_bench.series(peer, pressed, dt_s, dt_s)
    assert out["normal_force_n"][0] == pytest.approx(expected_n, rel=0.02)
