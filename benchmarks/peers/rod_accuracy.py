"""Ours vs PyElastica at equal accuracy: each simulator's tip path against its own fine-step reference, and the CPU
time each needs to keep its tip within 1, 2, 5, 10, 20 mm of that reference.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/peers/rod_accuracy.py          # a table
    python benchmarks/peers/rod_accuracy.py --json                                             # the same as JSON
    python benchmarks/peers/rod_accuracy.py --set contact.sharpness=100 --ours-dt 0.005 0.01  # our settings only
    python benchmarks/peers/rod_accuracy.py --damping-time-s 0.001   # silicone's material damping, both sides

Why each against its own reference: the two simulators are different discretisations of the same rod (ours:
implicit Euler, piecewise-linear strain, complementarity contact; PyElastica: position Verlet, straight elements, a
penalty plane with regularised friction) and their fine-step solutions do not coincide (the final tips are reported:
~20 mm apart on rod_on_plane). There is no common exact path to measure both against, so "equal accuracy" means an
equal distance from one's own converged (fine-step) path: what a user pays for a given time-step error in each.

Runs (scenario: experiments/rod/<--scenario>.toml, default rod_on_plane):

* ours (``sim.cosserat.step``, with the --set overrides): each --ours-dt (default 0.5, 1, 2.5, 5, 10, 20 ms) and the
  reference --ours-reference-dt (default 0.25 ms). Every dt must be a whole multiple of the reference's, and the
  duration a whole multiple of every dt;
* PyElastica (benchmarks/peers/elastica_rod.py, built from the scenario WITHOUT the --set overrides, over the same
  duration): base / d for each --peer-divisors d (default 1, 2, 4, 8), base = its largest stable dt 0.234375 ms,
  and the reference base / --peer-reference-divisor (default 16), a multiple of every d. PyElastica runs whole base
  steps, round(duration / base) of them (1 s: 4267 steps, 1.00008 s), so all its runs end at the same time.
  Optional: without ``elastica`` (pip install -e .[peers]) ours is reported alone, with a note.

Time grid, no interpolation: the tip is recorded after every step and each run is compared with its own reference
at each of its own step times, every one of which is a step time of the reference (the reference step divides the
run's). A coarse run is therefore checked at fewer times than a fine one (ours at 20 ms: 50 times in 1 s; PyElastica
at base: 4267): its max can miss a peak between two of its steps, which favours coarse runs (ours) in "max". The
final error is at the same time for every run of a simulator; RMS is over the run's own step times.

Per run: CPU time (``time.process_time`` around each step: the stepping only, not the recording; the median of
--repeats), the max tip error (mm) and its time, the final and RMS tip errors, steps, and for ours Newton iterations
and sub-steps (more sub-steps than steps: halved steps). The timed runs are interleaved, ours then PyElastica for
each rung of the two ladders, then the two references, the whole sequence repeated --repeats times, so a change of
machine load hits both alike; "reproducible" says whether every repeat gave bitwise the same tip path.

Cost at equal accuracy: per level (--levels, mm), each simulator's cheapest ladder run (never its reference) whose
max tip error is within the level, and separately whose final tip error is, and the ratio PyElastica CPU / ours
(> 1: ours is cheaper at that accuracy); null with a reason where one side has none. The ladders step by ~2x, so a
level's cost is the cheapest qualifying rung's: an upper bound on what a step tuned to the level would cost.

Is the reference converged? --check-references also runs each reference once at half its step and reports the
reference's own tip errors against that run; where they exceed a level, the errors against the reference do not
resolve that level (a note says so). On rod_on_plane, ours' 0.25 ms reference moves ~9 mm (max) when halved, while
PyElastica's base / 16 moves < 1 mm: ours' errors are lower bounds, its convergence is first order and slow.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aiko.core.config import ConfigError, parse_override  # noqa: E402
from aiko.robots.rod_bench.experiment import load_rod_experiment  # noqa: E402
from benchmarks.cosserat_accuracy import tip_path as ours_tip_path  # noqa: E402
from benchmarks.peers import elastica_rod  # noqa: E402
from sim.cosserat import step  # noqa: E402

OURS_DT_S = (5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2e-2)
OURS_REFERENCE_DT_S = 2.5e-4
PEER_DIVISORS = (1, 2, 4, 8)
PEER_REFERENCE_DIVISOR = 16
LEVELS_MM = (1.0, 2.0, 5.0, 10.0, 20.0)
ERROR_KEYS = {"max": "max_tip_error_mm", "final": "final_tip_error_mm"}
RUN_KEYS = ("cpu_s", "cpu_all_s", "steps", "iterations", "substeps", "reproducible")  # copied into a row if present

Run = dict[str, Any]  # one run: tips_m (steps x 3), cpu_s, steps (+ iterations, substeps for ours) or error


# --- pure comparison helpers ----------------------------------------------------------------------------------------
def whole_multiple(coarse: float, fine: float) -> int | None:
    """coarse / fine if it is a whole number >= 1 (to rounding), else None."""
    ratio = coarse / fine
    k = round(ratio)
    return k if k >= 1 and abs(ratio - k) <= 1e-9 * k else None


def tip_errors_m(tips_m: np.ndarray, reference_tips_m: np.ndarray, stride: int) -> np.ndarray:
    """Distance of the run's tip after its step k from the reference's after its step (k + 1)·stride: the same time,
    since the run's step is ``stride`` reference steps."""
    n = len(tips_m)
    if n * stride > len(reference_tips_m):
        raise ValueError(f"the run ({n} steps of {stride} reference steps) outlasts its reference")
    return np.linalg.norm(tips_m - reference_tips_m[stride - 1 : n * stride : stride], axis=1)


def error_summary(errors_m: np.ndarray, dt_s: float) -> dict:
    """Max (and its time), final and RMS of a run's tip errors in mm; all None if any is not finite (a run that blew
    up has no accuracy, and JSON has no NaN)."""
    if len(errors_m) == 0 or not np.all(np.isfinite(errors_m)):
        return {"max_tip_error_mm": None, "max_at_t_s": None, "final_tip_error_mm": None, "rms_tip_error_mm": None}
    k = int(np.argmax(errors_m))
    return {
        "max_tip_error_mm": 1e3 * float(errors_m[k]),
        "max_at_t_s": dt_s * (k + 1),
        "final_tip_error_mm": 1e3 * float(errors_m[-1]),
        "rms_tip_error_mm": 1e3 * float(np.sqrt(np.mean(errors_m**2))),
    }


def cheapest_within(runs: Sequence[dict], key: str, level_mm: float) -> dict | None:
    """The run of least CPU time whose ``key`` error is within ``level_mm`` (runs without that error never qualify)."""
    ok = [r for r in runs if r.get(key) is not None and r[key] <= level_mm and r.get("cpu_s") is not None]
    return min(ok, key=lambda r: r["cpu_s"], default=None)


def _best(runs: Sequence[dict], key: str) -> float | None:
    errors = [r[key] for r in runs if r.get(key) is not None]
    return min(errors) if errors else None


def _choice(run: dict | None, key: str) -> dict | None:
    return None if run is None else {"dt_s": run["dt_s"], "cpu_s": run["cpu_s"], key: run[key]}


def cost_at_levels(ours: Sequence[dict], peer: Sequence[dict] | None, levels_mm: Sequence[float]) -> list[dict]:
    """Per level, per error kind ("max", "final"): each side's cheapest qualifying run and the ratio peer CPU / ours
    CPU, or null and the reason. ``peer`` None: PyElastica was not run."""
    rows = []
    for level in levels_mm:
        row: dict[str, Any] = {"level_mm": level}
        for kind, key in ERROR_KEYS.items():
            o = cheapest_within(ours, key, level)
            p = cheapest_within(peer, key, level) if peer is not None else None
            entry: dict[str, Any] = {"ours": _choice(o, key), "peer": _choice(p, key), "ratio": None, "reason": None}
            best_o, best_p = _best(ours, key), (_best(peer, key) if peer is not None else None)
            if o is not None and p is not None:
                entry["ratio"] = p["cpu_s"] / o["cpu_s"] if o["cpu_s"] > 0 else None
                if entry["ratio"] is None:
                    entry["reason"] = "ours took no measurable CPU time"
            elif peer is None:
                entry["reason"] = "PyElastica not run"
            elif o is None and p is None:
                entry["reason"] = (
                    f"met by neither: no run keeps the {kind} tip error within {level:g} mm "
                    f"(best: ours {_mm(best_o)}, PyElastica {_mm(best_p)})"
                )
            elif o is None:
                entry["reason"] = f"no run of ours within {level:g} mm ({kind}; best {_mm(best_o)})"
            else:
                entry["reason"] = f"no PyElastica run within {level:g} mm ({kind}; best {_mm(best_p)})"
            row[kind] = entry
        rows.append(row)
    return rows


def _mm(value: float | None) -> str:
    return "none finite" if value is None else f"{value:.3g} mm"


def neither_notes(levels: Sequence[dict]) -> list[str]:
    """One line per level and error kind that neither simulator meets on its ladder."""
    return [
        f"the {row['level_mm']:g} mm level ({kind} tip error) is met by neither simulator"
        for row in levels
        for kind in ERROR_KEYS
        if row[kind]["reason"] and row[kind]["reason"].startswith("met by neither")
    ]


# --- runs -----------------------------------------------------------------------------------------------------------
def ours_job(scenario, dt_s: float) -> Callable[[], Run]:
    def once() -> Run:
        try:
            return ours_tip_path(scenario, dt_s)
        except Exception as exc:  # a step that does not converge ends this run, not the benchmark
            return {"error": repr(exc)[:200]}

    return once


def peer_job(scenario, dt_s: float, n_steps: int) -> Callable[[], Run]:
    return lambda: elastica_rod.tip_path(scenario, dt_s, n_steps)


def interleaved(jobs: Sequence[tuple[str, Callable[[], Run]]], repeats: int) -> dict[str, Run]:
    """Every job once per repeat, in the given order; per job: its first run (tips, counts), the median CPU time of
    all repeats and whether every repeat gave bitwise the same tip path."""
    results: dict[str, Run] = {}
    cpus: dict[str, list[float]] = {name: [] for name, _ in jobs}
    for _ in range(repeats):
        for name, job in jobs:
            run = job()
            if "error" in run:
                if results.setdefault(name, run) is not run:  # an earlier repeat of the same run converged
                    results[name]["reproducible"] = False
                continue
            cpus[name].append(run["cpu_s"])
            first = results.setdefault(name, run)
            if "tips_m" in first and not np.array_equal(first["tips_m"], run["tips_m"]):
                first["reproducible"] = False
    for name, run in results.items():
        if "error" not in run:
            run["cpu_all_s"] = cpus[name]
            run["cpu_s"] = statistics.median(cpus[name])
            run.setdefault("reproducible", True)
    return results


def _row(run: Run, reference: Run, dt_s: float, stride: int, extra: dict) -> dict:
    row = {"dt_s": dt_s, **extra}
    if "error" in run or "error" in reference:
        return {**row, "error": run.get("error") or f"reference: {reference['error']}", "cpu_s": None}
    row.update(error_summary(tip_errors_m(run["tips_m"], reference["tips_m"], stride), dt_s))
    row.update({k: run[k] for k in RUN_KEYS if k in run})
    row["final_tip_m"] = run["tips_m"][-1].tolist()
    return row


def _reference_row(run: Run, dt_s: float, extra: dict) -> dict:
    if "error" in run:
        return {"dt_s": dt_s, **extra, "error": run["error"], "cpu_s": None}
    return {
        "dt_s": dt_s,
        **extra,
        **{k: run[k] for k in RUN_KEYS if k in run},
        "final_tip_m": run["tips_m"][-1].tolist(),
    }


def reference_check(reference: Run, half_step: Run, dt_s: float) -> dict:
    """How far the reference itself is from converged: its tip errors against a run at half its step."""
    row = _row(reference, half_step, dt_s, 2, {"half_step_dt_s": dt_s / 2})
    keep = ("dt_s", "half_step_dt_s", "error", *ERROR_KEYS.values(), "max_at_t_s", "rms_tip_error_mm")
    return {**{k: row[k] for k in keep if k in row}, "half_step_cpu_s": half_step.get("cpu_s")}


def unresolved_notes(out: dict, level_mm: float) -> list[str]:
    """A reference that moves by more than a level when its step is halved cannot tell runs apart at that level."""
    notes = []
    for side in (out["ours"], out["peer"]):
        check = (side or {}).get("reference_check")
        if check and check.get("max_tip_error_mm") is not None and check["max_tip_error_mm"] > level_mm:
            name = "ours" if side is out["ours"] else side["name"]
            notes.append(
                f"{name}: the reference (dt {check['dt_s'] * 1e3:.4g} ms) itself moves {check['max_tip_error_mm']:.1f}"
                f" mm (max; final {check['final_tip_error_mm']:.1f} mm) when its step is halved: the errors against"
                " it are not converged at that scale"
            )
    return notes


def measure(args: argparse.Namespace, overrides: dict[str, Any]) -> dict:
    path = ROOT / "experiments" / "rod" / f"{args.scenario}.toml"
    scenario = load_rod_experiment(path, overrides)
    duration = scenario.duration_s
    strides = [whole_multiple(dt, args.ours_reference_dt) for dt in args.ours_dt]
    if any(s is None for s in strides):
        raise ConfigError(f"every --ours-dt must be a whole multiple of --ours-reference-dt {args.ours_reference_dt:g}")
    if any(whole_multiple(duration, dt) is None for dt in args.ours_dt):
        raise ConfigError(f"the duration {duration:g} s must be a whole multiple of every --ours-dt")
    step(scenario.model, scenario.initial_state.copy(), scenario.dt_s, scenario.newton)  # numba compile / cache

    notes: list[str] = []
    ours_jobs = [(f"ours {dt:g}", ours_job(scenario, dt)) for dt in args.ours_dt]
    peer_jobs: list[tuple[str, Callable[[], Run]]] = []
    peer_scenario, base, n_base = None, elastica_rod.LARGEST_STABLE_DT_S, 0
    with_peer = not args.no_peer and importlib.util.find_spec("elastica") is not None
    if with_peer:
        peer_overrides: dict[str, Any] = {"run.duration_s": duration}  # the file's rod, our duration
        if args.damping_time_s is not None:  # and the damping both are given
            peer_overrides["rod.damping_time_s"] = args.damping_time_s
        peer_scenario = load_rod_experiment(path, peer_overrides)
        n_base = round(duration / base)
        elastica_rod.run(peer_scenario, 0.01)  # numba compilation of PyElastica's kernels
        peer_jobs = [(f"peer {d}", peer_job(peer_scenario, base / d, n_base * d)) for d in args.peer_divisors]
    elif args.no_peer:
        notes.append("PyElastica not run (--no-peer): ours only")
    else:
        notes.append("PyElastica not installed (pip install -e .[peers]): ours only")
    jobs: list[tuple[str, Callable[[], Run]]] = []
    for i in range(max(len(ours_jobs), len(peer_jobs))):  # ours, PyElastica, ours, ... rung by rung
        jobs += ours_jobs[i : i + 1] + peer_jobs[i : i + 1]
    jobs.append(("ours reference", ours_job(scenario, args.ours_reference_dt)))
    if with_peer:
        d_ref = args.peer_reference_divisor
        jobs.append(("peer reference", peer_job(peer_scenario, base / d_ref, n_base * d_ref)))
    results = interleaved(jobs, args.repeats)
    if args.check_references:  # each reference against its own half step, once (its CPU time is not compared)
        checks = [("ours check", ours_job(scenario, args.ours_reference_dt / 2))]
        if with_peer:
            d_check = 2 * args.peer_reference_divisor
            checks.append(("peer check", peer_job(peer_scenario, base / d_check, n_base * d_check)))
        results.update(interleaved(checks, 1))

    ours_ref = results["ours reference"]
    out: dict[str, Any] = {
        "scenario": args.scenario,
        "overrides": overrides,
        "duration_s": duration,
        "repeats": args.repeats,
        "ours": {
            "reference": _reference_row(ours_ref, args.ours_reference_dt, {}),
            "runs": [
                _row(results[f"ours {dt:g}"], ours_ref, dt, stride, {})
                for dt, stride in zip(args.ours_dt, strides, strict=True)
            ],
        },
        "peer": None,
    }
    if with_peer:
        from importlib.metadata import version

        peer_ref = results["peer reference"]
        d_ref = args.peer_reference_divisor
        out["peer"] = {
            "name": f"PyElastica {version('pyelastica')}",
            "damping_rate_per_s": elastica_rod.damping_rate_per_s(peer_scenario),
            "base_dt_s": base,
            "sim_time_s": n_base * base,
            "reference": _reference_row(peer_ref, base / d_ref, {"divisor": d_ref}),
            "runs": [
                _row(results[f"peer {d}"], peer_ref, base / d, d_ref // d, {"divisor": d}) for d in args.peer_divisors
            ],
        }
        if "error" not in ours_ref and "error" not in peer_ref:
            out["references_final_tip_distance_mm"] = 1e3 * float(
                np.linalg.norm(ours_ref["tips_m"][-1] - peer_ref["tips_m"][-1])
            )
    if args.check_references:
        out["ours"]["reference_check"] = reference_check(ours_ref, results["ours check"], args.ours_reference_dt)
        if with_peer:
            out["peer"]["reference_check"] = reference_check(
                results["peer reference"], results["peer check"], base / args.peer_reference_divisor
            )
    out["levels"] = cost_at_levels(out["ours"]["runs"], out["peer"]["runs"] if out["peer"] else None, args.levels)
    out["notes"] = notes + neither_notes(out["levels"]) + unresolved_notes(out, min(args.levels))
    return out


# --- output ---------------------------------------------------------------------------------------------------------
def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(out: dict) -> str:
    lines = [
        f"{out['scenario']}, {out['duration_s']:g} s, each simulator against its own fine-step reference; "
        f"CPU: median of {out['repeats']} interleaved repeats"
        + (f"; our overrides: {out['overrides']}" if out["overrides"] else "")
        + (
            f"; PyElastica's damper: uniform rate {out['peer']['damping_rate_per_s']:.3g} /s"
            if out["peer"] and out["peer"]["damping_rate_per_s"] > 0
            else ""
        ),
        "",
        "| simulator | dt (ms) | CPU (s) | max tip error (mm), at t (s) | final (mm) | RMS (mm) | steps | Newton "
        "iterations | sub-steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sides = [("ours", out["ours"])] + ([(out["peer"]["name"], out["peer"])] if out["peer"] else [])
    for name, side in sides:
        ref = side["reference"]
        lines.append(
            f"| {name} reference | {ref['dt_s'] * 1e3:.4g} | {_f(ref.get('cpu_s'), 3)} | 0 (reference) | 0 | 0 | "
            f"{ref.get('steps', '-')} | {ref.get('iterations', '-')} | {ref.get('substeps', '-')} |"
        )
        check = side.get("reference_check")
        if check and "error" not in check:
            lines.append(
                f"| {name} reference vs its half step {check['half_step_dt_s'] * 1e3:.4g} ms (CPU "
                f"{_f(check['half_step_cpu_s'], 3)} s) | {check['dt_s'] * 1e3:.4g} | | "
                f"{_f(check['max_tip_error_mm'])}, {_f(check['max_at_t_s'], 3)} | {_f(check['final_tip_error_mm'])} | "
                f"{_f(check['rms_tip_error_mm'])} | | | |"
            )
        for r in side["runs"]:
            dt = f"{r['dt_s'] * 1e3:.4g}" + (f" (base/{r['divisor']})" if "divisor" in r else "")
            if "error" in r:
                lines.append(f"| {name} | {dt} | failed: {r['error']} | | | | | | |")
                continue
            lines.append(
                f"| {name} | {dt} | {_f(r['cpu_s'], 3)} | {_f(r['max_tip_error_mm'])}, "
                f"{_f(r['max_at_t_s'], 3)} | {_f(r['final_tip_error_mm'])} | {_f(r['rms_tip_error_mm'])} | "
                f"{r['steps']} | {r.get('iterations', '-')} | {r.get('substeps', '-')} |"
            )
    lines += [
        "",
        "cost at equal accuracy: each side's cheapest run within the level; ratio = PyElastica CPU / ours "
        "(> 1: ours cheaper)",
        "",
        "| level (mm) | error | ours: dt (ms), CPU (s) | PyElastica: dt (ms), CPU (s) | ratio |",
        "|---|---|---|---|---|",
    ]
    for row in out["levels"]:
        for kind in ERROR_KEYS:
            e = row[kind]
            cell = {
                side: "none" if e[side] is None else f"{e[side]['dt_s'] * 1e3:.4g}, {e[side]['cpu_s']:.3f}"
                for side in ("ours", "peer")
            }
            ratio = f"{e['ratio']:.2f}" if e["ratio"] is not None else f"null: {e['reason']}"
            lines.append(f"| {row['level_mm']:g} | {kind} | {cell['ours']} | {cell['peer']} | {ratio} |")
    if "references_final_tip_distance_mm" in out:
        lines.append(
            f"\nthe two references' final tips are {out['references_final_tip_distance_mm']:.1f} mm apart "
            "(different discretisations and contact models: each is measured against its own)"
        )
    lines += [f"\n{n}" for n in out["notes"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="rod_on_plane", help="name of experiments/rod/<name>.toml")
    p.add_argument("--ours-dt", type=float, nargs="+", default=list(OURS_DT_S), metavar="S", help="our time steps")
    p.add_argument("--ours-reference-dt", type=float, default=OURS_REFERENCE_DT_S, metavar="S")
    p.add_argument("--peer-divisors", type=int, nargs="+", default=list(PEER_DIVISORS), metavar="D",
                   help="PyElastica's time steps: its largest stable dt / D")  # fmt: skip
    p.add_argument("--peer-reference-divisor", type=int, default=PEER_REFERENCE_DIVISOR, metavar="D")
    p.add_argument("--levels", type=float, nargs="+", default=list(LEVELS_MM), metavar="MM", help="accuracy levels")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override of OUR scenario only (TOML value), repeatable")  # fmt: skip
    p.add_argument("--duration", type=float, metavar="S", help="simulated seconds, both sides (default: the file's)")
    p.add_argument("--damping-time-s", type=float, metavar="S",
                   help="the rod's material damping τ, both sides: ours rod.damping_time_s, PyElastica a uniform "
                   "damper of rate ω₁²τ (elastica_rod.damping_rate_per_s)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=1, metavar="N", help="timed repeats per run (median)")
    p.add_argument("--check-references", action="store_true",
                   help="also run each reference at half its step (once): how far is it from converged")  # fmt: skip
    p.add_argument("--no-peer", action="store_true", help="ours only, even if PyElastica is installed")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = p.parse_args(argv)
    if args.ours_reference_dt <= 0 or min(args.ours_dt) <= 0 or args.repeats < 1:
        p.error("time steps must be > 0 and --repeats >= 1")
    if min(args.peer_divisors) < 1 or any(args.peer_reference_divisor % d for d in args.peer_divisors):
        p.error("--peer-divisors must be >= 1 and each must divide --peer-reference-divisor")
    if args.duration is not None and args.duration <= 0:
        p.error("--duration must be > 0")
    if args.damping_time_s is not None and args.damping_time_s < 0:
        p.error("--damping-time-s must be >= 0")
    try:
        overrides = dict(parse_override(text) for text in args.set)
        if args.duration is not None:
            overrides["run.duration_s"] = args.duration
        if args.damping_time_s is not None:
            overrides["rod.damping_time_s"] = args.damping_time_s
        out = measure(args, overrides)
    except ConfigError as exc:
        p.error(str(exc))
    print(json.dumps(out) if args.json else table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
