"""Qualitative outcomes of the paper's scenarios (long physics runs, marked slow)."""

from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat import kinematics
from sim.cosserat.scenario import simulate

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "rod"


@pytest.mark.slow
@pytest.mark.parametrize("mu, stays", [(0.1, False), (0.2, True)])
def test_rod_thrown_on_bar_slides_off_at_low_friction_and_stays_at_mu_0_2(mu, stays):
    scenario = load_rod_experiment(
        EXPERIMENTS / "rod_on_bar.toml", {"contact.friction_coefficient": mu, "run.duration_s": 1.5}
    )
    result = simulate(scenario)
    z = kinematics(scenario.model, result.final_state.q).p[scenario.model.grid.node_index, 2]
    bar_top = 0.01
    assert (z.max() > bar_top - 0.03) == stays, z.max()


@pytest.mark.slow
def test_dropped_tapered_rod_comes_to_rest_lying_on_the_plane():
    scenario = load_rod_experiment(EXPERIMENTS / "rod_on_plane.toml", {"run.duration_s": 1.0})
    result = simulate(scenario)
    model, state = scenario.model, result.final_state
    p = kinematics(model, state.q).p[model.grid.contact_index]
    np.testing.assert_allclose(p[:, 2], model.contact_radius_m, atol=2e-4)  # every node lies on the plane
    assert np.max(np.abs(state.v)) < 0.05
    assert np.sum(result.final_info.contact_force_n[:, 2]) == pytest.approx(model.rod.mass_kg() * 9.81, rel=1e-3)


def test_prescribed_base_motion_is_followed_exactly():
    from sim.cosserat import build_model, initial_state, uniform_rod
    from sim.cosserat.scenario import BaseMotion, Scenario

    model = build_model(uniform_rod(0.2, 0.005, 1e9, 1000.0), 4)
    motion = BaseMotion((0.0, 0.1), ((0.0, 0.0, 0.0), (0.01, 0.0, 0.02)), ((0, 0, 0), (0.0, 0.1, 0.0)))
    samples = []
    scenario = Scenario("t", model, initial_state(model), 0.005, 0.15, motion)
    simulate(scenario, lambda s: samples.append((s.t_s, s.state.q[0:6].copy())))
    assert len(samples) == 31
    for t, alpha in samples:
        np.testing.assert_allclose(alpha, motion.alpha(t), atol=1e-12)


def test_released_rod_falls_freely():
    """A rod held in static equilibrium and released at t = 0.05 s falls at g (no internal forces change)."""
    from sim.cosserat import build_model, initial_state, uniform_rod
    from sim.cosserat.scenario import Scenario
    from sim.cosserat.statics import solve_statics

    model = build_model(uniform_rod(0.2, 0.005, 1e9, 1000.0), 4)
    state = initial_state(model)
    state.q = solve_statics(model).q
    samples = []
    scenario = Scenario("t", model, state, 0.005, 0.15, None, release_at_s=0.05)
    simulate(scenario, lambda s: samples.append((s.t_s, s.state.v[5])))
    t, vz = (np.array(x) for x in zip(*samples, strict=True))
    after = t > 0.06
    slope = np.polyfit(t[after], vz[after], 1)[0]
    assert slope == pytest.approx(-9.81, rel=1e-3)
    assert np.all(vz[t <= 0.05 + 1e-9] == 0.0)


def _euler_load_clamped_pinned_n(rod, free_length_m: float, n_elements: int = 200) -> float:
    """Buckling load of the tapered free part (clamped at the base, pinned at the tube mouth): Hermite beam
    elements, K − P·K_G singular (the rod's EI(X) from the base on; free_length_m < L)."""
    h = free_length_m / n_elements
    size = 2 * (n_elements + 1)
    k_mat, g_mat = np.zeros((size, size)), np.zeros((size, size))
    kb = np.array([[12, 6 * h, -12, 6 * h], [6 * h, 4 * h * h, -6 * h, 2 * h * h]])
    kb = np.vstack([kb, -kb[0], [6 * h, 2 * h * h, -6 * h, 4 * h * h]]) / h**3
    gb = np.array(
        [
            [36, 3 * h, -36, 3 * h],
            [3 * h, 4 * h * h, -3 * h, -h * h],
            [-36, -3 * h, 36, -3 * h],
            [3 * h, -h * h, -3 * h, 4 * h * h],
        ]
    ) / (30 * h)
    for e in range(n_elements):
        ei = rod.stiffness_diagonal((e + 0.5) * h)[1]
        ix = np.arange(2 * e, 2 * e + 4)
        k_mat[np.ix_(ix, ix)] += ei * kb
        g_mat[np.ix_(ix, ix)] += gb
    keep = np.arange(2, size)
    keep = keep[keep != size - 2]  # clamped at 0 (w, w'), pinned at the mouth (w)
    return float(scipy.linalg.eigh(k_mat[np.ix_(keep, keep)], g_mat[np.ix_(keep, keep)], eigvals_only=True)[0])


def _run_tube(mu: float):
    scenario = load_rod_experiment(EXPERIMENTS / "tube_insertion.toml", {"contact.friction_coefficient": mu})
    samples = []

    def on_sample(sample):
        if sample.info is not None:
            before_mouth = sample.centreline_m[sample.centreline_m[:, 0] < 0.0]
            lateral = float(np.max(np.hypot(before_mouth[:, 1], before_mouth[:, 2])))
            samples.append(
                (
                    sample.t_s,
                    -sample.state.q[3],  # free length: base at x < 0, mouth at x = 0
                    float(sample.info.base_wrench[3]),
                    lateral,
                )
            )

    result = simulate(scenario, on_sample, sample_every=25)
    return scenario, result, np.array(samples)


@pytest.mark.slow
def test_tube_insertion_passes_the_bend_at_mu_0_2():
    """Paper 004 Fig. 10 left: μ = 0.2 inserts. The tube (inner radius 0.4 mm) runs 3 mm along +x, turns 90°
    towards +y with a 3 mm centreline radius, then runs along +y at x = 6 mm."""
    scenario, result, samples = _run_tube(0.2)
    tip = result.tip_m[-1]
    assert tip[1] > 0.006 and abs(tip[0] - 0.006) < 0.0004, tip  # > 3 mm into the exit leg, inside the tube
    assert samples[:, 3].max() < 0.001  # the free part only bows (< 1 mm; the buckled μ = 0.5 rod: > 3 mm)
    assert np.all(samples[:, 2] < 0.9e-3)  # the push force stays below the μ = 0.5 plateau


@pytest.mark.slow
def test_tube_insertion_sticks_and_the_free_part_buckles_at_mu_0_5():
    """Paper 004 Fig. 10 right: μ = 0.5 fails to insert, sticks in the tube and the part outside buckles. The
    tip stops in the bend; the base force saturates at the Euler load of the free length (clamped base, the
    3 mm mouth between a pin and a clamp) and follows it as the free length shrinks."""
    scenario, result, samples = _run_tube(0.5)
    tip = result.tip_m
    assert tip[-1][1] < 0.003  # short of the bend's exit (y = 3 mm)
    assert np.linalg.norm(tip[-1] - tip[len(tip) // 2]) < 5e-5  # stuck: < 50 µm in the last 0.5 s
    assert samples[-1, 3] > 0.003  # the free part deflects laterally by > 3 mm (clearance 0.29 mm)
    late = samples[samples[:, 0] >= 0.5 - 1e-9]
    pcr = np.array([_euler_load_clamped_pinned_n(scenario.model.rod, lf) for lf in late[:, 1]])
    ratio = late[:, 2] / pcr
    assert np.all((ratio > 0.8) & (ratio < 2.0)), ratio  # clamped–clamped would be ≈ 1.96× clamped–pinned


def _run_bench(name: str):
    """Per step: time, tip contact node's slip speed, its normal and tangential force, total normal force."""
    scenario = load_rod_experiment(EXPERIMENTS / f"{name}.toml", {})
    rows = []

    def on_sample(sample):
        if sample.info is not None:
            force = sample.info.contact_force_n
            normal = force[:, 2]  # the table is the plane z = 0
            tip_slip = float(np.linalg.norm(sample.info.contact_slip_m_s[-1]))
            rows.append((sample.t_s, tip_slip, normal[-1], float(np.linalg.norm(force[-1, :2])), normal.sum()))

    simulate(scenario, on_sample)
    return scenario, np.array(rows)


def _slip_distance_m(rows: np.ndarray, t0: float, t1: float) -> float:
    """∫|v_slip| dt of the tip's material contact point (implicit Euler: the end-of-step speed over the step)."""
    dt = np.diff(rows[:, 0], prepend=0.0)
    inside = (rows[:, 0] > t0 + 1e-9) & (rows[:, 0] <= t1 + 1e-9)
    return float(np.sum(rows[inside, 1] * dt[inside]))


@pytest.mark.slow
def test_bench_stick_test_tip_stays_stuck_while_the_base_is_pressed_down():
    """Paper 004 X-C: the UR3 presses the base 3 cm down in 3 s; the tip stays stuck (μ = 0.83) while the
    total normal force (the paper's Fig. 20 quantity) rises. The capsule tip rolls (its centreline point moves
    ≈ 4.6 mm as the end section turns) but its material contact point does not slip."""
    scenario, rows = _run_bench("bench_stick")
    mu = scenario.model.contact.friction_coefficient
    assert _slip_distance_m(rows, 1.0, 4.0) < 5e-5
    pressing = rows[rows[:, 0] > 1.0]
    assert np.all(pressing[:, 3] <= 0.5 * mu * pressing[:, 2])  # well inside the friction cone (measured ≤ 0.34 μ)
    settled = rows[np.argmin(np.abs(rows[:, 0] - 1.0)), 4]
    assert rows[-1, 4] > settled + 1.0  # pressed: 1.6 N → 3.1 N


@pytest.mark.slow
def test_bench_slide_test_tip_goes_from_stick_to_slide():
    """Paper 004 X-D: the rod is bent by pressing (as in the stick test), then the base is drawn 8 cm back in
    3 s over a lubricated table (μ = 0.48): the tip sticks while |F_t|/F_n climbs to μ, then slides — dragged at
    the base speed with |F_t| = μF_n (Coulomb, within 1 %)."""
    scenario, rows = _run_bench("bench_slide")
    mu = scenario.model.contact.friction_coefficient
    assert _slip_distance_m(rows, 0.5, 2.75) < 1e-4  # stuck while pressed and during the first 2 cm of pull
    pulled = rows[rows[:, 0] > 2.0]
    breaks_free_at = pulled[np.argmax(pulled[:, 1] > 1e-3), 0]  # first slip faster than 1 mm/s
    before = pulled[pulled[:, 0] < breaks_free_at]
    ratio = before[:, 3] / (mu * before[:, 2])
    # the load climbs to the cone's edge while stuck; the sigmoid's knee allows |F_t| ≤ μF_n(1 + 0.2785/c)
    c = scenario.model.contact.smoothing.sharpness
    assert 0.9 < ratio.max() <= 1.0 + 0.2785 / c, ratio.max()
    sliding = rows[rows[:, 0] > 3.75]
    base_speed = 0.08 / 3.0
    np.testing.assert_allclose(sliding[:, 1], base_speed, rtol=0.02)
    np.testing.assert_allclose(sliding[:, 3], mu * sliding[:, 2], rtol=0.01)
    assert _slip_distance_m(rows, 2.75, 5.0) > 0.03


def test_a_base_motion_is_numpys_linear_interpolation_bitwise():
    """`BaseMotion.alpha` bisects once for all six components; it must be np.interp's answer to the last bit (the bench
    and the simulator interpolate the same table), at and between the knots, before the first and after the last."""
    from sim.cosserat.scenario import BaseMotion

    motion = BaseMotion(
        (0.0, 0.5, 1.3, 2.0),
        ((0.0, 0.0, 0.1), (0.01, 0.0, 0.1), (0.03, 0.002, 0.08), (0.03, 0.002, 0.08)),
        ((0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.1, 0.2, 0.0), (0.0, 0.0, 0.3)),
    )
    times, positions = np.asarray(motion.times_s), np.asarray(motion.positions_m)
    rotations = np.asarray(motion.rotation_vectors_rad)
    rng = np.random.default_rng(3)
    knots = [0.0, 0.5, 1.3, 2.0, np.nextafter(0.5, 1.0), np.nextafter(1.3, 0.0), -np.inf, np.inf, np.nan]
    for t in [*rng.uniform(-1.0, 3.0, 5000), *knots]:
        expected = np.array([np.interp(t, times, column) for column in (*rotations.T, *positions.T)])
        np.testing.assert_array_equal(motion.alpha(t), expected)
    no_rotation = BaseMotion((0.0, 1.0), ((0.0, 0.0, 0.0), (0.1, 0.0, 0.0)))
    np.testing.assert_array_equal(no_rotation.alpha(0.25), [0.0, 0.0, 0.0, 0.025, 0.0, 0.0])
