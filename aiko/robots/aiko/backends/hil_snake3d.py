"""The 3D simulator (`sim.snake3d`) as the HIL plant, and the compiled loop of the emulated modules on it.

Why a loop here: per physics sub-step the emulated gears need the joint state and the simulator needs the gears'
torques, 4000 times per simulated second. Through Python that exchange (set_torques, step, joint_state, the
numpy drive model) cost ~3x the physics itself. `run_ticks_snake3d` does whole controller ticks in one compiled
call: the modules' helpers of `firmware_protocol.emulator.fast` and the simulator's `run_steps`/`joint_state`,
with the same operations in the same order as the reference path (bit-identical: tests/aiko/robots/aiko/backends/
test_hil_fast.py). It lives here because it joins two packages that know nothing of each other.

numba's cache knows only the file of the cached function: a change to a function it calls in another file would
not recompile it. The kernel is therefore built by a factory whose closure holds a digest of every source file it
compiles in; a changed digest is a different cache key (numba hashes the closure's cell contents into the key).
The closure holds that string and nothing else: the helpers it calls are this module's globals and its constants
plain numbers. A closure over numba dispatchers (as the first version had) gets a new key in every process,
because a pickled dispatcher carries its per-process uuid: every run compiled the kernel again (~8 s) and added an
index entry (`NUMBA_DEBUG_CACHE=1` showed "data saved" on every run; tests/aiko/robots/aiko/backends/
test_hil_kernel_cache.py checks a second process only loads).

The kernel releases the interpreter lock (``nogil``): in real time the PC side's threads are not held up by a
batch of ticks; in lockstep the log's writer thread may work while it runs, though little does (the lockstep hands
it ~1.5 ms of work a call, and the run's Python between calls takes the lock back: `make run` measured no faster).
What it writes are the simulator's and the modules' own arrays, which other threads read only between batches
(``BusTransport.plant_link_poses``).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

import sim.snake3d.fast as sim_fast
from firmware_protocol.emulator import fast as module_fast
from firmware_protocol.emulator.fast import ModuleArrays
from sim.snake3d.plant import Snake3DPlant


def _sources_digest() -> str:
    """SHA-256 over the sources compiled into the kernel: sim/snake3d/*.py and the emulator's kernels."""
    files = sorted(Path(sim_fast.__file__).parent.glob("*.py"))
    files += [Path(module_fast.__file__), Path(module_fast.__file__).parents[1] / "dbc.py"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# The kernel's helpers and constants, as module globals (numba freezes them at compile time; see the docstring).
begin_tick, drive_substep, end_tick = module_fast.begin_tick, module_fast.drive_substep, module_fast.end_tick
run_steps, sim_joint_state = sim_fast.run_steps, sim_fast.joint_state
P_SUBSTEPS, P_SENSOR_JOINT = module_fast.P_SUBSTEPS, module_fast.P_SENSOR_JOINT
EVENT_NONE, EVENT_FRAMES = module_fast.EVENT_NONE, module_fast.EVENT_FRAMES
EVENT_PLANT_FAILED, STATUS_OK, P_DT = module_fast.EVENT_PLANT_FAILED, sim_fast.STATUS_OK, sim_fast.P_DT


def _make_kernel(sources_digest: str):
    """The compiled batch of ticks, with ``sources_digest`` (a str) its only captured value: the cache key."""

    @njit(cache=True, nogil=True)
    def run_ticks_snake3d(
        n_ticks, tick0, resume, prm, m, feedback_divisor, heartbeat_divisor,
        pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, sim_prm, obstacles, t_s, impulses,
        out_stats, totals, diagnostics, angles, rates,
    ):  # fmt: skip
        """Up to n_ticks controller ticks of the modules on the simulator (semantics of
        `firmware_protocol.emulator.fast.run_ticks_inertia`); returns (ticks done, event, status, t_s)."""
        if len(sources_digest) == 0:  # the digest is only a cache key
            return 0, EVENT_NONE, STATUS_OK, t_s
        substeps = int(prm[P_SUBSTEPS])
        sensor_joint = prm[P_SENSOR_JOINT] != 0.0
        dt = sim_prm[P_DT]
        nj = angles.shape[0]
        for i in range(n_ticks):
            if not (resume and i == 0):
                measurement = angles if sensor_joint else m.gear_angle_rad
                if begin_tick(tick0 + i, prm, m, measurement, feedback_divisor, heartbeat_divisor):
                    return i, EVENT_FRAMES, STATUS_OK, t_s
            for _ in range(substeps):
                drive_substep(prm, m, angles, rates)
                for r in range(nj):
                    feedforward[r, 0] = m.torques_nm[r, 0]
                    feedforward[r, 1] = m.torques_nm[r, 1]
                status, done = run_steps(
                    1, pos, quat, vel, omg, cache, ref_angle, ref_rate, gains, feedforward, sim_prm, obstacles, t_s,
                    impulses, out_stats, totals, diagnostics,
                )  # fmt: skip
                t_s += done * dt
                if status != STATUS_OK:
                    return i, EVENT_PLANT_FAILED, status, t_s
                sim_joint_state(quat, omg, angles, rates)
            end_tick(m)
        return n_ticks, EVENT_NONE, STATUS_OK, t_s

    return run_ticks_snake3d


run_ticks_snake3d = _make_kernel(_sources_digest())


class Snake3DHilPlant:
    """`sim.snake3d.plant.Snake3DPlant` as a ``JointPlant``: with its time step, link poses, solver statistics and
    the compiled batch of module ticks (``run_module_ticks``)."""

    def __init__(self, plant: Snake3DPlant) -> None:
        self.plant = plant
        self.physics_dt_s: float | None = plant.simulator.model.dt_s

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Read at every physics sub-step on the reference path (``run_module_ticks`` reads the simulator's arrays
        in compiled code): computed in the compiled step (``fast.joint_state``), copied out."""
        return self.plant.joint_state()

    def advance(self, torques_nm: np.ndarray, dt_s: float) -> None:
        self.plant.advance(torques_nm, dt_s)

    def run_module_ticks(
        self,
        n_ticks: int,
        tick0: int,
        resume: bool,
        parameters: np.ndarray,
        arrays: ModuleArrays,
        feedback_divisor: np.ndarray,
        heartbeat_divisor: int,
    ) -> tuple[int, int, Exception | None]:
        """Whole ticks in one compiled call; the simulator's time and statistics are updated as ``step`` does,
        and a failed step returns the simulator's own error (the emulator counts the ticks done, then raises it)."""
        sim = self.plant.simulator
        if abs(parameters[module_fast.P_SUBSTEP_DT] - sim.model.dt_s) > 1e-12:
            raise ValueError(
                f"the emulator's physics sub-step {parameters[module_fast.P_SUBSTEP_DT]} s is not the simulator's "
                f"dt_s = {sim.model.dt_s} s"
            )
        start = time.perf_counter()
        s = sim.state
        sim.gains[:] = 0.0  # external-torque mode, as set_torques
        sim._totals[:] = 0
        done, event, status, s.t_s = run_ticks_snake3d(
            n_ticks, tick0, resume, parameters, arrays, feedback_divisor, heartbeat_divisor,
            s.position_m, s.quaternion, s.velocity_m_s, s.omega_body_rad_s, s.impulse_cache, sim.ref_angle,
            sim.ref_rate, sim.gains, sim.feedforward_nm, sim._params, sim._obstacles, s.t_s, sim.impulses,
            sim._out_stats, sim._totals, sim._diagnostics, sim.joint_angle_rad, sim.joint_rate_rad_s,
        )  # fmt: skip
        totals, stats = sim._totals, sim.stats
        stats.steps += int(totals[0])
        stats.sweeps += int(totals[1])
        stats.max_sweeps = max(stats.max_sweeps, int(totals[2]))
        stats.retries += int(totals[3])
        stats.split_steps += int(totals[4])
        stats.max_split_depth = max(stats.max_split_depth, int(totals[5]))
        stats.max_residual_m_s = max(stats.max_residual_m_s, float(sim._diagnostics[1]))
        stats.wall_time_s += time.perf_counter() - start  # here including the modules' share
        failure = None
        if event == module_fast.EVENT_PLANT_FAILED:
            sim._refresh_joint_state()
            try:
                sim._raise(status)
            except Exception as error:  # ContactNotConvergedError, SimulationDivergedError, a non-finite state
                failure = error
        return done, event, failure

    def link_poses(self) -> tuple[np.ndarray, np.ndarray]:
        state = self.plant.simulator.state
        return state.position_m.copy(), state.quaternion.copy()

    def solver_summary(self) -> dict[str, Any]:
        """The contact solver's statistics, with the keys the sim backend reports."""
        from aiko.robots.aiko.backends.sim_snake3d import contact_solver_summary

        return contact_solver_summary(self.plant.simulator.stats)
