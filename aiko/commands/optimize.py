"""``aiko optimize``: CMA-ES over an experiment's settings for one metric, on the sweep's Dask cluster
(docs/sweeps.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.commands._cluster_options import add_cluster_arguments, check_cluster_arguments


def register(sub: argparse._SubParsersAction) -> None:
    optimize = sub.add_parser(
        "optimize",
        help=SUMMARIES["optimize"],
        description=(
            "Search the settings an optimisation file names, within their bounds, for the best value of one metric "
            "(CMA-ES, the cma package), each generation's runs in parallel on Dask distributed: a LocalCluster of "
            "processes by default, any cluster with --scheduler. Writes OUT/results.parquet (a row per evaluation) "
            "and OUT/NAME-optimized.toml, the experiment with the best settings, which aiko run runs as is. "
            "See docs/sweeps.md."
        ),
    )
    optimize.add_argument("spec", help="optimisation file (TOML; see docs/sweeps.md)")
    add_cluster_arguments(optimize, "run")
    optimize.add_argument(
        "--out", metavar="DIR", help="output directory (default: the spec's out, else runs/optimize/NAME)"
    )
    optimize.add_argument(
        "--resume", action="store_true", help="continue an interrupted optimisation in --out (reuses its rows)"
    )
    optimize.add_argument(
        "--run-timeout",
        type=float,
        metavar="SECONDS",
        help="an evaluation still going after this wall time is a timeout row (default: the spec's limit, else none)",
    )
    optimize.add_argument("--json", action="store_true", help="end with a JSON summary on stdout")
    optimize.set_defaults(handler=optimize_command)


def optimize_command(args: argparse.Namespace) -> int:
    check_cluster_arguments(args)
    from aiko.sweep.optimize_spec import load_optimize_spec
    from aiko.sweep.spec import RunPoint, validate_runs

    spec = load_optimize_spec(args.spec)
    start = RunPoint("start", 0, {p.key: p.start for p in spec.parameters}, 0)
    backend = validate_runs(spec.sweep_spec(), [start])  # the start point's settings, the backend: checked here
    out = Path(args.out) if args.out else (spec.out or Path("runs") / "optimize" / spec.name)

    from aiko.sweep.execute import SweepOptions
    from aiko.sweep.optimize import run_optimization

    options = SweepOptions(
        out=out, scheduler=args.scheduler, workers=args.workers, resume=args.resume, run_timeout_s=args.run_timeout
    )
    summary = run_optimization(spec, backend, options, progress_stream=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    else:
        best, first = summary["best"], summary["start"]
        print(
            f"{summary['evaluations']} evaluations: {summary['completed']} ok, "
            f"{summary['evaluations'] - summary['completed']} not ok"
        )
        print(f"start: {spec.metric} = {first['value']}  {first['params']}")
        print(f"best:  {spec.metric} = {best['value']}  {best['params']} (generation {best['generation']})")
        print(f"experiment: {summary['experiment_path']}  (aiko run {summary['experiment_path']})")
        print(f"results: {summary['results_path']}")
    return 0
