"""The paper's three runs (Transeth et al., Sec. VIII) on the 3D simulator, driven by the shared serpenoid gait.

Used by the tests (qualitative outcomes of Figs. 6, 7, 9–11) and by ``benchmarks/sim_speed.py``. The references are
sampled from :mod:`aiko.robots.aiko.gait` and held between samples at ``reference_rate_hz`` (10 Hz on Aiko); pass
``reference_rate_hz=None`` to sample the gait at every simulator step instead.

The paper simulated the continuous gait; :func:`run_as_paper` runs that way (``PAPER_REFERENCE_RATE_HZ``), as do
the experiment files ``experiments/paper/*.toml`` (``[sim] reference_hold = false``) that ``aiko run`` and sweeps
use (``PAPER_EXPERIMENTS``). :func:`run_paper`'s default stays the robot's 10 Hz hold, as for the HIL bench and the
real robot; docs/snake3d.md gives link 6's 15 s distance both ways.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from aiko.robots.aiko.gait import PRESETS, SerpenoidGait
from sim.snake3d import SnakeModel, SnakeSimulator, posture_state

log = logging.getLogger(__name__)

# friction of each run (Sec. VIII-B: orthotropic 0.1 / 0.5; VIII-C: isotropic 0.2 measured on particle board)
RUNS: dict[str, tuple[str, float, float]] = {
    "lateral_undulation_orthotropic": ("lateral_undulation_orthotropic", 0.1, 0.5),
    "lateral_undulation_isotropic": ("lateral_undulation_isotropic", 0.2, 0.2),
    "lateral_undulation": ("lateral_undulation_isotropic", 0.2, 0.2),
    "sidewinding": ("sidewinding", 0.2, 0.2),
}
TRACKED_LINK = 6
PAPER_REFERENCE_RATE_HZ: float | None = None  # the paper's setting: the gait sampled at every simulator step
PAPER_EXPERIMENTS: dict[str, Path] = {  # the same runs as experiment files, with the paper's setting
    name: Path(__file__).resolve().parents[3] / "experiments" / "paper" / f"{preset}.toml"
    for name, (preset, _, _) in RUNS.items()
}


@dataclass
class PaperRunResult:
    name: str
    times_s: np.ndarray  # samples of the tracked point at 20 Hz (Vicon's rate)
    tracked_m: np.ndarray  # (k, 3) centre of link 6
    lifted_fraction: np.ndarray  # fraction of contact spheres off the ground at each sample
    sim_time_s: float
    wall_time_s: float
    cpu_time_s: float
    steps: int
    newton_iterations_mean: float
    newton_iterations_max: int
    simulator: SnakeSimulator

    @property
    def realtime_factor(self) -> float:
        return self.sim_time_s / self.wall_time_s if self.wall_time_s > 0 else math.inf

    @property
    def cpu_realtime_factor(self) -> float:
        """Simulated time per CPU second of this process: the speed on an unshared core."""
        return self.sim_time_s / self.cpu_time_s if self.cpu_time_s > 0 else math.inf


def paper_model(name: str, **overrides: float) -> tuple[SnakeModel, SerpenoidGait]:
    if name not in RUNS:
        raise ValueError(f"unknown paper run {name!r}; known: {', '.join(sorted(RUNS))}")
    preset, mux, muy = RUNS[name]
    model = replace(SnakeModel(mu_longitudinal=mux, mu_transversal=muy), **overrides)
    return model, SerpenoidGait(PRESETS[preset], model.n_joints)


def run_as_paper(name: str, duration_s: float, **model_overrides: float) -> PaperRunResult:
    """One of the paper's runs as the paper ran it: the joint controllers follow the continuous gait."""
    return run_paper(name, duration_s, reference_rate_hz=PAPER_REFERENCE_RATE_HZ, **model_overrides)


def run_paper(
    name: str,
    duration_s: float,
    reference_rate_hz: float | None = 10.0,
    sample_rate_hz: float = 20.0,
    **model_overrides: float,
) -> PaperRunResult:
    """Run one of the paper's runs from the gait's initial posture (head along +x, link 6 at the origin)."""
    model, gait = paper_model(name, **model_overrides)
    start = gait.initial_posture()
    angles = np.column_stack([start.angle_h_rad, start.angle_v_rad])
    sim = SnakeSimulator(model, posture_state(model, angles, head_direction_rad=0.0, centre_link=TRACKED_LINK))
    dt = model.dt_s
    n_steps = int(round(duration_s / dt))
    ref_every = n_steps + 1 if reference_rate_hz is None else max(1, int(round(1.0 / (reference_rate_hz * dt))))
    sample_every = max(1, int(round(1.0 / (sample_rate_hz * dt))))
    times, tracked, lifted = [], [], []
    wall = time.perf_counter()
    cpu = time.process_time()
    last_log = wall
    k = 0
    while k <= n_steps:
        if k % sample_every == 0:
            times.append(k * dt)
            tracked.append(sim.state.position_m[TRACKED_LINK - 1].copy())
            lifted.append(float(np.mean(sim.impulses[:, 0] == 0.0)) if k else 0.0)
        if k == n_steps:
            break
        if reference_rate_hz is None or k % ref_every == 0:
            refs = gait.references(k * dt)
            sim.set_references(
                np.column_stack([refs.angle_h_rad, refs.angle_v_rad]),
                np.column_stack([refs.rate_h_rad_s, refs.rate_v_rad_s]),
            )
        chunk = 1 if reference_rate_hz is None else ref_every - k % ref_every
        chunk = min(chunk, sample_every - k % sample_every, n_steps - k)
        sim.step(chunk)
        k += chunk
        if time.perf_counter() - last_log > 10.0:
            last_log = time.perf_counter()
            log.info("%s: t = %.2f / %.2f s (%.2fx realtime)", name, k * dt, duration_s, k * dt / (last_log - wall))
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return PaperRunResult(
        name,
        np.array(times),
        np.array(tracked),
        np.array(lifted),
        n_steps * dt,
        wall,
        cpu,
        sim.stats.steps,
        sim.stats.newton_iterations_mean,
        sim.stats.max_sweeps,
        sim,
    )
