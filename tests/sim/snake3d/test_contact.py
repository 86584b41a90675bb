"""Contact and friction facts with analytic answers: a link on a slope, a dropped link, a passive snake's energy."""

import math

import numpy as np
import pytest

from sim.snake3d import SnakeModel, SnakeSimulator, posture_state, total_energy

G = 9.81
MU_ALONG, MU_ACROSS = 0.3, 0.6  # orthotropic: longitudinal / transversal


def link_on_slope(tan_slope: float, across: bool, mu_rolling: float = 1.0) -> SnakeSimulator:
    """One link lying on a slope; downhill is +x (link along the slope) or +y (link across it)."""
    model = SnakeModel(
        n_links=1,
        slope_rad=math.atan(tan_slope),
        slope_azimuth_rad=math.pi / 2 if across else 0.0,
        mu_longitudinal=MU_ALONG,
        mu_transversal=MU_ACROSS,
        mu_rolling=mu_rolling,
    )
    return SnakeSimulator(model, posture_state(model, head_direction_rad=0.0))


@pytest.mark.parametrize(("tan_slope", "across"), [(0.25, False), (0.5, True), (0.55, True)])
def test_link_sticks_below_the_friction_threshold(tan_slope, across):
    sim = link_on_slope(tan_slope, across)
    start = sim.state.position_m[0].copy()
    sim.advance(2.0)
    creep = np.linalg.norm(sim.state.position_m[0] - start)
    assert creep < 1e-6, f"creep {creep:.3g} m over 2 s"


@pytest.mark.parametrize(("tan_slope", "across"), [(0.4, False), (0.5, False), (0.7, True), (0.9, True)])
def test_link_slides_with_the_coulomb_acceleration(tan_slope, across):
    sim = link_on_slope(tan_slope, across)
    theta = math.atan(tan_slope)
    mu = MU_ACROSS if across else MU_ALONG
    expected = G * (math.sin(theta) - mu * math.cos(theta))
    sim.advance(0.1)
    downhill = 1 if across else 0
    v0 = sim.state.velocity_m_s[0, downhill]
    sim.advance(1.0)
    accel = sim.state.velocity_m_s[0, downhill] - v0
    assert accel == pytest.approx(expected, rel=0.02)
    # sliding straight downhill: no sideways drift, no yaw
    assert abs(sim.state.velocity_m_s[0, 1 - downhill]) < 1e-3 * abs(sim.state.velocity_m_s[0, downhill])


def test_orthotropic_thresholds_differ_along_and_across():
    """tan θ = 0.45 lies between μ_along = 0.3 and μ_across = 0.6: the link slides along, sticks across."""
    along = link_on_slope(0.45, across=False)
    across = link_on_slope(0.45, across=True)
    along.advance(1.0)
    across.advance(1.0)
    assert along.state.velocity_m_s[0, 0] > 0.1
    assert np.linalg.norm(across.state.velocity_m_s[0]) < 1e-8


def test_cylinder_across_a_slope_rolls_when_rolling_friction_is_small():
    """With μ_V < tan θ the link rolls about its axis (rolling resistance L_SC μ_V λ_N cannot hold it)."""
    sim = link_on_slope(0.3, across=True, mu_rolling=0.05)
    sim.advance(0.5)
    spin = abs(sim.state.omega_body_rad_s[0, 2])  # about the link axis e_z^B
    assert spin > 1.0
    # rolling without slipping: the centre moves at L_SC times the spin rate
    speed = np.linalg.norm(sim.state.velocity_m_s[0])
    assert speed == pytest.approx(sim.model.link_radius_m * spin, rel=1e-3)


def test_dropped_link_rests_without_bounce_or_penetration():
    model = SnakeModel(n_links=1)
    sim = SnakeSimulator(model, posture_state(model, height_m=0.02))
    heights = []
    for _ in range(2000):  # 0.5 s
        sim.step(1)
        heights.append(sim.state.position_m[0, 2])
    heights = np.array(heights)
    gap = heights - model.link_radius_m
    touchdown = int(np.argmax(gap <= 0.0))
    assert touchdown > 0
    impact_speed = math.sqrt(2 * G * 0.02)
    # the midpoint rule closes a contact at most half a step late: penetration ≤ v Δt / 2 < 1e-4 m
    assert -gap.min() <= 0.5 * impact_speed * model.dt_s + 1e-12
    assert -gap.min() < 1e-4
    # completely inelastic: after touchdown the link never rises again (beyond the solver's 1e-7 m/s tolerance × Δt)
    rise = np.max(heights[touchdown:] - heights[touchdown])
    assert rise < 1e-9, f"the link bounced by {rise:.3g} m"
    assert np.abs(sim.state.velocity_m_s).max() < 1e-9


def test_passive_snake_never_gains_energy():
    """No actuation: gravity, contact and friction can only take energy out (up to the O(Δt²) gyroscopic term)."""
    model = SnakeModel(n_links=6, kp_h_nm_rad=0, kd_h_nms_rad=0, kp_v_nm_rad=0, kd_v_nms_rad=0)
    rng = np.random.default_rng(5)
    state = posture_state(model, rng.uniform(-0.4, 0.4, size=(model.n_joints, 2)), height_m=0.03)
    state.velocity_m_s[:] = rng.normal(scale=0.2, size=state.velocity_m_s.shape)
    sim = SnakeSimulator(model, state)
    sim.set_torques(np.zeros((model.n_joints, 2)))
    energy = [total_energy(model, sim.state)]
    for _ in range(3000):
        sim.step(1)
        energy.append(total_energy(model, sim.state))
    increase = np.diff(energy)
    assert increase.max() < 1e-6, f"energy rose by {increase.max():.3g} J in one step"
    assert energy[-1] < energy[0] - 0.05
