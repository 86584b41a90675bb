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
