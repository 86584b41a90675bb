"""The emulated modules' controller tick and drive sub-step, compiled (numba) over all modules at once.

Why: the readable path (`JointControllerEmulator._run_tick` with `controller.controller_update` and
`drive.drive_substep`) spends ~40 numpy calls per controller tick and ~15 per physics sub-step on (10, 2) arrays:
at 1 kHz x 4 sub-steps that cost more than the 3D simulator. Here the same arithmetic runs in compiled loops, and
a plant with a compiled step (``JointPlant.run_module_ticks``) runs several whole ticks per call: from one bus
event (a frame due, a watchdog trip) to the next. Frames are never built here: the kernels stop right after the
controller phase of a tick whose frames are due, and the emulator sends them through the codec and the bus.

Every expression repeats the reference's operation order, so the fast path is bit-identical to it (checked by
tests/firmware_protocol/test_emulator_fast.py). NaN handling differs (a NaN reaching the drive model propagates
differently through ``max``); the reference path rejects non-finite references before they get there.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from firmware_protocol.dbc import ModuleState

ENABLED = int(ModuleState.ENABLED)
WATCHDOG = int(ModuleState.WATCHDOG)

# kernel results: the ticks completed, and why the kernel returned before all were done
EVENT_NONE = 0  # all n_ticks ran
EVENT_FRAMES = 1  # stopped after the controller phase of tick tick0 + done: frames due or a watchdog trip
EVENT_PLANT_FAILED = 2  # the plant's step failed during tick tick0 + done (its status says why)

# indices into the float parameter array (see `module_parameters`)
P_DT = 0  # controller period, s
P_ALPHA = 1  # rate-filter coefficient per tick
P_BACK_EMF = 2  # k_t N, V s/rad at the joint
P_FEEDFORWARD = 3  # 1: back-EMF feed-forward of the reference rate
P_SUPPLY = 4  # V
P_LINEAR_HOLD = 5  # 1: extrapolate the reference with its rate
P_AT_LIMIT_MARGIN = 6  # rad
P_SUBSTEP_DT = 7  # s
P_SUBSTEPS = 8
P_RESISTANCE = 9
P_CURRENT_LIMIT = 10
P_TORQUE_PER_AMP = 11  # η N k_t
P_GEAR_VISCOUS = 12
P_HALF_FREE_PLAY = 13
P_CONTACT_STIFFNESS = 14
P_CONTACT_DAMPING = 15
P_REFLECTED_INERTIA = 16
P_SENSOR_JOINT = 17  # 1: the encoder reads the joint, 0: the gear output
N_PARAMETERS = 18


class ModuleArrays(NamedTuple):
    """The emulator's own (n, ...) arrays, modified in place by the kernels, plus per-tick scratch."""

    state: np.ndarray  # (n,) int64 ModuleState
    watchdog: np.ndarray  # (n,) bool
    watchdog_trip_s: np.ndarray
    watchdog_trips: np.ndarray  # (n,) int64
    last_valid_reference_s: np.ndarray
    watchdog_periods: np.ndarray
    reference_period_s: np.ndarray
    reference_rad: np.ndarray  # (n, 2)
    reference_rate_rad_s: np.ndarray
    reference_time_s: np.ndarray  # (n,)
    limits_rad: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    rate_estimate_rad_s: np.ndarray
    previous_measurement_rad: np.ndarray
    gear_angle_rad: np.ndarray
    gear_rate_rad_s: np.ndarray
    voltage_v: np.ndarray
    brake: np.ndarray  # (n, 2) bool
    current_limited: np.ndarray  # (n, 2) bool
    effort: np.ndarray
    at_limit: np.ndarray  # (n, 2) bool
    saturated: np.ndarray  # (n, 2) bool
    current_limited_ticks: np.ndarray  # (n, 2) int64: enabled ticks with the current limit hit in a sub-step
    enabled_axis_ticks: np.ndarray  # (1,) int64: axis-ticks while enabled (the fraction's denominator)
    demand_v: np.ndarray  # scratch (n, 2): this tick's unsaturated voltage demand
    enabled: np.ndarray  # scratch (n,) bool: enabled during this tick
    tripped: np.ndarray  # scratch (n,) bool: watchdog tripped at the start of this tick
    saturated_tick: np.ndarray  # scratch (n, 2) bool: saturation seen so far in this tick
    torques_nm: np.ndarray  # scratch (n, 2): joint torques of the current sub-step
    limited_tick: np.ndarray  # scratch (n, 2) bool: current-limited in a sub-step of this tick


def module_parameters(config) -> np.ndarray:
    """The float parameters of the kernels from an `EmulatorConfig`, computed with the reference's expressions."""
    d, g = config.drive, config.gains
    dt_s = 1.0 / config.controller_rate_hz
    prm = np.zeros(N_PARAMETERS)
    prm[P_DT] = dt_s
    prm[P_ALPHA] = dt_s / (dt_s + 1.0 / (2.0 * np.pi * g.rate_filter_hz))
    prm[P_BACK_EMF] = d.torque_constant_nm_a * d.gear_ratio
    prm[P_FEEDFORWARD] = float(g.back_emf_feedforward)
    prm[P_SUPPLY] = d.supply_v
    prm[P_LINEAR_HOLD] = float(config.reference_hold == "linear")
    prm[P_AT_LIMIT_MARGIN] = math.radians(0.5)
    prm[P_SUBSTEP_DT] = dt_s / config.physics_substeps
    prm[P_SUBSTEPS] = config.physics_substeps
    prm[P_RESISTANCE] = d.resistance_ohm
    prm[P_CURRENT_LIMIT] = d.current_limit_a
    prm[P_TORQUE_PER_AMP] = d.gear_efficiency * d.gear_ratio * d.torque_constant_nm_a
    prm[P_GEAR_VISCOUS] = d.gear_viscous_nm_s_rad
    prm[P_HALF_FREE_PLAY] = 0.5 * d.free_play_rad
    prm[P_CONTACT_STIFFNESS] = d.contact_stiffness_nm_rad
    prm[P_CONTACT_DAMPING] = d.contact_damping_nm_s_rad
    prm[P_REFLECTED_INERTIA] = d.reflected_inertia_kg_m2
    prm[P_SENSOR_JOINT] = float(config.sensor == "joint")
    return prm


@njit(cache=True)
def _clip(x, low, high):
    return min(max(x, low), high)


@njit(cache=True)
def begin_tick(tick, prm, m, measurement, feedback_divisor, heartbeat_divisor):
    """Watchdog and controller phase of one tick for every module (``_run_tick`` up to the frames).

    Returns True if the emulator must act before the physics of this tick: frames are due or a watchdog tripped."""
    n = m.state.shape[0]
    dt = prm[P_DT]
    t = tick * dt
    supply = prm[P_SUPPLY]
    alpha = prm[P_ALPHA]
    any_tripped = False
    for r in range(n):
        enabled = m.state[r] == ENABLED
        timeout_s = m.watchdog_periods[r] * m.reference_period_s[r]
        tripped = enabled and (t - m.last_valid_reference_s[r] > timeout_s + 1e-9)
        m.tripped[r] = tripped
        if tripped:
            any_tripped = True
            m.state[r] = WATCHDOG
            m.watchdog[r] = True
            m.watchdog_trip_s[r] = t
            m.watchdog_trips[r] += 1
            enabled = False
        m.enabled[r] = enabled
        for a in range(2):
            lim = m.limits_rad[r, a]
            x = measurement[r, a]
            reference = _clip(m.reference_rad[r, a], -lim, lim)
            rate = m.reference_rate_rad_s[r, a]
            if prm[P_LINEAR_HOLD] != 0.0:
                reference = _clip(reference + rate * (t - m.reference_time_s[r]), -lim, lim)
            if abs(reference) >= lim and reference * rate > 0:
                rate = 0.0  # at a limit, a feed-forward pointing outwards would hold the joint beyond it
            raw_rate = (x - m.previous_measurement_rad[r, a]) / dt
            m.rate_estimate_rad_s[r, a] += alpha * (raw_rate - m.rate_estimate_rad_s[r, a])
            m.previous_measurement_rad[r, a] = x
            demand = m.kp[r, a] * (reference - x) + m.kd[r, a] * (rate - m.rate_estimate_rad_s[r, a])
            if prm[P_FEEDFORWARD] != 0.0:
                demand += prm[P_BACK_EMF] * rate
            m.demand_v[r, a] = demand
            voltage = _clip(demand, -supply, supply) if enabled else 0.0
            m.voltage_v[r, a] = voltage
            m.brake[r, a] = not enabled
            m.effort[r, a] = voltage / supply
            m.at_limit[r, a] = abs(x) >= lim - prm[P_AT_LIMIT_MARGIN]
            m.saturated_tick[r, a] = abs(demand) > supply
            m.limited_tick[r, a] = False
    if any_tripped or (heartbeat_divisor > 0 and tick % heartbeat_divisor == 0):
        return True
    for r in range(n):
        if feedback_divisor[r] > 0 and tick % feedback_divisor[r] == 0:
            return True
    return False


@njit(cache=True)
def drive_substep(prm, m, joint_angle, joint_rate):
    """One physics sub-step of every gear (``drive.drive_substep``): the torques on the joints go to m.torques_nm."""
    dt = prm[P_SUBSTEP_DT]
    half = prm[P_HALF_FREE_PLAY]
    limit = prm[P_CURRENT_LIMIT]
    n = m.gear_angle_rad.shape[0]
    for r in range(n):
        for a in range(2):
            gear_rate = m.gear_rate_rad_s[r, a]
            gap = m.gear_angle_rad[r, a] - joint_angle[r, a]
            sign = 1.0 if gap > 0.0 else (-1.0 if gap < 0.0 else 0.0)
            penetration = sign * max(abs(gap) - half, 0.0)
            coupling = prm[P_CONTACT_STIFFNESS] * penetration + (
                prm[P_CONTACT_DAMPING] * (gear_rate - joint_rate[r, a]) if penetration != 0.0 else 0.0
            )
            voltage = 0.0 if m.brake[r, a] else m.voltage_v[r, a]
            current = (voltage - prm[P_BACK_EMF] * gear_rate) / prm[P_RESISTANCE]
            limited = abs(current) > limit
            m.current_limited[r, a] = limited
            if limited:
                m.saturated_tick[r, a] = True
                m.limited_tick[r, a] = True
            drive = prm[P_TORQUE_PER_AMP] * _clip(current, -limit, limit)
            accel = (drive - coupling - prm[P_GEAR_VISCOUS] * gear_rate) / prm[P_REFLECTED_INERTIA]
            gear_rate += dt * accel
            m.gear_rate_rad_s[r, a] = gear_rate
            m.gear_angle_rad[r, a] += dt * gear_rate
            m.torques_nm[r, a] = coupling


@njit(cache=True)
def end_tick(m):
    """The SATURATED flag of this tick: demand beyond the supply or current-limited in a sub-step, while enabled;
    and the current-limit counters (``JointControllerEmulator.counters``)."""
    n = m.saturated.shape[0]
    for r in range(n):
        for a in range(2):
            m.saturated[r, a] = m.saturated_tick[r, a] and m.enabled[r]
            if m.limited_tick[r, a] and m.enabled[r]:
                m.current_limited_ticks[r, a] += 1
        if m.enabled[r]:
            m.enabled_axis_ticks[0] += 2


@njit(cache=True)
def inertia_advance(angles, rates, torques, limits, inertia, damping, dt):
    """``IndependentInertiaPlant.advance``: semi-implicit Euler with inelastic stops, in place."""
    n = angles.shape[0]
    for r in range(n):
        for a in range(2):
            rate = rates[r, a] + dt * (torques[r, a] - damping * rates[r, a]) / inertia
            angle = angles[r, a] + dt * rate
            if abs(angle) > limits[a]:
                angle = _clip(angle, -limits[a], limits[a])
                rate = 0.0
            angles[r, a] = angle
            rates[r, a] = rate


@njit(cache=True)
def run_ticks_inertia(
    n_ticks, tick0, resume, prm, m, feedback_divisor, heartbeat_divisor, angles, rates, limits, inertia, damping
):
    """Up to n_ticks whole ticks of the modules on `IndependentInertiaPlant`; returns (ticks done, event).

    ``resume``: the controller phase of tick0 already ran (the kernel stopped there for frames): start at its
    physics. With EVENT_FRAMES the controller phase of tick ``tick0 + done`` has run and its physics has not."""
    substeps = int(prm[P_SUBSTEPS])
    dt = prm[P_SUBSTEP_DT]
    sensor_joint = prm[P_SENSOR_JOINT] != 0.0
    for i in range(n_ticks):
        if not (resume and i == 0):
            measurement = angles if sensor_joint else m.gear_angle_rad
            if begin_tick(tick0 + i, prm, m, measurement, feedback_divisor, heartbeat_divisor):
                return i, EVENT_FRAMES
        for _ in range(substeps):
            drive_substep(prm, m, angles, rates)
            inertia_advance(angles, rates, m.torques_nm, limits, inertia, damping, dt)
        end_tick(m)
    return n_ticks, EVENT_NONE


@njit(cache=True)
def run_driven_period_inertia(
    prm, gear_angle, gear_rate, voltage, brake, current_limited, limited, duty, supply, angles, rates, limits,
    inertia, damping,
):  # fmt: skip
    """One controller period of the drives and `IndependentInertiaPlant` with the voltages given per sub-step (the
    firmware in the AVR simulator commands them: ``duty`` (n, substeps, 2), -1..1 of ``supply``), as the
    readable loop of `firmware.FirmwareModules` (``drive.drive_substep``, ``plant.advance``); the current limit of
    any sub-step is collected in ``limited``. The arrays come one by one (a call with the 31-array `ModuleArrays`
    costs ~1 ms of type checks, once per period here); the tuple the drive step needs is built inside."""
    n = angles.shape[0]
    dt = prm[P_SUBSTEP_DT]
    z1, z2, b1, b2 = np.zeros(n), np.zeros((n, 2)), np.zeros(n, np.bool_), np.zeros((n, 2), np.bool_)
    i1, i2 = np.zeros(n, np.int64), np.zeros((n, 2), np.int64)
    m = ModuleArrays(
        i1, b1, z1, i1, z1, z1, z1, z2, z2, z1, z2, z2, z2, z2, z2, gear_angle, gear_rate, voltage, brake,
        current_limited, z2, b2, b2, i2, np.zeros(1, np.int64), z2, b1, b1, np.zeros((n, 2), np.bool_),
        np.zeros((n, 2)), limited,
    )  # fmt: skip
    for r in range(n):
        for a in range(2):
            limited[r, a] = False
            brake[r, a] = False
    for s in range(duty.shape[1]):
        for r in range(n):
            for a in range(2):
                voltage[r, a] = duty[r, s, a] * supply
        drive_substep(prm, m, angles, rates)
        inertia_advance(angles, rates, m.torques_nm, limits, inertia, damping, dt)
