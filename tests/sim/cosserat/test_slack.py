"""Slack maps: exact stick/slide cases, complementarity, friction disk, maximum dissipation, sigmoid error ~1/c."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.cosserat.newton import finite_difference_jacobian
from sim.cosserat.slack import (
    Smoothing,
    SmoothingError,
    friction_map,
    normal_map,
    regular_slack,
    slack_from_regular,
)

finite = st.floats(-50.0, 50.0, allow_nan=False)
EXACT = [Smoothing("heaviside"), Smoothing("trigonometric", 2.0)]


@pytest.mark.parametrize("smoothing", EXACT, ids=lambda s: s.kind)
@given(u=finite)
@settings(max_examples=200, deadline=None)
def test_signorini_complementarity_is_exact(smoothing, u):
    lam, _, gap, _ = normal_map(smoothing, np.array([u]))
    assert lam[0] >= 0 and gap[0] >= 0
    assert lam[0] * gap[0] == 0.0


@pytest.mark.parametrize("smoothing", EXACT, ids=lambda s: s.kind)
@given(ux=finite, uy=finite, a=st.floats(0.0, 30.0))
@settings(max_examples=300, deadline=None)
def test_friction_disk_and_maximum_dissipation(smoothing, ux, uy, a):
    assume(np.hypot(ux, uy) > 1e-6)  # below, |u_t| is regularised by tangent_epsilon (documented)
    lam, _, _, slip, _, _ = friction_map(smoothing, np.array([[ux, uy]]), np.array([a]))
    lam, slip = lam[0], slip[0]
    assert np.linalg.norm(lam) <= a * (1 + 1e-12) + 1e-12
    if np.linalg.norm(slip) > 1e-12:
        # sliding: the force is on the cone boundary and exactly opposite the slip
        assert np.linalg.norm(lam) == pytest.approx(a, rel=1e-9, abs=1e-12)
        assert lam @ slip == pytest.approx(-np.linalg.norm(lam) * np.linalg.norm(slip), rel=1e-9, abs=1e-12)


def test_heaviside_reproduces_stick_and_slide_formulas():
    s = Smoothing("heaviside", tangent_epsilon=0.0)
    u = np.array([[0.3, -0.4], [3.0, 4.0]])
    lam, _, _, slip, _, _ = friction_map(s, u, np.array([1.0, 1.0]))
    np.testing.assert_allclose(lam[0], -u[0])  # |u| = 0.5 ≤ a: stick
    np.testing.assert_allclose(slip[0], 0.0)
    np.testing.assert_allclose(lam[1], -u[1] / 5.0)  # |u| = 5 > a: slide on the cone
    np.testing.assert_allclose(slip[1], (5.0 - 1.0) * u[1] / 5.0)


def test_sigmoid_error_shrinks_like_one_over_c():
    x = np.linspace(-2, 2, 40001)
    worst = []
    for c in (10.0, 100.0, 1000.0):
        f, _ = Smoothing("sigmoid", c).f(x)
        worst.append(np.max(np.abs(f - np.maximum(x, 0.0))) * c)
    # max |x/(1+e^{c|x|})| = 0.2785/c
    np.testing.assert_allclose(worst, 0.2785, rtol=2e-3)


@pytest.mark.parametrize("kind", ["sigmoid", "trigonometric"])
def test_map_derivatives_match_finite_differences(kind):
    s = Smoothing(kind, 3.0)
    rng = np.random.default_rng(0)
    u, a = rng.normal(size=(6, 2)), np.abs(rng.normal(size=6))
    lam, dl_du, dl_da, slip, ds_du, ds_da = friction_map(s, u, a)
    for k in range(6):
        j_lam = finite_difference_jacobian(lambda x, k=k: friction_map(s, x[:2][None], x[2:])[0][0], np.r_[u[k], a[k]])
        j_slip = finite_difference_jacobian(lambda x, k=k: friction_map(s, x[:2][None], x[2:])[3][0], np.r_[u[k], a[k]])
        np.testing.assert_allclose(j_lam, np.c_[dl_du[k], dl_da[k]], atol=1e-6)
        np.testing.assert_allclose(j_slip, np.c_[ds_du[k], ds_da[k]], atol=1e-6)
    un = np.linspace(-1, 1, 7) + 0.013
    lam_n, dlam, gap, dgap = normal_map(s, un)
    h = 1e-7
    np.testing.assert_allclose(dlam, (normal_map(s, un + h)[0] - normal_map(s, un - h)[0]) / (2 * h), atol=1e-6)
    np.testing.assert_allclose(dgap, (normal_map(s, un + h)[2] - normal_map(s, un - h)[2]) / (2 * h), atol=1e-6)


def test_bad_smoothing_is_rejected_with_allowed_names():
    with pytest.raises(SmoothingError, match="heaviside, sigmoid, trigonometric"):
        Smoothing("tanh")
    with pytest.raises(SmoothingError, match="sharpness"):
        Smoothing("sigmoid", 0.0)


@given(ux=finite, uy=finite, a=st.floats(1e-3, 30.0), c=st.sampled_from([10.0, 20.0, 50.0, 200.0]))
@settings(max_examples=300, deadline=None)
def test_sigmoid_stick_creep_and_friction_overshoot_are_bounded(ux, uy, a, c):
    """The bounds the docs use to pick the slip scale σ_v: on the stick side (|u_t| ≤ a) the sigmoid's slip is
    |v| ≤ 0.2785·|u_t|/c (times σ_v: the creep speed) and its friction ≤ a·(1 + 0.2785/c); sliding, the friction
    exceeds a by at most 0.2785·|u_t|/c (in fact by ≈ |u_t|·e^{−c(1 − a/|u_t|)}, vanishing in full slide)."""
    u = np.array([[ux, uy]])
    s = float(np.hypot(ux, uy))
    assume(s > 1e-6)
    lam, _, _, slip, _, _ = friction_map(Smoothing("sigmoid", c), u, np.array([a]))
    bound = 0.2784645428 / c  # max_z z/(1 + e^z) = W(1/e); 0.27846 was 1.6e-5 short (hypothesis found it)
    if s <= a:
        assert np.linalg.norm(slip[0]) <= bound * s * (1 + 1e-9)
        assert np.linalg.norm(lam[0]) <= a * (1 + bound) * (1 + 1e-9)
    assert np.linalg.norm(lam[0]) <= (a + bound * s) * (1 + 1e-9)


TRIG = [Smoothing("trigonometric", w) for w in (2.0, 4.0, 20.0)]


@pytest.mark.parametrize("smoothing", TRIG, ids=lambda s: f"w={s.sharpness:g}")
@given(un=finite, ux=finite, uy=finite)
@settings(max_examples=200, deadline=None)
def test_trigonometric_maps_are_the_heaviside_maps_in_regular_coordinates(smoothing, un, ux, uy):
    """y = (Λ_n − δ_n, v_t − Λ_t) gives the Heaviside maps the same force, gap and slip, and maps back."""
    mu = 0.5
    u = np.array([[un, ux, uy]])
    y = regular_slack(smoothing, u, mu)
    heaviside = Smoothing("heaviside", tangent_epsilon=smoothing.tangent_epsilon)
    lam, _, gap, _ = normal_map(smoothing, u[:, 0])
    lam_h, _, gap_h, _ = normal_map(heaviside, y[:, 0])
    np.testing.assert_allclose([lam[0], gap[0]], [lam_h[0], gap_h[0]], rtol=1e-12, atol=1e-12)
    bound = mu * np.maximum(lam, 0.0)
    lam_t, _, _, slip, _, _ = friction_map(smoothing, u[:, 1:3], bound)
    lam_th, _, _, slip_h, _, _ = friction_map(heaviside, y[:, 1:3], bound)
    np.testing.assert_allclose(np.r_[lam_t[0], slip[0]], np.r_[lam_th[0], slip_h[0]], rtol=1e-9, atol=1e-9)
    back = slack_from_regular(smoothing, y, mu)
    np.testing.assert_allclose(regular_slack(smoothing, back, mu), y, rtol=1e-12, atol=1e-12)


def test_trigonometric_slack_columns_vanish_at_the_corners():
    """Root cause of the trigonometric map's Newton trouble: at u_n = 0 both Λ_n and δ_n, and at |u_t| = μΛ_n
    both |Λ_t| and |v_t|, are stationary in the slack (cubic), while the Heaviside map has slope 1 on one side."""
    trig, heaviside = Smoothing("trigonometric", 2.0), Smoothing("heaviside")
    _, dlam, _, dgap = normal_map(trig, np.array([0.0, 1e-3]))
    assert dlam[0] == 0.0 and dgap[0] == 0.0
    assert dlam[1] < 1e-5  # f(u) ≈ w²u³/4
    _, dlam_h, _, dgap_h = normal_map(heaviside, np.array([1e-3, -1e-3]))
    assert dlam_h[0] == 1.0 and dgap_h[1] == -1.0
    a = np.array([0.7])
    for knee in (1.0, 1.0 + 1e-3, 1.0 - 1e-3):  # |u_t| = a·knee, radial direction x
        _, dlt, _, _, dslip, _ = friction_map(trig, np.array([[0.7 * knee, 0.0]]), a)
        assert abs(dlt[0, 0, 0]) < 1e-5 and abs(dslip[0, 0, 0]) < 1e-5
    _, dlt, _, _, dslip, _ = friction_map(heaviside, np.array([[0.7 * 1.001, 0.0]]), a)
    assert dslip[0, 0, 0] == pytest.approx(1.0)


def test_regular_coordinates_need_an_exact_smoothing():
    with pytest.raises(SmoothingError, match="not exact"):
        slack_from_regular(Smoothing("sigmoid", 50.0), np.zeros((1, 3)), 0.5)


@pytest.mark.parametrize("kind", ["sigmoid", "heaviside", "trigonometric"])
@given(ux=finite, uy=finite, a=st.floats(1e-3, 30.0), c=st.sampled_from([10.0, 50.0, 200.0]))
@settings(max_examples=300, deadline=None)
def test_friction_never_does_positive_work_and_sticks_inside_the_cone(kind, ux, uy, a, c):
    """Λ_t·v_t ≤ 0 for every smoothing, and inside the cone (|u_t| < a) no slip at all. The sigmoid's f(x) = x·D(x)
    is negative for x < 0 (down to −0.2785/c), so its slip map f(1 − a/|u_t|)·u_t pointed *along* the friction
    force on the stick side: friction did positive work, and a rod held near the cone's edge crept up-slope."""
    u = np.array([[ux, uy]])
    s = float(np.hypot(ux, uy))
    assume(s > 1e-6)
    smoothing = Smoothing(kind, c)
    lam, _, _, slip, _, _ = friction_map(smoothing, u, np.array([a]))
    assert float(lam[0] @ slip[0]) <= 0.0
    if np.hypot(s, smoothing.tangent_epsilon) < a:  # inside the cone by the map's own regularised |u_t|
        assert np.all(slip[0] == 0.0)
