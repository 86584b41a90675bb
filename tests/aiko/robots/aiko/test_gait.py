"""The serpenoid gait is eq. 70–71 of paper 000, to the last bit, with the paper's soft start."""

import math
from dataclasses import replace

import numpy as np
import pytest

from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.gait import (
    _GAITS,
    PRESETS,
    SerpenoidGait,
    SerpenoidParams,
    first_entry_time,
    gait_from_table,
    register_gait,
    validate_serpenoid,
)

N_JOINTS = 10

# Every preset and experiment file has ω_v = ω_h, δ_v = δ_h and zero offsets, so against them a vertical wave that
# borrows the horizontal frequency, phase step or offset is indistinguishable from eq. 71. This gait gives each of the
# nine parameters its own value (and no two of them a simple ratio), so any such mix-up changes the references.
INDEPENDENT = SerpenoidParams(
    amplitude_h_rad=math.radians(27.0),
    omega_h_rad_s=math.radians(83.0),
    delta_h_rad=math.radians(-47.0),
    offset_h_rad=math.radians(4.0),
    amplitude_v_rad=math.radians(11.0),
    omega_v_rad_s=math.radians(131.0),
    delta_v_rad=math.radians(29.0),
    delta_0_rad=math.radians(71.0),
    offset_v_rad=math.radians(-2.5),
)


def eq_70_71(p: SerpenoidParams, i: int, t: float) -> tuple[float, float]:
    """The printed equations, joint by joint (i = 1 … n−1), written independently of the implementation."""
    alpha_h = p.amplitude_h_rad * math.sin(p.omega_h_rad_s * t + (i - 1) * p.delta_h_rad) + p.offset_h_rad
    alpha_v = (
        p.amplitude_v_rad * math.sin(p.omega_v_rad_s * t + (i - 1) * p.delta_v_rad + p.delta_0_rad) + p.offset_v_rad
    )
    return alpha_h, alpha_v


def eq_70_71_rates(p: SerpenoidParams, i: int, t: float) -> tuple[float, float]:
    """Time derivatives of :func:`eq_70_71`, differentiated by hand."""
    rate_h = p.amplitude_h_rad * p.omega_h_rad_s * math.cos(p.omega_h_rad_s * t + (i - 1) * p.delta_h_rad)
    rate_v = (
        p.amplitude_v_rad * p.omega_v_rad_s * math.cos(p.omega_v_rad_s * t + (i - 1) * p.delta_v_rad + p.delta_0_rad)
    )
    return rate_h, rate_v


GAITS_UNDER_TEST = {**PRESETS, "independent_h_and_v_waves": INDEPENDENT}


@pytest.mark.parametrize("name", sorted(GAITS_UNDER_TEST))
def test_references_equal_eq_70_71(name):
    params = GAITS_UNDER_TEST[name]
    gait = SerpenoidGait(params, N_JOINTS)
    for t in np.linspace(0.0, 15.0, 301):
        refs = gait.raw_references(float(t))
        for i in range(1, N_JOINTS + 1):
            h, v = eq_70_71(params, i, float(t))
            assert abs(refs.angle_h_rad[i - 1] - h) <= 1e-12
            assert abs(refs.angle_v_rad[i - 1] - v) <= 1e-12


@pytest.mark.parametrize("name", sorted(GAITS_UNDER_TEST))
def test_rates_equal_the_derivative_of_eq_70_71(name):
    """The rates sent with each reference (used by the modules' linear hold) are d/dt of eq. 70–71, to round-off:
    A·ω·cos(…) with each wave's own amplitude, frequency and phase."""
    params = GAITS_UNDER_TEST[name]
    gait = SerpenoidGait(params, N_JOINTS)
    for t in np.linspace(0.0, 15.0, 151):
        refs = gait.raw_references(float(t))
        for i in range(1, N_JOINTS + 1):
            rate_h, rate_v = eq_70_71_rates(params, i, float(t))
            assert abs(refs.rate_h_rad_s[i - 1] - rate_h) <= 1e-12
            assert abs(refs.rate_v_rad_s[i - 1] - rate_v) <= 1e-12


def test_independent_waves_really_differ():
    """Guards the guard: if the test gait's two waves coincided, the eq. 70–71 test could not tell them apart."""
    p = INDEPENDENT
    pairs = [
        (p.amplitude_h_rad, p.amplitude_v_rad),
        (p.omega_h_rad_s, p.omega_v_rad_s),
        (p.delta_h_rad, p.delta_v_rad),
        (p.offset_h_rad, p.offset_v_rad),
        (0.0, p.delta_0_rad),
    ]
    assert all(abs(a - b) > math.radians(1.0) for a, b in pairs)


def test_experiment_table_keys_reach_their_own_parameters(experiments_dir):
    """Each `[gait]` key of an experiment file sets exactly its own parameter: no key feeds the other wave."""
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    degrees = {
        "amplitude_h_deg": 27.0,
        "frequency_h_deg_s": 83.0,
        "phase_step_h_deg": -47.0,
        "offset_h_deg": 4.0,
        "amplitude_v_deg": 11.0,
        "frequency_v_deg_s": 131.0,
        "phase_step_v_deg": 29.0,
        "phase_v0_deg": 71.0,
        "offset_v_deg": -2.5,
    }
    gait = gait_from_table(Table(dict(degrees), "gait"), robot)
    assert gait.params == INDEPENDENT


def test_turning_offset_adds_to_every_horizontal_joint():
    gait = SerpenoidGait(PRESETS["lateral_undulation_isotropic"], N_JOINTS)
    turned = gait.with_turn(math.radians(5))
    for t in (0.0, 1.3, 7.7):
        diff = turned.references(t).angle_h_rad - gait.references(t).angle_h_rad
        np.testing.assert_allclose(diff, math.radians(5), atol=1e-15)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_rates_match_central_differences(preset):
    gait = SerpenoidGait(PRESETS[preset], N_JOINTS)
    h = 1e-6
    for t in np.linspace(0.1, 14.9, 37):
        t = float(t)
        plus, minus, mid = gait.raw_references(t + h), gait.raw_references(t - h), gait.raw_references(t)
        np.testing.assert_allclose(mid.rate_h_rad_s, (plus.angle_h_rad - minus.angle_h_rad) / (2 * h), atol=1e-7)
        np.testing.assert_allclose(mid.rate_v_rad_s, (plus.angle_v_rad - minus.angle_v_rad) / (2 * h), atol=1e-7)


SOFT_STARTED = {
    "sidewinding": PRESETS["sidewinding"],
    "independent_h_and_v_waves": replace(INDEPENDENT, soft_start=True),
}


@pytest.mark.parametrize("name", sorted(SOFT_STARTED))
def test_soft_start_holds_zero_then_releases_at_first_entry_into_three_degrees(name):
    """Sec. VIII-E, checked on a 1 ms grid against the raw eq. 70–71 of the same gait. On the independent-wave gait
    each axis's release must come from its own wave (amplitude, frequency, phase and offset)."""
    gait = SerpenoidGait(SOFT_STARTED[name], N_JOINTS)
    threshold = math.radians(3.0)
    times = np.arange(0.0, 15.0, 1e-3)
    raw = np.array([np.concatenate([r.angle_h_rad, r.angle_v_rad]) for r in map(gait.raw_references, times)])
    out = np.array([np.concatenate([r.angle_h_rad, r.angle_v_rad]) for r in map(gait.references, times)])
    released_somewhere_later = 0
    held_on_axis = [0, 0]
    for j in range(2 * N_JOINTS):
        first = int(np.argmax(np.abs(raw[:, j]) <= threshold))
        assert np.abs(raw[first, j]) <= threshold
        assert np.all(out[:first, j] == 0.0), f"axis {j} moved before its release"
        np.testing.assert_array_equal(out[first:, j], raw[first:, j])
        steps = np.abs(np.diff(out[:, j]))
        assert steps.max() <= threshold + 1e-12
        released_somewhere_later += first > 0
        held_on_axis[j // N_JOINTS] += first > 0
    assert released_somewhere_later >= 10, "the gait must actually exercise the hold"
    assert min(held_on_axis) >= 3, f"both axes must exercise the hold (held joints h, v: {held_on_axis})"


def test_soft_start_rates_are_zero_while_held():
    gait = SerpenoidGait(PRESETS["sidewinding"], N_JOINTS)
    late = int(np.argmax(gait.release_h_s))
    t = gait.release_h_s[late] / 2
    assert gait.references(t).angle_h_rad[late] == 0.0
    assert gait.references(t).rate_h_rad_s[late] == 0.0


@pytest.mark.parametrize(
    "amplitude, omega, phase, offset",
    [(0.5, 1.4, 2.0, 0.0), (0.5, 1.4, -2.9, 0.1), (0.2, 3.0, 0.3, -0.15), (0.6, 0.7, 4.0, 0.3)],
)
def test_first_entry_time_is_the_first_sampled_entry(amplitude, omega, phase, offset):
    threshold = math.radians(3)
    t_star = first_entry_time(amplitude, omega, phase, offset, threshold)
    t = np.arange(0, 30, 1e-5)
    inside = np.abs(amplitude * np.sin(omega * t + phase) + offset) <= threshold
    assert abs(t[np.argmax(inside)] - t_star) <= 1e-5


def test_soft_start_that_never_releases_is_refused():
    params = SerpenoidParams(math.radians(2), math.radians(80), 0.0, offset_h_rad=math.radians(10), soft_start=True)
    with pytest.raises(ConfigError, match="forever"):
        SerpenoidGait(params, N_JOINTS)


def test_planar_variant_has_no_vertical_wave(experiments_dir):
    params = SerpenoidParams(math.radians(30), math.radians(80), math.radians(-50), planar=True)
    refs = SerpenoidGait(params, 9).references(1.234)
    assert np.all(refs.angle_v_rad == 0) and np.all(refs.rate_v_rad_s == 0)
    validate_serpenoid(params, load_robot(experiments_dir / "robots/planar_snake_001.toml"))


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(amplitude_h_rad=math.radians(50)), "exceeds the horizontal joint limit"),
        (dict(offset_v_rad=math.radians(40), amplitude_v_rad=math.radians(10)), "vertical joint limit"),
        (dict(omega_h_rad_s=0.0), "finite and positive"),
        (dict(omega_h_rad_s=math.inf), "finite and positive"),
        (dict(omega_v_rad_s=-1.0), "finite and positive"),
        (dict(planar=True), "planar gait has no vertical wave"),
    ],
)
def test_validation_rejects_what_aiko_cannot_follow(experiments_dir, change, message):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    params = SerpenoidParams(**{**PRESETS["sidewinding"].__dict__, **change})
    with pytest.raises(ConfigError, match=message):
        validate_serpenoid(params, robot)


# ------------------------------------------------------ boundaries found by mutation testing (docs/testing.md)
@pytest.mark.parametrize("name", sorted(SOFT_STARTED))
def test_soft_started_references_are_the_raw_ones_once_released_and_zero_before(name):
    """All four arrays (angles and rates, both axes) follow the hold, axis by axis; the release instant itself
    already belongs to the released side (|α_r| ≤ threshold there), and the time stamp is passed through."""
    gait = SerpenoidGait(SOFT_STARTED[name], N_JOINTS)
    instants = np.concatenate([np.linspace(0.0, 8.0, 161), gait.release_h_s, gait.release_v_s])
    for t in map(float, instants):
        raw, out = gait.raw_references(t), gait.references(t)
        assert out.t_s == t
        for release, angle, rate in (
            (gait.release_h_s, "angle_h_rad", "rate_h_rad_s"),
            (gait.release_v_s, "angle_v_rad", "rate_v_rad_s"),
        ):
            held = t < release
            np.testing.assert_array_equal(getattr(out, angle), np.where(held, 0.0, getattr(raw, angle)))
            np.testing.assert_array_equal(getattr(out, rate), np.where(held, 0.0, getattr(raw, rate)))


def test_raw_references_carry_their_time_and_the_planar_horizontal_wave():
    planar = SerpenoidParams(math.radians(30), math.radians(80), math.radians(-50), planar=True)
    for params in (INDEPENDENT, planar):
        gait = SerpenoidGait(params, 9)
        for t in (0.0, 0.37, 5.5):
            refs = gait.raw_references(t)
            assert refs.t_s == t
            for i in range(1, 10):
                h, _ = eq_70_71(params, i, t)
                rate_h, _ = eq_70_71_rates(params, i, t)
                assert abs(refs.angle_h_rad[i - 1] - h) <= 1e-12
                assert abs(refs.rate_h_rad_s[i - 1] - rate_h) <= 1e-12


def test_a_planar_gait_soft_starts_its_horizontal_wave_only():
    params = SerpenoidParams(math.radians(30), math.radians(80), math.radians(-50), soft_start=True, planar=True)
    gait = SerpenoidGait(params, 9)
    assert np.all(gait.release_v_s == 0.0) and gait.release_h_s.max() > 0.0
    refs = gait.references(0.0)
    assert np.all(refs.angle_v_rad == 0.0) and np.any(refs.angle_h_rad == 0.0)


def test_one_joint_is_a_gait_and_zero_joints_are_refused():
    assert SerpenoidGait(INDEPENDENT, 1).raw_references(0.5).angle_h_rad.shape == (1,)
    with pytest.raises(ConfigError, match="at least one joint, got n_joints=0"):
        SerpenoidGait(INDEPENDENT, 0)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(amplitude_h_rad=math.radians(2), offset_h_rad=math.radians(10)), r"joint 1 \(h axis\)"),
        (dict(amplitude_v_rad=math.radians(2), offset_v_rad=math.radians(10)), r"joint 1 \(v axis\)"),
    ],
)
def test_soft_start_that_never_releases_names_the_axis(change, message):
    """An axis whose wave never comes within 3° of zero is held on every joint; the error names the axis."""
    params = replace(INDEPENDENT, soft_start=True, **change)
    with pytest.raises(ConfigError, match=message + " at 0 forever"):
        SerpenoidGait(params, N_JOINTS)


def test_first_entry_time_at_the_band_edges():
    """|α| ≤ threshold is a closed band: on its edge at t = 0 is inside; a wave that only grazes the edge enters at
    the graze; a wave that does not move (A = 0 or ω = 0) outside the band never enters."""
    threshold = 0.25
    assert first_entry_time(1.0, 1.0, 0.0, threshold, threshold) == 0.0  # α(0) = +threshold
    assert first_entry_time(1.0, 1.0, 0.0, -threshold, threshold) == 0.0  # α(0) = −threshold
    # α = 0.5 sin(2t + 0.3) + 0.75 ∈ [0.25, 1.25]: touches the band only at its minimum, sin = −1
    graze = first_entry_time(0.5, 2.0, 0.3, 0.75, threshold)
    assert graze == pytest.approx((1.5 * math.pi - 0.3) / 2.0, abs=1e-12)
    assert first_entry_time(0.0, 1.0, 0.3, 0.5, threshold) == math.inf
    assert first_entry_time(0.5, 0.0, 2.0, 0.0, threshold) == math.inf
    assert first_entry_time(0.5, -1.0, 2.0, 0.0, threshold) == math.inf


def test_first_entry_time_on_random_waves_is_an_edge_crossing_with_nothing_inside_before_it():
    """Characterised without the implementation's root algebra: at t* the wave is on a band edge (or t* = 0 and it
    starts inside), and on a 0.2 ms grid before t* it is outside the band. Offsets of either sign, amplitudes
    including 1 rad, phases over several turns."""
    rng = np.random.default_rng(7)
    threshold = math.radians(3)
    cases = [(1.0, 1.3, 2.0, 0.0)] + [
        (rng.uniform(0.06, 1.2), rng.uniform(0.2, 3.0), rng.uniform(-10, 10), rng.uniform(-0.3, 0.3)) for _ in range(40)
    ]
    for amplitude, omega, phase, offset in cases:
        t_star = first_entry_time(amplitude, omega, phase, offset, threshold)
        if abs(offset) - amplitude > threshold:
            assert t_star == math.inf
            continue
        value = amplitude * math.sin(omega * t_star + phase) + offset
        assert abs(value) <= threshold + 1e-12
        if t_star > 0:
            assert abs(abs(value) - threshold) <= 1e-12
            before = np.arange(0.0, t_star, 2e-4)
            assert np.all(np.abs(amplitude * np.sin(omega * before + phase) + offset) > threshold - 1e-12)


def test_validation_limits_are_inclusive_and_frequencies_need_only_be_positive(experiments_dir):
    """A wave reaching exactly the joint limit is followable; slow waves (ω < 1 rad/s) are valid; a vertical wave
    with ω_v = 0 is not; |A| + |ψ| (not |A| − |ψ|) is the reach."""
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    base = PRESETS["sidewinding"]
    at_limits = replace(base, amplitude_h_rad=robot.limit_h_rad, amplitude_v_rad=robot.limit_v_rad)
    validate_serpenoid(at_limits, robot)
    validate_serpenoid(replace(base, omega_h_rad_s=0.5, omega_v_rad_s=0.5), robot)
    with pytest.raises(ConfigError, match="frequency_v_deg_s: must be finite and positive"):
        validate_serpenoid(replace(base, omega_v_rad_s=0.0), robot)
    with pytest.raises(ConfigError, match=r"^gait: \|amplitude_h_deg\| \+ \|offset_h_deg\|"):
        validate_serpenoid(replace(base, amplitude_h_rad=math.radians(30), offset_h_rad=math.radians(20)), robot)
    planar_robot = load_robot(experiments_dir / "robots/planar_snake_001.toml")
    with pytest.raises(ConfigError, match="has yaw joints only; set planar = true"):
        validate_serpenoid(replace(base, amplitude_v_rad=0.0), planar_robot)


# ------------------------------------------------------------------ the [gait] table (mutation-testing survivors)
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_alone_is_the_preset_and_initial_posture_is_t0(experiments_dir, preset):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    gait = gait_from_table(Table({"preset": preset}, "gait"), robot)
    assert gait.params == PRESETS[preset] and gait.n_joints == robot.n_joints
    start = gait.initial_posture()
    np.testing.assert_array_equal(start.angle_h_rad, gait.references(0.0).angle_h_rad)
    np.testing.assert_array_equal(start.angle_v_rad, gait.references(0.0).angle_v_rad)
    assert start.t_s == 0.0


def test_table_overrides_a_preset_key_by_key_and_defaults_the_rest(experiments_dir):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    table = {"preset": "sidewinding", "frequency_v_deg_s": 60.0, "soft_start": False, "soft_start_threshold_deg": 5.0}
    gait = gait_from_table(Table(table, "gait"), robot)
    expected = replace(
        PRESETS["sidewinding"],
        omega_v_rad_s=math.radians(60.0),
        soft_start=False,
        soft_start_threshold_rad=math.radians(5.0),
    )
    assert gait.params == expected
    minimal = gait_from_table(
        Table({"amplitude_h_deg": 20.0, "frequency_h_deg_s": 90.0, "phase_step_h_deg": -40.0}, "gait"), robot
    )
    assert minimal.params == SerpenoidParams(math.radians(20.0), math.radians(90.0), math.radians(-40.0))
    soft = gait_from_table(Table({"preset": "lateral_undulation_isotropic", "soft_start": True}, "gait"), robot)
    assert soft.params.soft_start and soft.params.soft_start_threshold_rad == math.radians(3.0)
    planar_robot = load_robot(experiments_dir / "robots/planar_snake_001.toml")
    assert gait_from_table(Table({"preset": "lateral_undulation_isotropic"}, "gait"), planar_robot).params.planar
    forced = gait_from_table(Table({"preset": "lateral_undulation_isotropic", "planar": True}, "gait"), robot)
    assert forced.params.planar


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"frequency_h_deg_s": 90.0, "phase_step_h_deg": -40.0}, r"run\.gait\.amplitude_h_deg: missing required key"),
        ({"amplitude_h_deg": 20.0, "phase_step_h_deg": -40.0}, r"run\.gait\.frequency_h_deg_s: missing required key"),
        ({"amplitude_h_deg": 20.0, "frequency_h_deg_s": 90.0}, r"run\.gait\.phase_step_h_deg: missing required key"),
        ({"preset": "sidewinding", "soft_start_threshold_deg": 90.5}, r"soft_start_threshold_deg"),
        ({"preset": "sidewinding", "soft_start_threshold_deg": -0.5}, r"soft_start_threshold_deg"),
        ({"preset": "sidewinding", "soft_start": 1}, r"run\.gait\.soft_start: expected true or false"),
        ({"preset": "sidewinding", "planar": "no"}, r"run\.gait\.planar: expected true or false"),
        ({"preset": "crawl"}, r"run\.gait\.preset"),
        ({"preset": "sidewinding", "amplitude_h_deg": 50.0}, r"^run\.gait: \|amplitude_h_deg\|"),
        ({"kind": "slither", "preset": "sidewinding"}, r"run\.gait\.kind"),
        ({"preset": "sidewinding", "amplitude": 1.0}, r"run\.gait\.amplitude: unknown key"),
    ],
)
def test_table_errors_name_the_key_in_its_table(experiments_dir, table, message):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    with pytest.raises(ConfigError, match=message):
        gait_from_table(Table(table, "run.gait"), robot)


def test_soft_start_threshold_accepts_its_closed_range(experiments_dir):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    for degrees in (0.0, 90.0):
        table = {"amplitude_h_deg": 20.0, "frequency_h_deg_s": 90.0, "phase_step_h_deg": -40.0}
        gait = gait_from_table(Table({**table, "soft_start_threshold_deg": degrees}, "gait"), robot)
        assert gait.params.soft_start_threshold_rad == math.radians(degrees)


def test_registered_gait_kinds_are_built_from_their_tables(experiments_dir):
    robot = load_robot(experiments_dir / "robots/aiko.toml")
    made = []

    def factory(table, robot):
        made.append(table.number("speed"))
        return SerpenoidGait(PRESETS["sidewinding"], robot.n_joints)

    register_gait("test_registered_kind", factory)
    try:
        gait = gait_from_table(Table({"kind": "test_registered_kind", "speed": 2.0}, "gait"), robot)
        assert made == [2.0] and gait.n_joints == robot.n_joints
        register_gait("test_registered_kind", lambda table, robot: SerpenoidGait(PRESETS["sidewinding"], 3))
        with pytest.raises(ConfigError, match="the gait drives 3 joints but"):
            gait_from_table(Table({"kind": "test_registered_kind"}, "gait"), robot)
    finally:
        _GAITS.pop("test_registered_kind")


def test_plugin_gaits_are_found_by_kind(experiments_dir):
    """Reactive gaits live in `aiko.robots.aiko.gaits` and register themselves when `gait_from_table` first looks
    for kinds (nothing here imports them before the call, so in this file alone the lookup is what loads them)."""
    robot = load_robot(experiments_dir / "robots/planar_snake_001.toml")
    gait = gait_from_table(Table({"kind": "obstacle_aided", "propagation_speed_m_s": 0.2}, "gait"), robot)
    from aiko.robots.aiko.gaits.obstacle_aided import obstacle_aided_from_table

    assert _GAITS["obstacle_aided"] is obstacle_aided_from_table and gait.n_joints == robot.n_joints
