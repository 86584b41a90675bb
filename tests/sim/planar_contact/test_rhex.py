"""Planar RHex: the compliant benchmark's physics checks and the rigid massless-hip model's signs."""

import numpy as np
import pytest

from sim.planar_contact import modes_consistent_with
from sim.planar_contact.rhex.compliant import CompliantRHex, advance, pack_parameters
from sim.planar_contact.rhex.flip import initial_state, observe
from sim.planar_contact.rhex.params import RHexParameters
from sim.planar_contact.rhex.rigid import RigidObservation, rigid_snapshot

P = RHexParameters()


def hold(sim, s, phi_target, duration_s, kp=40.0, kd=1.0):
    for _ in range(int(round(duration_s / 0.001))):
        _, phi, rate = sim.leg_geometry(s)
        sim.step(s, -kp * (phi - phi_target) - kd * rate, 0.001)


def test_standing_leg_compression_is_weight_over_three_springs():
    sim = CompliantRHex(P)
    s = sim.state_from_pose(0.0, P.leg_length_m, 0.0, [-np.pi / 2] * 3)
    hold(sim, s, -np.pi / 2, 1.0)
    length, _, _ = sim.leg_geometry(s)
    compression = P.leg_length_m - length
    expected = P.weight_N / (3 * P.leg_stiffness_N_m)  # 83.4 N / 15000 N/m = 5.56 mm
    assert expected == pytest.approx(5.56e-3, abs=0.01e-3)
    assert compression.mean() == pytest.approx(expected, rel=1e-3)
    # hips are not symmetric about the centre of mass: statics gives the split, each within 15 %
    assert np.all(np.abs(compression / expected - 1.0) < 0.15)
    assert np.abs(s.vel).max() < 1e-4  # at rest


def test_free_fall_at_g():
    sim = CompliantRHex(P)
    s = sim.state_from_pose(0.0, 2.0, 0.3, [-np.pi / 2] * 3)
    v0 = s.vel[1]
    hold(sim, s, sim.leg_geometry(s)[1], 0.2)
    assert (s.vel[1] - v0) / 0.2 == pytest.approx(-P.gravity_m_s2, rel=1e-6)
    assert np.allclose(s.vel[4:9:2], s.vel[1], atol=1e-6)  # toes fall with the body


def test_energy_is_conserved_in_flight_without_damping():
    from dataclasses import replace

    p = replace(P, leg_damping_Ns_m=0.0)
    sim = CompliantRHex(p)
    s = sim.state_from_pose(0.0, 2.0, 0.0, [-np.pi / 2, -1.2, -2.0])
    s.vel[:] = np.array([0.3, 0.5, 2.0, 0.0, 0.0, 0.4, 0.0, -0.2, 0.1])
    e0 = sim.system_energy_J(s)
    for _ in range(20):
        sim.step(s, np.zeros(3), 0.005)
    assert sim.system_energy_J(s) == pytest.approx(e0, rel=2e-3)  # symplectic Euler: bounded error


def test_compiled_step_matches_plain_python_reference():
    sim = CompliantRHex(P)
    s = initial_state(sim, settle_s=0.05)
    pos1, vel1, pos2, vel2 = s.pos.copy(), s.vel.copy(), s.pos.copy(), s.vel.copy()
    prm = pack_parameters(P)
    tau = np.array([-6.0, -4.0, -5.0])
    tn1, cn1, tn2, cn2 = np.zeros(3), np.zeros(4), np.zeros(3), np.zeros(4)
    advance(pos1, vel1, tau, prm, 2e-5, 300, tn1, cn1)
    advance.py_func(pos2, vel2, tau, prm, 2e-5, 300, tn2, cn2)
    assert np.allclose(pos1, pos2, atol=1e-12) and np.allclose(vel1, vel2, atol=1e-9)
    assert np.allclose(tn1, tn2, atol=1e-6) and np.allclose(cn1, cn2, atol=1e-6)


def _obs(alpha=0.1, phi=(-0.4, -0.5, -0.6), body=True, vel=(0.0, 0.0, 0.0), phid=(0.0, 0.0, 0.0)):
    p = P
    y = 0.0
    # place the body so the rear-bottom corner touches the ground
    z = p.half_length_m * np.sin(alpha) + p.half_height_m * np.cos(alpha)
    return RigidObservation(
        np.array([y, z, alpha]),
        np.array(vel, float),
        np.array(phi),
        np.array(phid, float),
        np.array([True, True, True]),
        body,
    )


def test_rigid_contact_jacobian_matches_finite_differences():
    obs = _obs(vel=(0.1, -0.05, 0.7), phid=(0.3, -0.2, 0.5))
    snap, layout = rigid_snapshot(P, obs)

    def toe_positions(q):
        y, z, a = q[:3]
        out = []
        for j, i in enumerate(layout.active_legs):
            d = P.hip_offsets_m[i]
            ang = a + q[3 + j]
            out.append(
                [
                    z + d * np.sin(a) + P.leg_length_m * np.sin(ang),
                    y + d * np.cos(a) + P.leg_length_m * np.cos(ang),
                ]
            )
        c = [
            z - P.half_length_m * np.sin(a) - P.half_height_m * np.cos(a),
            y - P.half_length_m * np.cos(a) + P.half_height_m * np.sin(a),
        ]
        return np.concatenate(out + [c])

    q = np.concatenate([obs.body_pos, obs.phi_rad])
    qd = np.concatenate([obs.body_vel, obs.phi_rate_rad_s])
    h = 1e-6
    J_fd = np.column_stack([(toe_positions(q + h * e) - toe_positions(q - h * e)) / (2 * h) for e in np.eye(6)])
    assert np.allclose(snap.J, J_fd, atol=1e-8)

    def J_at(qq):  # J̇q̇ = d/ds J(q + s q̇) q̇
        o = RigidObservation(qq[:3], obs.body_vel, qq[3:], obs.phi_rate_rad_s, obs.toe_contact, True)
        return rigid_snapshot(P, o)[0].J

    Jdot_qd = (J_at(q + h * qd) - J_at(q - h * qd)) / (2 * h) @ qd
    assert np.allclose(snap.Jdot_qdot, Jdot_qd, atol=1e-6)


def test_rigid_model_free_fall():
    # body alone, its corner leaving the ground (ẋ_n > threshold, so only S): z̈ = −g (gravity sign)
    obs = RigidObservation(
        np.array([0.0, 0.5, 0.0]),
        np.array([0.0, 0.5, 0.0]),
        np.zeros(3),
        np.zeros(3),
        np.array([False, False, False]),
        True,
    )
    snap, _ = rigid_snapshot(P, obs, with_task=False)
    free = [c for c in modes_consistent_with(snap, np.zeros(0)) if c.mode == ("S",)]
    assert free and np.allclose(free[0].qdd, [0.0, -P.gravity_m_s2, 0.0])


def test_rigid_model_static_stance():
    # standing on three vertical legs, body clear of the ground: zero torque holds it, legs carry m g
    obs = RigidObservation(
        np.array([0.0, P.leg_length_m, 0.0]),
        np.zeros(3),
        np.full(3, -np.pi / 2),
        np.zeros(3),
        np.array([True, True, True]),
        False,
    )
    snap, _ = rigid_snapshot(P, obs, with_task=False)
    cons = {c.mode: c for c in modes_consistent_with(snap, np.zeros(3), global_lp=False)}
    assert ("F", "F", "F") in cons
    stance = cons[("F", "F", "F")]
    z = stance.sample()
    assert np.allclose(z[:3], 0.0, atol=1e-9)
    normals = z[6::2]
    assert np.all(normals >= -1e-9) and normals.sum() == pytest.approx(P.weight_N)
    # torque sign: vertical legs with fixed toes form a parallelogram, so the body can only translate
    # along y. A positive hip torque (leg turned counter-clockwise relative to the body) pushes the body
    # backwards: ÿ = −τ / (m l), α̈ = 0 — the τ/l tangential toe force reacts on the body at the hip.
    tau = np.array([0.5, 0.0, 0.0])
    fixed = [c for c in modes_consistent_with(snap, tau, global_lp=False) if c.mode == ("F", "F", "F")]
    assert fixed
    qdd = fixed[0].sample()[:3]
    assert qdd[0] == pytest.approx(-0.5 / (P.mass_kg * P.leg_length_m), rel=1e-9)
    assert np.allclose(qdd[1:], 0.0, atol=1e-9)


def test_maximal_thrust_pushes_down_and_pitches_up():
    from sim.planar_contact.rhex.controllers import MaximalThrustController

    sim = CompliantRHex(P)
    obs = observe(sim, initial_state(sim))
    cmd = MaximalThrustController(P)(obs)
    assert np.all(cmd.tau_Nm < 0) and cmd.predicted_alpha_ddot > 0
    assert cmd.mode.endswith("body:R")  # the body slides forward, as in both blind models


def _lying_body_with_legs_up(sim):
    """Body resting flat on its penalty contact, legs pointing up (toes clear of the ground)."""
    p = sim.params
    s = sim.state_from_pose(0.0, p.half_height_m - p.weight_N / (2 * p.body_stiffness_N_m), 0.0, [np.pi / 2] * 3)
    hold(sim, s, np.pi / 2, 0.3)
    return s


def test_body_sliding_on_the_ground_decelerates_at_mu_g():
    sim = CompliantRHex(P)
    s = _lying_body_with_legs_up(sim)
    s.vel[0] = 1.0
    s.vel[3:9:2] = 1.0  # toes move with the body
    v0 = s.vel[0]
    hold(sim, s, np.pi / 2, 0.1)
    decel = (v0 - s.vel[0]) / 0.1
    # legs carry no weight, the body's weight (plus the toes' via the legs) rests on the padding
    total = P.mass_kg + 3 * P.toe_mass_kg
    assert decel == pytest.approx(P.mu_body * P.gravity_m_s2 * total / P.mass_kg, rel=0.03)


def test_time_step_convergence_of_the_compliant_model():
    """A 0.15 s thrust from rest, at dt and dt/2: first-order convergence of the pose."""
    finals = []
    for dt in (4e-5, 2e-5, 1e-5):
        sim = CompliantRHex(P, dt_s=dt)
        s = initial_state(sim, settle_s=0.1)
        for _ in range(30):
            sim.step(s, np.array([-6.0, -6.0, -6.0]), 0.005)
        finals.append(s.pos[:3].copy())
    e_coarse = np.abs(finals[0] - finals[2]).max()
    e_fine = np.abs(finals[1] - finals[2]).max()
    assert e_fine < 1e-3  # 1 mm / 1 mrad at the default step
    assert e_fine < 0.75 * e_coarse  # the error shrinks with the step


@pytest.mark.parametrize("ratio_to_mu", [0.9, 1.1])
def test_toe_friction_is_exact_coulomb_stick_or_slide(ratio_to_mu):
    """The toe–ground law (issue 8): a point-mass toe sticks exactly while the leg force lies inside the
    friction cone, and otherwise slides with kinetic friction μ N, (τ/L − μ N)/m_t. The body is made
    immovable (huge mass, no gravity) so a vertical leg compressed by δ presses its toe with N = k_l δ and the
    hip torque pushes it sideways with τ/L."""
    p = RHexParameters(mass_kg=1e12, inertia_kgm2=1e12, gravity_m_s2=0.0, leg_damping_Ns_m=0.0)
    sim = CompliantRHex(p)
    compression_m = 0.01
    s = sim.state_from_pose(0.0, p.leg_length_m - compression_m, 0.0, [-np.pi / 2] * 3)
    normal_N = p.leg_stiffness_N_m * compression_m  # 50 N
    length_m = p.leg_length_m - compression_m
    tau = ratio_to_mu * p.mu_toe * normal_N * length_m  # tangential push τ/L = ratio · μ N
    duration_s = 2e-3
    sim.step(s, np.full(3, tau), duration_s)
    toe_vy = s.vel[3:9:2]
    assert s.toe_normal_N == pytest.approx(normal_N, rel=1e-2)
    if ratio_to_mu < 1.0:
        assert np.all(toe_vy == 0.0)  # exact stiction, not a regularised creep
    else:
        # the leg stays vertical to within 1e-4 rad over 2 ms, so the forces are constant to 1 %
        expected = (tau / length_m - p.mu_toe * normal_N) / p.toe_mass_kg * duration_s
        # positive τ turns the leg counter-clockwise: a downward leg pushes its toe towards +y
        np.testing.assert_allclose(toe_vy, expected, rtol=0.02)
