"""``aiko identify``: fit model settings so the replayed simulator reproduces a log (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.commands import SUMMARIES
from aiko.commands._cluster_options import add_cluster_arguments, check_cluster_arguments
from aiko.core.errors import AikoError


def register(sub: argparse._SubParsersAction) -> None:
    identify = sub.add_parser(
        "identify",
        help=SUMMARIES["identify"],
        description=(
            "Fit the settings --params names so that the simulator, replayed with the log's references, reproduces "
            "the logged tracked point and joint angles: scipy least_squares within --bounds, each Jacobian column a "
            "replay on Dask distributed (a LocalCluster by default, any cluster with --scheduler). Prints the "
            "estimate with its uncertainty and the residual before and after; writes OUT/identified.toml (the "
            "settings as an experiment overlay) and OUT/identify.json. See docs/sweeps.md."
        ),
    )
    identify.add_argument("log", help="the recorded run (MCAP log written by aiko run)")
    identify.add_argument(
        "--params",
        required=True,
        metavar="KEY[,KEY...]",
        help="settings to fit, e.g. sim.mu_transversal,sim.mu_rolling",
    )
    identify.add_argument(
        "--bounds",
        required=True,
        metavar="KEY=LOW:HIGH[,...]",
        help="the range of every fitted setting, e.g. sim.mu_transversal=0.05:1.0",
    )
    identify.add_argument(
        "--start",
        metavar="KEY=VALUE[,...]",
        help="starting values (default: the log's own value of each setting, else the middle of its bounds)",
    )
    identify.add_argument("--backend", metavar="NAME", help="the backend replays run on (default: sim)")
    identify.add_argument(
        "--no-joints", action="store_true", help="fit the tracked point only (default: also every joint angle)"
    )
    identify.add_argument(
        "--max-evaluations", type=int, default=30, metavar="N", help="least-squares evaluations at most (default 30)"
    )
    identify.add_argument(
        "--starts",
        type=int,
        default=1,
        metavar="N",
        help="least-squares fits from N starts at once: --start (or its default), then a Latin hypercube inside "
        "--bounds; the lowest cost wins (default 1)",
    )
    identify.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the Latin hypercube of --starts (default 0)"
    )
    identify.add_argument(
        "--step",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="finite-difference step of the Jacobian, a fraction of each range (default 0.05; larger averages "
        "over a rough residual)",
    )
    add_cluster_arguments(identify, "run the replays")
    identify.add_argument("--out", metavar="DIR", help="output directory (default: runs/identify/LOG-NAME)")
    identify.add_argument("--json", action="store_true", help="print the JSON summary on stdout")
    identify.set_defaults(handler=identify_command)


def identify_command(args: argparse.Namespace) -> int:
    check_cluster_arguments(args)
    if not 1 <= args.max_evaluations <= 10_000:
        raise AikoError(f"--max-evaluations must be in [1, 10000], got {args.max_evaluations}")
    if not 1 <= args.starts <= 256:
        raise AikoError(f"--starts must be in [1, 256], got {args.starts}")
    if not 0 < args.step <= 0.5:
        raise AikoError(f"--step must be in (0, 0.5] (a fraction of each parameter's range), got {args.step}")
    log_path = Path(args.log)
    if not log_path.is_file():
        raise AikoError(f"log not found: {log_path}")
    from aiko.log import LogReader
    from aiko.robots.aiko.experiment import experiment_from_log
    from aiko.sweep.identify import IdentifyParameter, identify, logged_value, parse_bounds, parse_values, write_overlay

    keys = list(dict.fromkeys(k.strip() for k in args.params.split(",") if k.strip()))
    if not keys:
        raise AikoError("--params: name at least one setting to fit")
    bounds = parse_bounds(args.bounds, keys)
    starts = parse_values(args.start, keys, "--start")
    experiment = experiment_from_log(LogReader(log_path))
    experiment_from_log(LogReader(log_path), {k: sum(bounds[k]) / 2 for k in keys})  # every key is a real setting
    parameters = []
    for key in keys:
        low, high = bounds[key]
        start = starts.get(key, logged_value(key, experiment))
        if start is None or not low <= start <= high:
            start = 0.5 * (low + high)
        parameters.append(IdentifyParameter(key, low, high, start))
    out = Path(args.out) if args.out else Path("runs") / "identify" / log_path.stem

    from aiko.sweep.execute import SweepOptions

    options = SweepOptions(out=out, scheduler=args.scheduler, workers=args.workers)
    summary = identify(
        log_path,
        parameters,
        options,
        joints=not args.no_joints,
        max_evaluations=args.max_evaluations,
        starts=args.starts,
        seed=args.seed,
        step=args.step,
        backend=args.backend,
        progress_stream=sys.stderr,
    )
    out.mkdir(parents=True, exist_ok=True)
    summary["overlay_path"] = str(write_overlay(summary, out / "identified.toml"))
    (out / "identify.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary))
    else:
        for key, p in summary["parameters"].items():
            print(
                f"{key} = {p['value']:.6g} ± {p['std']:.2g}  "
                f"(start {p['start']:.6g}, bounds {p['low']:g}..{p['high']:g})"
            )
        if len(summary["starts"]) > 1:
            for i, start in enumerate(summary["starts"]):
                mark = "*" if i == summary["best_start"] else " "
                begin = ", ".join(f"{v:.4g}" for v in start["start"].values())
                end = ", ".join(f"{v:.4g}" for v in start["value"].values())
                print(
                    f"{mark} start {i + 1}: ({begin}) -> ({end}), cost {start['cost']:.4g}, {start['evaluations']} ev."
                )
        before, after = summary["residual_before"], summary["residual_after"]
        if before["position_rms_mm"] is not None:
            print(f"tracked point RMS: {before['position_rms_mm']:.2f} mm -> {after['position_rms_mm']:.2f} mm")
        if after["joint_rms_deg"] is not None:
            print(f"joint angle RMS: {before['joint_rms_deg']:.3f} deg -> {after['joint_rms_deg']:.3f} deg")
        print(f"overlay: {summary['overlay_path']}")
    return 0
