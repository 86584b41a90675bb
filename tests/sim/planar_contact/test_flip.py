"""RHex self-righting on the compliant benchmark (paper 003, IV-C), and the controller's optimisation."""

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from sim.planar_contact import modes_consistent_with
from sim.planar_contact.analysis import analyse_mode, full_dimensional_overlap
from sim.planar_contact.mode_solution import solve_mode
from sim.planar_contact.modes import classify_contacts
from sim.planar_contact.rhex.compliant import CompliantRHex
from sim.planar_contact.rhex.controllers import ALPHA, MaximalThrustController
from sim.planar_contact.rhex.flip import initial_state, observe, run_flip
from sim.planar_contact.rhex.params import RHexParameters
from sim.planar_contact.rhex.rigid import rigid_snapshot


def _states(n=6):
    """Observations along a maximal-thrust flip: every k-th one, plus states where the first LP optimum lay
    in a full-dimensional overlap with another mode, so that T*_c had to be cut."""
    out, cut = [], []
    ctrl = MaximalThrustController(RHexParameters().with_mu_toe(0.6))

    def trace(sim, s, obs, cmd, tau, meas, ms):
        out.append(obs)
        before = ctrl.stats["cuts"]
        ctrl(obs)
        if ctrl.stats["cuts"] > before:
            cut.append(obs)

    run_flip("maximal_thrust", 0.6, t_max_s=0.4, trace=trace)
    assert cut, "no state needed an ambiguity cut: the test would not exercise T*_c"
    return out[1 :: max(1, len(out) // n)][:n] + cut[:3]


def test_maximal_thrust_is_an_unambiguous_optimum_of_its_mode():
    """The chosen τ is consistent with the chosen mode, the prediction is that mode's α̈, and no mode's
    torque domain T_c (a superset of T*_c) offers more than the HiGHS optimum over all of them."""
    p = RHexParameters().with_mu_toe(0.6)
    ctrl = MaximalThrustController(p)
    for obs in _states():
        cmd = ctrl(obs)
        snap, layout = rigid_snapshot(p, obs)
        if layout.n_tau == 0 or not np.isfinite(cmd.predicted_alpha_ddot):
            continue
        tau = cmd.tau_Nm[list(layout.active_legs)]
        assert np.all(np.abs(tau) <= p.torque_limit_Nm + 1e-9)
        mode = tuple(part.split(":")[1] for part in cmd.mode.split())
        kin = classify_contacts(snap)
        consistent = {c.mode: c for c in modes_consistent_with(snap, tau, global_lp=False, tol=1e-6)}
        assert mode in consistent
        assert consistent[mode].qdd[ALPHA] == pytest.approx(cmd.predicted_alpha_ddot, abs=1e-6)
        best_any = -np.inf
        for m in itertools.product(*kin.allowed):
            sol = solve_mode(snap, kin, m)
            if sol.acceleration_ambiguous(coords=[ALPHA]):
                continue
            D, t = sol.task_domain, sol.n_tau
            obj = np.zeros(D.dim)
            obj[:t] = -sol.Z_tau[ALPHA]
            res = linprog(
                obj,
                A_ub=-D.N,
                b_ub=-D.e,
                A_eq=D.A_eq if D.A_eq.shape[0] else None,
                b_eq=D.b_eq if D.A_eq.shape[0] else None,
                bounds=[(-p.torque_limit_Nm, p.torque_limit_Nm)] * t + [(None, None)] * (D.dim - t),
                method="highs",
            )
            if res.status == 0:
                best_any = max(best_any, -res.fun + sol.z_0[ALPHA])
        assert cmd.predicted_alpha_ddot <= best_any + 1e-6
        # unambiguous: τ is in the interior of no full-dimensional overlap of T_c with another mode's T_c'
        mine = analyse_mode(snap, kin, mode)
        for other_mode in consistent:
            if other_mode == mode:
                continue
            other = analyse_mode(snap, kin, other_mode)
            K = full_dimensional_overlap(mine.torque_domain, other.torque_domain)
            if K is not None and K.N.shape[0]:
                assert np.min(K.N @ tau - K.e) <= 1e-6, (mode, other_mode)


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.39, 0.6])
def test_both_controllers_flip(mu):
    for controller in ("maximal_thrust", "blind"):
        r = run_flip(controller, mu)
        assert r.completed, (controller, mu)
        assert 0.2 < r.flip_time_s < 1.0
        assert np.all(np.abs(r.tau_Nm) <= RHexParameters().torque_limit_Nm + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mu",
    [
        pytest.param(
            0.39,
            # strict: the day the ranking is reproduced this XPASSes and fails, so the fix is noticed and the mark
            # removed instead of silently passing under an xfail
            marks=pytest.mark.xfail(
                strict=True,
                raises=AssertionError,  # a crash is not the expected tie
                reason="tie, not reproduced (issue 8): the toe friction is exact Coulomb (test_rhex::"
                "test_toe_friction_is_exact_coulomb_stick_or_slide), but with the assumed τ_max = 8 N m the flip "
                "ends at 0.35 s with the rear toe dragged forward at 0.7-0.8 m/s, its leg force on the cone's edge "
                "(|F_t|/F_n 0.39-0.46), so it never sticks; blind model 1 is then the right mode and both "
                "controllers apply the same torques: RMSE 9.69 (blind) vs 9.70 rad/s² (paper: 11.22 vs 6.65, where "
                "the rear toe sticks and slides again near 0.45 s). At τ_max = 7 N m the toe sticks from 0.35 s, "
                "the blind detector switches (0.37-0.40 s), but both hold τ_max from ≈ 0.33 s: 8.04 vs 8.09 rad/s²",
            ),
        ),
        0.6,
    ],
)
def test_maximal_thrust_predicts_pitch_acceleration_better(mu):
    """Table V's direction: the all-modes controller's rigid model tracks the compliant robot better."""
    mt, blind = run_flip("maximal_thrust", mu), run_flip("blind", mu)
    assert mt.pitch_accel_rmse < blind.pitch_accel_rmse


@pytest.mark.slow
def test_maximal_thrust_is_faster_on_high_friction():
    """Paper IV-C.4 / Fig. 15: about 8 % faster on asphalt (here 0.490 s against 0.542 s, 9.6 %).

    The margin is not robust: it needs the blind detector not to fire while the rear toe still slides
    (margins of 7–8.5 rad/s² fire at t = 0.135 s and tie), see docs/planar_contact.md."""
    mt, blind = run_flip("maximal_thrust", 0.6), run_flip("blind", 0.6)
    assert mt.completed and blind.completed
    assert mt.flip_time_s < 0.95 * blind.flip_time_s


@pytest.mark.slow
def test_maximal_thrust_is_not_slower_on_low_friction():
    """The paper claims no speed-up on linoleum; here both controllers choose the same torques (rear toe
    sliding throughout), so the times agree; the all-modes controller must at least not lose."""
    mt, blind = run_flip("maximal_thrust", 0.39), run_flip("blind", 0.39)
    assert mt.flip_time_s <= 1.005 * blind.flip_time_s


@pytest.mark.slow
def test_body_contact_task_is_needed_to_flip(monkeypatch):
    """Ablation of the paper's body normal-force task constraint (IV-B.2, 'always kept greater than a
    threshold'): allowed to choose modes in which the body lifts off, the maximal-α̈ controller pitches the
    body up early, loses the body pivot and does not flip at all."""
    from sim.planar_contact.rhex import flip

    monkeypatch.setattr(
        flip, "make_controller", lambda name, params, b=False: MaximalThrustController(params, body_contact_task=False)
    )
    assert not run_flip("maximal_thrust", 0.6).completed


def _blind_trace(mu):
    rows = []

    def trace(sim, s, obs, cmd, tau, meas, ms):
        rows.append((s.t_s - 0.005, cmd.mode.startswith("model2"), bool(obs.toe_contact[0]), abs(s.vel[3])))

    run_flip("blind", mu, trace=trace)
    return rows


def test_blind_detector_is_tuned_on_linoleum():
    """Paper IV-C.2: the stiction detector was tuned on linoleum, where it switches accurately. On this
    benchmark's linoleum flip the rear toe never sticks after it starts sliding, so it must never switch."""
    rows = _blind_trace(0.39)
    assert not any(t > 0.1 and touching and speed < 1e-3 for t, _, touching, speed in rows)  # toe never sticks
    assert not any(model2 for _, model2, _, _ in rows)


def test_blind_detector_switches_only_after_rear_toe_sticks_on_asphalt():
    """On asphalt the rear toe sticks after it lands again; the detector fires after that, not before
    (the former 4 rad/s² margin fired at 0.135 s while the toe slid at 0.4 m/s)."""
    rows = _blind_trace(0.6)
    stuck = [t for t, _, touching, speed in rows if t > 0.1 and touching and speed < 1e-3]
    switched = [t for t, model2, _, _ in rows if model2]
    assert stuck and switched
    assert stuck[0] <= switched[0] <= stuck[0] + 0.03


def test_initial_state_is_at_rest_on_body_and_toes():
    sim = CompliantRHex(RHexParameters())
    s = initial_state(sim)
    obs = observe(sim, s)
    assert obs.body_contact and obs.toe_contact.all()
    assert np.abs(s.pos[2]) < 0.01


def test_blind_assumed_contacts_put_reachable_toes_on_the_ground():
    from sim.planar_contact.rhex.controllers import BlindController

    p = RHexParameters()
    sim = CompliantRHex(p)
    obs = observe(sim, initial_state(sim))
    blind = BlindController(p, assume_contacts=True)
    tilted = type(obs)(
        obs.body_pos + np.array([0.0, 0.0, 0.5]),
        obs.body_vel,
        obs.phi_rad,
        obs.phi_rate_rad_s,
        obs.toe_contact,
        obs.body_contact,
    )
    assumed = blind.assumed_observation(tilted)
    snap, layout = rigid_snapshot(p, assumed)
    assert layout.active_legs == (0,)  # at 0.5 rad only the rear hip is low enough
    # the assumed rear toe and the body corner sit on the ground: zero normal contact coordinates
    from sim.planar_contact.kinematics import Segment, point_kinematics

    q = np.concatenate([assumed.body_pos, assumed.phi_rad[[0]]])
    d = p.hip_offsets_m[0]
    toe, _, _ = point_kinematics(
        q, np.zeros(4), (0, 1), [Segment(abs(d), (0, 0, 1, 0), np.pi), Segment(p.leg_length_m, (0, 0, 1, 1))]
    )
    assert toe[1] == pytest.approx(0.0, abs=1e-12)
    assert blind(tilted).mode.startswith("model1 toe1:R body:R")
