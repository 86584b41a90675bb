"""``aiko rhex flip``: planar RHex self-righting on the compliant benchmark (paper 003, IV-C)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from aiko.analysis.plots import save_figure
from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError

#: Table V of paper 003: RMSE of predicted pitch acceleration [rad/s²].
PAPER_RMSE = {
    ("blind", 0.39): 11.22,
    ("blind", 0.6): 11.56,
    ("maximal_thrust", 0.39): 6.65,
    ("maximal_thrust", 0.6): 6.68,
}


def register(sub: argparse._SubParsersAction) -> None:
    rhex = sub.add_parser("rhex", help=SUMMARIES["rhex"])
    rhex_sub = rhex.add_subparsers(dest="rhex_command", metavar="ACTION", parser_class=type(rhex))
    flip = rhex_sub.add_parser("flip", help="run one flip with a controller on the compliant model")
    flip.add_argument("--controller", required=True, choices=("maximal_thrust", "blind"))
    flip.add_argument("--mu-toe", required=True, type=float, metavar="MU", help="toe-ground friction coefficient")
    flip.add_argument("--rate-hz", type=float, default=200.0, help="controller rate (default 200)")
    flip.add_argument("--t-max", type=float, default=1.5, metavar="S", help="give up after S seconds (default 1.5)")
    flip.add_argument(
        "--assume-contacts",
        action="store_true",
        help="blind only: assume body and reachable toes on the ground instead of sensing contacts",
    )
    flip.add_argument("--plot", metavar="OUT.png", help="plot pitch and predicted/simulated pitch acceleration")
    flip.add_argument("--json", action="store_true", help="print one JSON object")
    flip.set_defaults(handler=run_flip_command)
    rhex.set_defaults(handler=lambda args: rhex.print_help() or 2)


def run_flip_command(args: argparse.Namespace) -> int:
    from sim.planar_contact.rhex.flip import run_flip

    if not (math.isfinite(args.mu_toe) and 0.0 <= args.mu_toe <= 5.0):
        raise AikoError(f"--mu-toe must lie in [0, 5], got {args.mu_toe}")
    if not (math.isfinite(args.rate_hz) and 10.0 <= args.rate_hz <= 2000.0):
        raise AikoError(f"--rate-hz must lie in [10, 2000], got {args.rate_hz}")
    if not (math.isfinite(args.t_max) and 0.0 < args.t_max <= 10.0):
        raise AikoError(f"--t-max must lie in (0, 10] seconds, got {args.t_max}")
    if args.assume_contacts and args.controller != "blind":
        raise AikoError("--assume-contacts applies to --controller blind only")
    result = run_flip(
        args.controller,
        args.mu_toe,
        rate_hz=args.rate_hz,
        t_max_s=args.t_max,
        blind_assumes_contacts=args.assume_contacts,
    )
    summary = result.summary()
    summary["paper_pitch_accel_rmse"] = PAPER_RMSE.get((args.controller, round(args.mu_toe, 2)))
    if args.plot:
        summary["plot"] = _plot(result, Path(args.plot))
    if args.json:
        print(json.dumps(summary))
        return 0
    done = f"completed in {summary['flip_time_s']:.3f} s" if summary["completed"] else "did NOT complete"
    print(f"{args.controller} on mu_toe={args.mu_toe}: {done}")
    paper = summary["paper_pitch_accel_rmse"]
    print(
        f"  pitch-acceleration prediction RMSE: {summary['pitch_accel_rmse']:.2f} rad/s²"
        + (f" (paper, Table V: {paper})" if paper is not None else "")
    )
    print(
        f"  controller step: median {summary['controller_step_ms_median']:.2f} ms, "
        f"p95 {summary['controller_step_ms_p95']:.2f} ms over {summary['controller_steps']} steps"
    )
    return 0


def _plot(result, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5))
    ax1.plot(result.t_s, np.degrees(result.alpha_rad))
    ax1.axhline(90.0, color="0.6", lw=0.8, ls="--")
    ax1.set_ylabel("pitch [deg]")
    ax1.set_title(f"{result.controller}, mu_toe = {result.mu_toe}")
    ax2.step(result.t_s, result.alpha_ddot_predicted, where="post", label="predicted (rigid model)")
    ax2.step(result.t_s, result.alpha_ddot_simulated, where="post", label="simulated (compliant)")
    ax2.set_ylabel("pitch acc. [rad/s²]")
    ax2.set_xlabel("t [s]")
    ax2.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    return str(out)
