"""A flipping run: a controller at a fixed rate driving the compliant benchmark model (paper 003, IV-C)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from ..modes import classify_contacts
from .compliant import CompliantRHex, CompliantState
from .controllers import BlindController, Command, MaximalThrustController
from .params import RHexParameters
from .rigid import RigidObservation, rigid_snapshot

LOG = logging.getLogger(__name__)
CONTROLLERS = ("maximal_thrust", "blind")
TOE_CONTACT_HEIGHT_M = 1e-6
BODY_CONTACT_HEIGHT_M = 1e-3  # the padded body counts as touching within 1 mm
#: PD holding an airborne leg at its lift-off angle; soft enough to stay stable at the 200 Hz zero-order hold
#: (toe inertia m_t l² = 1.4e-3 kg m²: ω ≈ 19 rad/s, ζ ≈ 0.27).
HOLD_KP_NM_RAD, HOLD_KD_NMS_RAD = 0.5, 0.02
REACH_TORQUE_NM, REACH_HEIGHT_FRACTION = 1.0, 0.95


@dataclass(frozen=True)
class FlipResult:
    controller: str
    mu_toe: float
    completed: bool
    flip_time_s: float | None  # first time the body passes vertical (α >= π/2)
    pitch_accel_rmse: float  # rad/s², predicted vs simulated α̈, t = 0 to the flip, intervals without impacts
    pitch_accel_rmse_all_intervals: float  # the same including intervals in which a contact is made
    controller_step_ms: np.ndarray  # wall clock per controller call
    controller_step_cpu_ms: np.ndarray  # process CPU time per call (insensitive to other processes)
    t_s: np.ndarray  # control instants
    alpha_rad: np.ndarray
    alpha_ddot_predicted: np.ndarray
    alpha_ddot_simulated: np.ndarray  # mean over each control interval
    tau_Nm: np.ndarray  # (n, 3)
    modes: tuple[str, ...]

    def summary(self) -> dict:
        steps = self.controller_step_ms
        return {
            "controller": self.controller,
            "mu_toe": self.mu_toe,
            "completed": self.completed,
            "flip_time_s": self.flip_time_s,
            "pitch_accel_rmse": self.pitch_accel_rmse,
            "pitch_accel_rmse_all_intervals": self.pitch_accel_rmse_all_intervals,
            "controller_step_ms_p95": float(np.percentile(steps, 95)) if steps.size else None,
            "controller_step_ms_median": float(np.median(steps)) if steps.size else None,
            "controller_step_cpu_ms_p95": float(np.percentile(self.controller_step_cpu_ms, 95)) if steps.size else None,
            "controller_steps": int(steps.size),
            "predicted_fraction": float(np.mean(np.isfinite(self.alpha_ddot_predicted))) if steps.size else None,
        }


def observe(sim: CompliantRHex, s: CompliantState) -> RigidObservation:
    _, phi, phi_rate = sim.leg_geometry(s)
    toes = sim.toes(s.pos)
    toe_contact = toes[:, 1] <= TOE_CONTACT_HEIGHT_M
    p = sim.params
    _, z, a = s.pos[:3]
    corner_z = z - p.half_length_m * np.sin(a) - p.half_height_m * np.cos(a)  # rear-bottom corner height
    top_z = z - p.half_length_m * np.sin(a) + p.half_height_m * np.cos(a)  # rear-top corner height
    return RigidObservation(
        s.pos[:3].copy(),
        s.vel[:3].copy(),
        phi,
        phi_rate,
        toe_contact,
        bool(corner_z <= BODY_CONTACT_HEIGHT_M),
        bool(top_z <= BODY_CONTACT_HEIGHT_M),
    )


def contact_approaching(params: RHexParameters, obs: RigidObservation) -> bool:
    """Is a sensed contact closing faster than its normal-velocity threshold (an impact in progress)?

    The rigid model has no impact law (III-B): such an interval has no consistent mode. Judged from the
    observation alone, so that Table V's RMSE leaves out the same intervals whichever controller runs
    (otherwise a controller that declines to predict there would score better than one that predicts).
    """
    snap, _ = rigid_snapshot(params, obs, with_task=False)
    return bool(len(snap.contact_names) and np.any(classify_contacts(snap).approaching))


def airborne_leg_torques(
    sim: CompliantRHex, s: CompliantState, obs: RigidObservation, tau: np.ndarray, hold_phi: np.ndarray
) -> np.ndarray:
    """Torques for legs whose toes are off the ground (the controllers only command legs in contact).

    A leg whose hip is low enough for the toe to reach the ground keeps sweeping towards it with
    `REACH_TORQUE_NM` (the thrust direction), so a rear leg that bounced off re-engages; any other leg is
    held at its lift-off angle by a soft PD. `hold_phi` (nan = not yet captured) is updated in place.
    """
    p = sim.params
    tau = tau.copy()
    hips = sim.hips(s.pos)
    for i in range(3):
        if obs.toe_contact[i]:
            hold_phi[i] = np.nan
            continue
        if hips[i, 1] < REACH_HEIGHT_FRACTION * p.leg_length_m:
            tau[i] = -REACH_TORQUE_NM
            hold_phi[i] = np.nan
            continue
        if np.isnan(hold_phi[i]):
            hold_phi[i] = obs.phi_rad[i]
        err = np.mod(obs.phi_rad[i] - hold_phi[i] + np.pi, 2 * np.pi) - np.pi
        tau[i] = np.clip(
            -HOLD_KP_NM_RAD * err - HOLD_KD_NMS_RAD * obs.phi_rate_rad_s[i],
            -p.torque_limit_Nm,
            p.torque_limit_Nm,
        )
    return tau


def initial_state(sim: CompliantRHex, settle_s: float = 0.3) -> CompliantState:
    """Body flat on the ground, all legs pointing forward-down with the toes on the ground; settled."""
    p = sim.params
    psi = -np.arcsin(p.half_height_m / p.leg_length_m)
    s = sim.state_from_pose(0.0, p.half_height_m, 0.0, [psi] * 3)
    _, phi0, _ = sim.leg_geometry(s)
    for _ in range(int(settle_s / 0.001)):
        _, phi, rate = sim.leg_geometry(s)
        sim.step(s, np.clip(-40.0 * (phi - phi0) - 1.0 * rate, -20, 20), 0.001)
    s.vel[:] = 0.0
    s.t_s = 0.0
    return s


def make_controller(name: str, params: RHexParameters, blind_assumes_contacts: bool = False):
    if name == "maximal_thrust":
        return MaximalThrustController(params)
    if name == "blind":
        return BlindController(params, assume_contacts=blind_assumes_contacts)
    raise ValueError(f"unknown controller {name!r}; allowed: {', '.join(CONTROLLERS)}")


def run_flip(
    controller: str,
    mu_toe: float,
    params: RHexParameters | None = None,
    rate_hz: float = 200.0,
    t_max_s: float = 1.5,
    dt_s: float | None = None,
    trace=None,
    blind_assumes_contacts: bool = False,
) -> FlipResult:
    params = (params or RHexParameters()).with_mu_toe(mu_toe)
    sim = CompliantRHex(params) if dt_s is None else CompliantRHex(params, dt_s)
    ctrl = make_controller(controller, params, blind_assumes_contacts)
    s = initial_state(sim)
    period = 1.0 / rate_hz
    hold_phi = np.full(3, np.nan)
    rows_t, rows_a, rows_pred, rows_sim, rows_tau, modes, step_ms, step_cpu_ms = [], [], [], [], [], [], [], []
    rows_impact: list[bool] = []
    flip_time = None
    last_measured = float("nan")
    while s.t_s < t_max_s:
        obs = observe(sim, s)
        if isinstance(ctrl, BlindController) and np.isfinite(last_measured):
            ctrl.observe_alpha_ddot(last_measured)
        t0, c0 = time.perf_counter(), time.process_time()
        cmd: Command = ctrl(obs)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        step_cpu_ms.append((time.process_time() - c0) * 1e3)
        tau = cmd.tau_Nm.copy()
        tau = airborne_leg_torques(sim, s, obs, tau, hold_phi)
        w0 = s.vel[2]
        sim.step(s, tau, period)
        last_measured = (s.vel[2] - w0) / period
        after = observe(sim, s)
        touched = bool(
            np.any(after.toe_contact & ~obs.toe_contact)
            or (after.body_contact and not obs.body_contact)
            or (after.rear_top_contact and not obs.rear_top_contact)
        )
        rows_impact.append(touched or contact_approaching(params, obs))
        rows_t.append(s.t_s - period)
        rows_a.append(obs.body_pos[2])
        rows_pred.append(cmd.predicted_alpha_ddot)
        rows_sim.append(last_measured)
        rows_tau.append(tau)
        modes.append(cmd.mode)
        if trace is not None:
            trace(sim, s, obs, cmd, tau, last_measured, step_ms[-1])
        if s.pos[2] >= np.pi / 2:  # crossing time, linear in α within the control interval
            a0, a1 = obs.body_pos[2], s.pos[2]
            flip_time = s.t_s - period + period * (np.pi / 2 - a0) / (a1 - a0)
            break
        if s.pos[2] < -0.3:
            break
    pred, simu = np.array(rows_pred), np.array(rows_sim)
    ok = np.isfinite(pred)
    rmse_all = float(np.sqrt(np.mean((pred[ok] - simu[ok]) ** 2))) if ok.any() else float("nan")
    # the rigid model has no impacts (paper III-B): intervals in which a contact is made, or starts closing
    # faster than its threshold, are left out
    smooth = ok & ~np.array(rows_impact, bool)
    rmse = float(np.sqrt(np.mean((pred[smooth] - simu[smooth]) ** 2))) if smooth.any() else float("nan")
    return FlipResult(
        controller,
        mu_toe,
        flip_time is not None,
        flip_time,
        rmse,
        rmse_all,
        np.array(step_ms),
        np.array(step_cpu_ms),
        np.array(rows_t),
        np.array(rows_a),
        pred,
        simu,
        np.array(rows_tau),
        tuple(modes),
    )
