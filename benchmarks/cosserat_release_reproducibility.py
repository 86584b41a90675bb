"""Is the released IX-C rod's first free step the same whatever the rounding? (prints JSON)

Another BLAS kernel changes the last bits of every state; a solver on a knife edge then converges on one machine and
fails, or takes another path to another answer, on the next. This runs the held phase of
`experiments/rod/smoothing_ixc.toml` once, then the first free step from the held states at the release times,
each from `--seeds` copies of the state perturbed by 1e-14 (relative, random): how many converge, the continuation
stages they took, and how far their accepted steps lie from the unperturbed one (relative to the step's
displacement).

    python benchmarks/cosserat_release_reproducibility.py --seeds 40 --json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from aiko.robots.rod_bench.experiment import load_rod_experiment
from sim.cosserat import ConvergenceError, step
from sim.cosserat.scenario import released_model

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "rod" / "smoothing_ixc.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="perturbed copies per release time (default 20)")
    parser.add_argument("--release-s", type=float, nargs="+", default=[0.8, 1.0], help="release times, s")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    sc = load_rod_experiment(EXPERIMENT)
    free = released_model(sc.model)
    marks = {int(round(t / sc.dt_s)): t for t in args.release_s}
    held, state = {}, sc.initial_state.copy()
    for k in range(1, max(marks) + 1):
        step(sc.model, state, sc.dt_s, sc.newton, None, sc.max_halvings)
        if k in marks:
            held[marks[k]] = state.copy()

    results = []
    for release_s, start in held.items():
        reference = start.copy()
        step(free, reference, sc.dt_s, sc.newton, None, sc.max_halvings)
        displacement = float(np.max(np.abs(reference.q - start.q)))
        converged, stages, deviation, failures, t0 = 0, [], [], [], time.perf_counter()
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            trial = start.copy()
            trial.q = trial.q * (1.0 + 1e-14 * rng.standard_normal(trial.q.shape))
            trial.v = trial.v * (1.0 + 1e-14 * rng.standard_normal(trial.v.shape))
            try:
                info = step(free, trial, sc.dt_s, sc.newton, None, sc.max_halvings)
            except ConvergenceError as exc:
                failures.append(f"seed {seed}: {exc}"[:300])
                continue
            converged += 1
            stages.append(info.continuation_stages)
            deviation.append(float(np.max(np.abs(trial.q - reference.q))) / displacement)
        results.append(
            {
                "release_s": release_s,
                "trials": args.seeds,
                "converged": converged,
                "continuation_stages_min_max": [min(stages), max(stages)] if stages else None,
                "max_deviation_over_displacement": max(deviation) if deviation else None,
                "wall_time_s": time.perf_counter() - t0,
                "failures": failures,
            }
        )
    if args.json:
        print(json.dumps({"experiment": EXPERIMENT.name, "perturbation": 1e-14, "releases": results}))
    else:
        for r in results:
            print(r)


if __name__ == "__main__":
    main()
