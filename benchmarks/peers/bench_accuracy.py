"""Ours vs PyElastica at equal accuracy on the bench's own quantities (docs/bench.md): the stick and slide tests.

    OPENBLAS_NUM_THREADS=1 python benchmarks/peers/bench_accuracy.py --json                  # both tests
    python benchmarks/peers/bench_accuracy.py --experiment bench_stick --no-peer             # ours alone

Per simulator and test, a ladder of time steps and a fine-step reference; every run is compared with its **own**
reference by the bench's average error percentage (`aiko.robots.rod_bench.compare.error_percent`:
100·mean_t |a − b| / max_t |b|, sampled at the log rate) on the paper's quantities:

* **strain at the control points**: the bending curvature of the rod's plane at each strain node (ours) / interior
  node (PyElastica: its Voronoi points), averaged over the nodes whose peak is ≥ 5 % of the largest (the control
  points, as `aiko bench compare` picks them);
* **normal force**: the table's total normal force, Σ of the contact forces' z (ours: the contact field; PyElastica:
  its external forces less the weight);
* **tip slide**: |tip_xy(t) − tip_xy(0)|.

A run *meets* the accuracy when all three are within --level (default 1 %); its cost is the CPU time of the stepping
(``time.process_time`` around the steps only). Reported: each run's errors and CPU, each simulator's cheapest run
that meets the level, and the ratio PyElastica / ours. How PyElastica is set up (composite rod, prescribed base,
penalty table, its damping vs ours) is in `benchmarks/peers/elastica_bench.py`. Each reference is checked by a run at
half its step (--check-references): its own errors must be far below the level for the comparison to resolve it.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aiko.robots.rod_bench.compare import CONTROL_POINT_FRACTION, error_percent  # noqa: E402
from aiko.robots.rod_bench.experiment import load_rod_experiment  # noqa: E402
from sim.cosserat import step  # noqa: E402
from sim.cosserat.forces import centreline  # noqa: E402

SAMPLE_S = 0.02  # the bench's log rate, 50 Hz
OURS_DT_S = (0.02, 0.01, 0.005, 0.0025, 0.00125)
OURS_REFERENCE_DT_S = 0.0003125
# The references solve each step to this Newton tolerance whatever the file asks of a bench run (the bench files
# trade digits no quantity shows, 1e-6, for iterations; a reference keeps them)
OURS_REFERENCE_TOLERANCE = 1e-8
PEER_DIVISORS = (1, 2, 4)
PEER_REFERENCE_DIVISOR = 8


def ours_series(scenario, dt_s: float, tolerance: float | None = None) -> dict:
    """Our run at dt_s with the bench quantities sampled every SAMPLE_S (see the module docstring); ``tolerance``
    overrides the file's Newton tolerance."""
    overrides: dict[str, float] = {"run.dt_s": dt_s}
    if tolerance is not None:
        overrides["run.newton_tolerance"] = tolerance
    s = load_rod_experiment(ROOT / "experiments" / "rod" / f"{scenario}.toml", overrides)
    state = s.initial_state.copy()
    n_steps = int(round(s.duration_s / dt_s))
    every = max(1, int(round(SAMPLE_S / dt_s)))
    tip0 = centreline(s.model, state.q)[-1, 0:2].copy()
    times, kappa, normal, slide = [], [], [], []
    cpu, iterations, substeps = 0.0, 0, 0
    for k in range(1, n_steps + 1):
        alpha = s.base_motion.alpha(state.t_s + dt_s) if s.base_motion is not None else None
        start = time.process_time()
        info = step(s.model, state, dt_s, s.newton, alpha, s.max_halvings)
        cpu += time.process_time() - start
        iterations += info.iterations
        substeps += info.substeps
        if k % every == 0:
            times.append(k * dt_s)
            kappa.append(state.q[6:].reshape(-1, 6)[:, 1] + s.model.xi_ref_nodes[:, 1])
            normal.append(float(np.sum(info.contact_force_n[:, 2])))
            slide.append(float(np.linalg.norm(centreline(s.model, state.q)[-1, 0:2] - tip0)))
    return {
        "t_s": np.asarray(times),
        "kappa": np.asarray(kappa),
        "normal_force_n": np.asarray(normal),
        "tip_slide_m": np.asarray(slide),
        "cpu_s": cpu,
        "steps": n_steps,
        "newton_iterations_mean": iterations / n_steps,
        "halved_steps": substeps - n_steps,
        "finite": bool(np.all(np.isfinite(state.q))),
    }


def errors(run: dict, reference: dict) -> dict:
    """The bench's three average errors (%) of a run against a reference of the same simulator."""
    peak = np.max(np.abs(reference["kappa"]), axis=0)
    points = np.flatnonzero(peak >= CONTROL_POINT_FRACTION * peak.max())
    strain = [error_percent(run["t_s"], run["kappa"][:, i], reference["t_s"], reference["kappa"][:, i]) for i in points]
    out = {
        "strain_error_percent": float(np.mean(strain)),
        "normal_force_error_percent": error_percent(
            run["t_s"], run["normal_force_n"], reference["t_s"], reference["normal_force_n"]
        ),
        "tip_slide_error_percent": error_percent(
            run["t_s"], run["tip_slide_m"], reference["t_s"], reference["tip_slide_m"]
        ),
    }
    out["max_error_percent"] = max(out.values())
    return out


def peer_series(scenario: str, dt_s: float) -> dict:
    from benchmarks.peers import elastica_bench

    s = load_rod_experiment(ROOT / "experiments" / "rod" / f"{scenario}.toml")
    peer = elastica_bench.build(s, dt_s)
    out = elastica_bench.series(peer, s, dt_s, SAMPLE_S)
    out["damping_rate_per_s"] = peer.damping_rate_per_s
    return out


def largest_stable_peer_dt(scenario: str, duration_s: float = 0.3, dt_start_s: float = 2e-4) -> float:
    """The largest step (halving from dt_start_s) at which PyElastica's run of the test's first duration_s stays finite,
    above the table and unkinked (no curvature beyond one over the rod's smallest radius)."""
    from benchmarks.peers import elastica_bench

    s = load_rod_experiment(ROOT / "experiments" / "rod" / f"{scenario}.toml", {"run.duration_s": duration_s})
    model_radius_min_m = min(s.model.rod.radius_base_m, s.model.rod.radius_tip_m)
    dt = dt_start_s
    while dt > 1e-8:
        peer = elastica_bench.build(s, dt)
        out = elastica_bench.series(peer, s, dt, duration_s)
        x = peer.rod.position_collection
        bent_at_most = np.max(np.abs(out["kappa"])) < 1.0 / model_radius_min_m  # an unstable run kinks
        if out["finite"] and np.min(x[2]) > -0.01 and np.max(np.abs(x)) < 1.0 and bent_at_most:
            return dt
        dt /= 2
    raise RuntimeError("no stable PyElastica step found")


def _summarise(name: str, runs: list[dict], level: float) -> dict:
    meeting = [r for r in runs if r["max_error_percent"] <= level]
    cheapest = min(meeting, key=lambda r: r["cpu_s"]) if meeting else None
    return {"simulator": name, "runs": runs, "cheapest_meeting_level": cheapest}


def _public(run: dict, dt_s: float, reference: dict) -> dict:
    out = {"dt_s": dt_s, "cpu_s": run["cpu_s"], "steps": run["steps"], "finite": run["finite"]}
    for key in ("newton_iterations_mean", "halved_steps", "damping_rate_per_s"):
        if key in run:
            out[key] = run[key]
    out.update(errors(run, reference))
    out["tip_slide_end_m"] = float(run["tip_slide_m"][-1])
    out["normal_force_end_n"] = float(run["normal_force_n"][-1])
    return out


def compare(scenario: str, level: float, with_peer: bool, check_references: bool) -> dict:
    result: dict = {"experiment": scenario, "level_percent": level, "sample_s": SAMPLE_S}
    reference = ours_series(scenario, OURS_REFERENCE_DT_S, OURS_REFERENCE_TOLERANCE)
    ours_runs = [_public(ours_series(scenario, dt), dt, reference) for dt in OURS_DT_S]
    result["ours"] = _summarise("ours", ours_runs, level)
    result["ours"]["reference_dt_s"] = OURS_REFERENCE_DT_S
    result["ours"]["reference_cpu_s"] = reference["cpu_s"]
    if check_references:
        half = ours_series(scenario, OURS_REFERENCE_DT_S / 2, OURS_REFERENCE_TOLERANCE)
        result["ours"]["reference_vs_half_step"] = errors(reference, half)
    if with_peer:
        base = largest_stable_peer_dt(scenario)
        peer_reference = peer_series(scenario, base / PEER_REFERENCE_DIVISOR)
        peer_runs = [_public(peer_series(scenario, base / d), base / d, peer_reference) for d in PEER_DIVISORS]
        result["pyelastica"] = _summarise("pyelastica", peer_runs, level)
        result["pyelastica"]["largest_stable_dt_s"] = base
        result["pyelastica"]["reference_dt_s"] = base / PEER_REFERENCE_DIVISOR
        if check_references:
            half = peer_series(scenario, base / PEER_REFERENCE_DIVISOR / 2)
            result["pyelastica"]["reference_vs_half_step"] = errors(peer_reference, half)
        a, b = result["ours"]["cheapest_meeting_level"], result["pyelastica"]["cheapest_meeting_level"]
        result["pyelastica_cpu_over_ours"] = b["cpu_s"] / a["cpu_s"] if a and b else None
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", nargs="+", default=["bench_stick", "bench_slide"])
    parser.add_argument("--level", type=float, default=1.0, help="accuracy level, %% (default 1)")
    parser.add_argument("--no-peer", action="store_true", help="ours only")
    parser.add_argument("--check-references", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with_peer = not args.no_peer and importlib.util.find_spec("elastica") is not None
    for name in args.experiment:
        result = compare(name, args.level, with_peer, args.check_references)
        if args.json:
            print(json.dumps(result), flush=True)
            continue
        print(f"{name}: level {args.level} %")
        for sim in ("ours", "pyelastica"):
            if sim not in result:
                continue
            for r in result[sim]["runs"]:
                print(
                    f"  {sim:10s} dt {r['dt_s'] * 1e3:8.4f} ms  cpu {r['cpu_s']:8.3f} s  strain "
                    f"{r['strain_error_percent']:6.2f} %  force {r['normal_force_error_percent']:6.2f} %  slide "
                    f"{r['tip_slide_error_percent']:6.2f} %"
                )
        print(f"  PyElastica / ours at the level: {result.get('pyelastica_cpu_over_ours')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
