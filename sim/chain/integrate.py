"""Time integration of the chain: fixed-step classical RK4 (the paper's choice) or scipy's solve_ivp."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.chain.dynamics import forward_dynamics
from sim.chain.kinematics import check_coordinates
from sim.chain.model import Chain, ChainModelError

#: tau(t_s, q, q_dot) -> joint torques (n,); None means a passive chain (gravity only).
TorqueFunction = Callable[[float, np.ndarray, np.ndarray], np.ndarray]

SOLVE_IVP_METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


@dataclass(frozen=True)
class ChainTrajectory:
    """Samples of a run (like scipy's OdeResult: arrays plus a success flag and a message)."""

    t_s: np.ndarray  # (k,)
    q: np.ndarray  # (k, n)
    q_dot: np.ndarray  # (k, n)
    success: bool
    message: str
    n_rhs_evaluations: int


class _StateNotFinite(Exception):
    """Raised inside an integration when a stage state overflowed; turned into an unsuccessful trajectory."""


def _rhs(chain: Chain, torque: TorqueFunction | None):
    def f(t: float, q: np.ndarray, q_dot: np.ndarray) -> np.ndarray:
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(q_dot))):
            raise _StateNotFinite(f"non-finite state at t = {t:.6g} s")
        tau = None if torque is None else np.asarray(torque(t, q, q_dot), dtype=float)
        return forward_dynamics(chain, q, q_dot, tau)

    return f


def rk4_step(
    chain: Chain,
    q: np.ndarray,
    q_dot: np.ndarray,
    t_s: float,
    dt_s: float,
    torque: TorqueFunction | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One classical Runge-Kutta step of (q, q_dot); torque is sampled at t, t + dt/2 (twice) and t + dt."""
    f = _rhs(chain, torque)
    k1q, k1v = q_dot, f(t_s, q, q_dot)
    h2 = 0.5 * dt_s
    k2q, k2v = q_dot + h2 * k1v, f(t_s + h2, q + h2 * k1q, q_dot + h2 * k1v)
    k3q, k3v = q_dot + h2 * k2v, f(t_s + h2, q + h2 * k2q, q_dot + h2 * k2v)
    k4q, k4v = q_dot + dt_s * k3v, f(t_s + dt_s, q + dt_s * k3q, q_dot + dt_s * k3v)
    w = dt_s / 6.0
    return q + w * (k1q + 2 * k2q + 2 * k3q + k4q), q_dot + w * (k1v + 2 * k2v + 2 * k3v + k4v)


def simulate(
    chain: Chain,
    q0: np.ndarray,
    q_dot0: np.ndarray,
    duration_s: float,
    dt_s: float,
    torque: TorqueFunction | None = None,
    method: str = "rk4",
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> ChainTrajectory:
    """Integrate from (q0, q_dot0) over [0, duration_s], sampled every dt_s.

    method "rk4" takes fixed RK4 steps of dt_s; any scipy solve_ivp method (e.g. "DOP853") integrates
    adaptively to rtol/atol and reports at the same sample times.
    """
    q0 = check_coordinates(chain, q0, "q0")
    q_dot0 = check_coordinates(chain, q_dot0, "q_dot0")
    if not (duration_s > 0 and dt_s > 0):
        raise ChainModelError(f"duration_s and dt_s must be > 0, got {duration_s!r} and {dt_s!r}")
    n_steps = int(round(duration_s / dt_s))
    if n_steps < 1 or abs(n_steps * dt_s - duration_s) > 1e-9 * duration_s:
        raise ChainModelError(f"duration_s = {duration_s} must be a whole number of steps dt_s = {dt_s}")
    t = dt_s * np.arange(n_steps + 1)
    n = chain.n_bodies
    if method == "rk4":
        q = np.empty((n_steps + 1, n))
        v = np.empty((n_steps + 1, n))
        q[0], v[0] = q0, q_dot0
        for k in range(n_steps):
            with np.errstate(over="ignore", invalid="ignore"):
                try:
                    q[k + 1], v[k + 1] = rk4_step(chain, q[k], v[k], t[k], dt_s, torque)
                except _StateNotFinite:  # a stage state overflowed
                    q[k + 1] = v[k + 1] = np.nan
            if not (np.all(np.isfinite(q[k + 1])) and np.all(np.isfinite(v[k + 1]))):
                message = f"state diverged (non-finite) during the RK4 step ending at t = {t[k + 1]:.6g} s"
                return ChainTrajectory(t[: k + 1], q[: k + 1], v[: k + 1], False, message, 4 * (k + 1))
        return ChainTrajectory(t, q, v, True, f"{n_steps} RK4 steps of {dt_s} s", 4 * n_steps)
    if method not in SOLVE_IVP_METHODS:
        raise ChainModelError(f"method must be 'rk4' or one of {SOLVE_IVP_METHODS}, got {method!r}")
    f = _rhs(chain, torque)
    # imported here: scipy.integrate (with scipy.sparse and scipy.optimize) is ~0.4 s of start-up for every command
    # that imports sim.chain, and only this adaptive path uses it
    from scipy.integrate import solve_ivp

    def rhs(t_s: float, y: np.ndarray) -> np.ndarray:
        return np.concatenate([y[n:], f(t_s, y[:n], y[n:])])

    try:
        with np.errstate(over="ignore", invalid="ignore"):
            y0 = np.concatenate([q0, q_dot0])
            sol = solve_ivp(rhs, (0.0, t[-1]), y0, method=method, t_eval=t, rtol=rtol, atol=atol)
    except _StateNotFinite as exc:  # the state left the finite range inside the solver
        return ChainTrajectory(t[:1], q0[None], q_dot0[None], False, f"{method} diverged: {exc}", 0)
    return ChainTrajectory(sol.t, sol.y[:n].T, sol.y[n:].T, bool(sol.success), str(sol.message), int(sol.nfev))
