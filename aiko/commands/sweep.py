"""``aiko sweep``: run an experiment over a grid or a sample of its settings on Dask distributed (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.commands._cluster_options import add_cluster_arguments, check_cluster_arguments
from aiko.core.errors import AikoError


def register(sub: argparse._SubParsersAction) -> None:
    sweep = sub.add_parser(
        "sweep",
        help=SUMMARIES["sweep"],
        description=(
            "Run the experiment a sweep file names over its parameters (lists, ranges, random or Latin-hypercube "
            "samples) on Dask distributed: a LocalCluster of processes on this machine by default, any cluster "
            "with --scheduler. Writes OUT/results.parquet (a row per run: parameters, metrics, status, error, "
            "wall time) as runs finish, and OUT/plots/. See docs/sweeps.md."
        ),
    )
    sweep.add_argument("spec", nargs="?", help="sweep file (TOML; see docs/sweeps.md)")
    add_cluster_arguments(sweep, "run")
    sweep.add_argument("--out", metavar="DIR", help="output directory (default: the spec's out, else runs/sweeps/NAME)")
    sweep.add_argument("--resume", action="store_true", help="continue a sweep in --out: skip the runs already done")
    sweep.add_argument(
        "--run-timeout",
        type=float,
        metavar="SECONDS",
        help="a run still going after this wall time is a row with status timeout (default: the spec's "
        "[limits] run_timeout_s, else none)",
    )
    sweep.add_argument("--retry-timeouts", action="store_true", help="with --resume: run again the runs that timed out")
    sweep.add_argument("--keep-logs", action="store_true", help="also write every run's MCAP log (OUT/logs/)")
    sweep.add_argument("--no-plots", action="store_true", help="do not write OUT/plots/")
    sweep.add_argument("--dry-run", action="store_true", help="check the spec and every run's settings, list the runs")
    sweep.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first run whose settings the experiment refuses (default: such runs become rows with "
        "status invalid and the others run)",
    )
    sweep.add_argument("--json", action="store_true", help="end with a JSON summary on stdout")
    sweep.add_argument("--list-metrics", action="store_true", help="print the metrics a sweep can record and exit")
    sweep.set_defaults(handler=sweep_command)


def sweep_command(args: argparse.Namespace) -> int:
    from aiko.sweep.metrics import metric_help

    if args.list_metrics:
        for name, text in metric_help().items():
            print(f"{name:26s} {text}")
        return 0
    if not args.spec:
        raise AikoError("sweep: a sweep file is required (aiko sweep SPEC.toml; --list-metrics lists the metrics)")
    check_cluster_arguments(args)
    if args.retry_timeouts and not args.resume:
        raise AikoError("--retry-timeouts goes with --resume (it runs again a finished sweep's timed-out runs)")
    from aiko.sweep.spec import expand, load_spec, screen_runs, validate_runs

    spec = load_spec(args.spec)
    runs = expand(spec)
    if args.strict:
        backend, invalid = validate_runs(spec, runs), {}
    else:
        backend, invalid = screen_runs(spec, runs)
    if invalid:
        print(
            f"sweep: {len(invalid)} of {len(runs)} runs have settings the experiment refuses; they are rows with "
            f"status invalid (--strict stops instead). First: {next(iter(invalid.values()))}",
            file=sys.stderr,
        )
    out = Path(args.out) if args.out else (spec.out or Path("runs") / "sweeps" / spec.name)
    if args.dry_run:
        listing = [
            {"run_id": r.run_id, "index": r.index, "seed": r.seed, **r.params}
            | ({"invalid": invalid[r.run_id]} if r.run_id in invalid else {})
            for r in runs
        ]
        if args.json:
            print(
                json.dumps(
                    {"runs": len(runs), "invalid": len(invalid), "backend": backend, "out": str(out), "points": listing}
                )
            )
        else:
            for row in listing:
                print(json.dumps(row))
            print(f"{len(runs)} runs of {spec.experiment_path} on {backend}; results would go to {out}")
        return 0

    from aiko.sweep.execute import SweepOptions, run_sweep

    options = SweepOptions(
        out=out,
        scheduler=args.scheduler,
        workers=args.workers,
        resume=args.resume,
        keep_logs=args.keep_logs,
        plots=not args.no_plots,
        run_timeout_s=args.run_timeout,
        retry_timeouts=args.retry_timeouts,
    )
    summary = run_sweep(spec, runs, backend, options, progress_stream=sys.stderr, invalid=invalid)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['runs']} runs: {summary['completed']} ok, {summary['failed']} failed"
            + (f", {summary['timeout']} timed out" if summary["timeout"] else "")
            + (f", {summary['invalid']} invalid (settings refused)" if summary["invalid"] else "")
            + (f", {summary['lost']} lost (--resume runs them again)" if summary["lost"] else "")
            + (f", {summary['skipped']} done before" if summary["skipped"] else "")
        )
        print(f"results: {summary['results_path']}")
        if summary.get("plots"):
            print(f"plots: {Path(summary['plots'][0]).parent}")
    return 0 if summary["lost"] == 0 and summary["missing"] == 0 else 1
