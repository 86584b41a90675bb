"""Where a compiled rod step's time goes: each part of `sim.cosserat._step_kernels.solve_step` timed on its own, and
how often a step calls it, at a state taken from the run itself.

    OPENBLAS_NUM_THREADS=1 python benchmarks/cosserat_step_parts.py [--experiment experiments/rod/rod_on_plane.toml]
        [--settle-steps 0] [--steps 200] [--repeat 200]

The whole step is one numba call, which cProfile cannot look into; this calls its parts (the same compiled
functions) with the step's own buffers. Prints one JSON object: microseconds per call of each part, calls per step
(from the solver's own counters over ``--steps`` steps), their product as a share of the step, and the measured
time of a whole step for comparison (the parts are timed warm and alone, so the shares are estimates).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def per_call_us(fn: Callable[[], object], repeat: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return 1e6 * (time.perf_counter() - t0) / repeat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=str(REPO / "experiments/rod/rod_on_plane.toml"))
    parser.add_argument("--settle-steps", type=int, default=0, help="steps before the state the parts are timed at")
    parser.add_argument("--steps", type=int, default=200, help="steps whose counters give the calls per step")
    parser.add_argument("--repeat", type=int, default=200, help="calls per timed part")
    args = parser.parse_args()

    import sim.cosserat._step_kernels as kernels
    import sim.cosserat.compiled_step as compiled
    from aiko.robots.rod_bench.experiment import load_rod_experiment
    from sim.cosserat import step
    from sim.cosserat._mass import composite_mass_matrix
    from sim.cosserat.kinematics import forward_sweep_with_rates

    scenario = load_rod_experiment(args.experiment)
    model, h = scenario.model, scenario.dt_s

    def advance(state, n: int) -> list:
        """n steps as `sim.cosserat.scenario.simulate` takes them (the base moved along the file's motion)."""
        infos = []
        for _ in range(n):
            alpha_next = None
            if model.base == "clamped" and scenario.base_motion is not None:
                alpha_next = scenario.base_motion.alpha(state.t_s + h)
            infos.append(step(model, state, h, scenario.newton, alpha_next, scenario.max_halvings))
        return infos

    advance(scenario.initial_state.copy(), 1)  # the kernels loaded (not timed)
    state = scenario.initial_state.copy()
    advance(state, args.settle_steps)
    t0 = time.perf_counter()
    infos = advance(state, args.steps)
    step_us = 1e6 * (time.perf_counter() - t0) / args.steps
    calls = {
        "refresh_geometry": float(np.mean([i.matrix_refreshes for i in infos])),
        "newton_direction": float(np.mean([i.iterations for i in infos])),
        "evaluate": float(np.mean([i.residual_evaluations for i in infos])),
    }

    packed = compiled._packed(model)
    buf = state.solver_cache.buffers(model, packed, scenario.newton, h)
    n_fixed, arrays = buf.n_fixed, packed.arrays
    nf = model.n_dof - n_fixed
    x = buf.x.copy()
    x[:nf] = state.v[n_fixed:]
    v = state.v.copy()
    row_scale = np.ones(nf)
    r = np.empty(x.shape[0])
    dx = np.empty(x.shape[0])
    factors = tuple(a.copy() for a in buf.factors)  # refresh writes these: a copy, not the run's
    no_prediction = np.empty((0, 3))
    kernels.evaluate(
        arrays, buf.law, h, state.q, state.v, n_fixed, buf.v_base, row_scale, x, no_prediction, buf.workspace, r
    )
    R, p, J, _, _ = forward_sweep_with_rates(state.q, v, arrays[0], arrays[1], arrays[2], arrays[3], 1e-20)
    a_matrix = np.eye(nf) * 2.0 + 0.01  # symmetric positive definite, the Newton matrix's size
    parts_us = {
        "evaluate": per_call_us(
            lambda: kernels.evaluate(
                arrays, buf.law, h, state.q, state.v, n_fixed, buf.v_base, row_scale, x, no_prediction, buf.workspace, r
            ),
            args.repeat,
        ),
        "refresh_geometry": per_call_us(
            lambda: kernels.refresh_geometry(arrays, buf.law, h, state.q, n_fixed, x, v, *factors), args.repeat
        ),
        "newton_direction": per_call_us(
            lambda: kernels.newton_direction(
                h, nf, r, row_scale, *buf.factors[:4], buf.workspace, dx, kernels.WEAK_COUPLING
            ),
            args.repeat,
        ),
        # inside refresh_geometry:
        "forward_sweep_with_rates": per_call_us(
            lambda: forward_sweep_with_rates(state.q, v, arrays[0], arrays[1], arrays[2], arrays[3], 1e-20), args.repeat
        ),
        "mass_matrix": per_call_us(
            lambda: composite_mass_matrix(R, p, J, arrays[4], arrays[5], arrays[6], arrays[7], arrays[8]), args.repeat
        ),
        "cholesky": per_call_us(lambda: kernels.cholesky_in_place(a_matrix.copy()), args.repeat),
    }
    top = ("refresh_geometry", "newton_direction", "evaluate")
    per_step = {k: parts_us[k] * calls[k] for k in top}
    total = sum(per_step.values())
    print(
        json.dumps(
            {
                "experiment": Path(args.experiment).stem,
                "n_dof": model.n_dof,
                "contact_candidates": int(len(infos[-1].contact_force_n)),
                "step_us": round(step_us, 1),
                "part_us": {k: round(v, 1) for k, v in parts_us.items()},
                "calls_per_step": {k: round(v, 2) for k, v in calls.items()},
                "share_of_parts": {k: round(v / total, 3) for k, v in per_step.items()},
                "parts_per_step_us": round(total, 1),
                "load_1min": float(Path("/proc/loadavg").read_text().split()[0])
                if Path("/proc/loadavg").exists()
                else None,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
