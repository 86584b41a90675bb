"""The serpenoid gait is eq. 70–71 of paper 000, to the last bit, with the paper's soft start."""

import math

import numpy as np
import pytest

from aiko.errors import ConfigError
from aiko.gait import PRESETS, SerpenoidGait, SerpenoidParams, first_entry_time, validate_serpenoid
from aiko.robot import load_robot

N_JOINTS = 10


def eq_70_71(p: SerpenoidParams, i: int, t: float) -> tuple[float, float]:
    """The printed equations, joint by joint (i = 1 … n−1), written independently of the implementation."""
    alpha_h = p.amplitude_h_rad * math.sin(p.omega_h_rad_s * t + (i - 1) * p.delta_h_rad) + p.offset_h_rad
    alpha_v = (
        p.amplitude_v_rad * math.sin(p.omega_v_rad_s * t + (i - 1) * p.delta_v_rad + p.delta_0_rad) + p.offset_v_rad
    )
    return alpha_h, alpha_v


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_references_equal_eq_70_71(preset):
    params = PRESETS[preset]
    gait = SerpenoidGait(params, N_JOINTS)
    for t in np.linspace(0.0, 15.0, 301):
        refs = gait.raw_references(float(t))
        for i in range(1, N_JOINTS + 1):
            h, v = eq_70_71(params, i, float(t))
            assert abs(refs.angle_h_rad[i - 1] - h) <= 1e-12
            assert abs(refs.angle_v_rad[i - 1] - v) <= 1e-12


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


def test_soft_start_holds_zero_then_releases_at_first_entry_into_three_degrees():
    gait = SerpenoidGait(PRESETS["sidewinding"], N_JOINTS)
    threshold = math.radians(3.0)
    times = np.arange(0.0, 15.0, 1e-3)
    raw = np.array([np.concatenate([r.angle_h_rad, r.angle_v_rad]) for r in map(gait.raw_references, times)])
    out = np.array([np.concatenate([r.angle_h_rad, r.angle_v_rad]) for r in map(gait.references, times)])
    released_somewhere_later = 0
    for j in range(2 * N_JOINTS):
        first = int(np.argmax(np.abs(raw[:, j]) <= threshold))
        assert np.abs(raw[first, j]) <= threshold
        assert np.all(out[:first, j] == 0.0), f"axis {j} moved before its release"
        np.testing.assert_array_equal(out[first:, j], raw[first:, j])
        steps = np.abs(np.diff(out[:, j]))
        assert steps.max() <= threshold + 1e-12
        released_somewhere_later += first > 0
    assert released_somewhere_later >= 10, "the sidewinding preset must actually exercise the hold"


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
