"""``aiko rod``: the Cosserat rod simulator (paper 004) — cantilever checks, the incline, scenario runs, and which
of a rod's vibration modes a time step keeps."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from aiko.commands import SUMMARIES
from aiko.core.config import parse_override
from aiko.core.errors import AikoError
from aiko.core.progress import Progress
from aiko.robots.rod_bench.experiment import load_rod_experiment, log_rate_hz
from aiko.robots.rod_bench.run import record_rod_run
from sim.cosserat import ConvergenceError, Smoothing, build_model, uniform_rod
from sim.cosserat.incline import run_incline
from sim.cosserat.modes import step_resolution, vibration_modes
from sim.cosserat.slack import SMOOTHINGS
from sim.cosserat.statics import solve_statics


def register(sub: argparse._SubParsersAction) -> None:
    rod = sub.add_parser("rod", help=SUMMARIES["rod"])
    rod_sub = rod.add_subparsers(dest="rod_command", metavar="ACTION", parser_class=type(rod))

    cant = rod_sub.add_parser("cantilever", help="slender rod clamped horizontally under a vertical tip load")
    cant.add_argument("--pl2-ei", type=float, required=True, metavar="K", help="load parameter P L^2 / (E I)")
    cant.add_argument("--sections", type=int, default=16, metavar="N", help="strain sections n (default 16)")
    cant.add_argument("--json", action="store_true", help="print the result as one JSON object")
    cant.set_defaults(handler=cantilever_command)

    inc = rod_sub.add_parser("incline", help="a rod lying on a tilted plane: does it stick or slide?")
    inc.add_argument("--mu", type=float, required=True, help="Coulomb friction coefficient")
    inc.add_argument("--angle-deg", type=float, required=True, help="plane inclination in degrees")
    inc.add_argument("--smoothing", choices=SMOOTHINGS, default="sigmoid")
    inc.add_argument("--json", action="store_true", help="print the result as one JSON object")
    inc.set_defaults(handler=incline_command)

    run = rod_sub.add_parser("run", help="run a rod experiment file (experiments/rod/*.toml) and log it")
    run.add_argument("experiment", help="rod experiment TOML")
    run.add_argument("--out", metavar="LOG.mcap", help="experiment log (default runs/<name>-<time>.mcap)")
    run.add_argument("--plot", metavar="OUT.png", help="plot centreline snapshots and the tip path")
    run.add_argument("--mu", type=float, help="override contact.friction_coefficient")
    run.add_argument("--smoothing", choices=SMOOTHINGS, help="override contact.smoothing")
    run.add_argument("--sharpness", type=float, help="override contact.sharpness")
    run.add_argument("--duration", type=float, metavar="S", help="override run.duration_s")
    run.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    run.set_defaults(handler=run_command)

    modes = rod_sub.add_parser(
        "modes",
        help="the rod's vibration modes and, per time step, those implicit Euler erases while the physics keeps them",
    )
    modes.add_argument("experiment", help="rod experiment TOML (its rod, sections and base)")
    modes.add_argument(
        "--dt", type=float, nargs="+", default=[2.5e-4, 1e-3, 5e-3, 1e-2], metavar="S", help="time steps to assess"
    )
    modes.add_argument("--window", type=float, default=0.1, metavar="S", help="how long a mode must last (0.1 s)")
    modes.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key of the file")
    modes.add_argument("--json", action="store_true", help="print the result as one JSON object")
    modes.set_defaults(handler=modes_command)
    rod.set_defaults(handler=lambda args: rod.print_help() or 2)


def cantilever_command(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.pl2_ei) and 0 <= args.pl2_ei <= 50):
        raise AikoError(f"--pl2-ei must be in [0, 50], got {args.pl2_ei}")
    if not 1 <= args.sections <= 200:
        raise AikoError(f"--sections must be in [1, 200], got {args.sections}")
    length, radius = 1.0, 0.005  # slender: L/r = 200, so shear and stretch are negligible
    rod = uniform_rod(length, radius, 1e9, 1000.0, poisson_ratio=0.3)
    load = args.pl2_ei * rod.bending_stiffness_n_m2() / length**2
    model = build_model(rod, args.sections, gravity_m_s2=(0, 0, 0), tip_force_n=(0, 0, -load))
    try:
        res = solve_statics(model, load_steps=max(1, int(math.ceil(args.pl2_ei))))
    except ConvergenceError as exc:
        raise AikoError(f"cantilever did not converge: {exc}") from None
    R = res.tip_rotation
    out = {
        "pl2_ei": args.pl2_ei,
        "sections": args.sections,
        "tip_deflection_over_L": float(-res.tip_position_m[2] / length),
        "shortening_over_L": float(1.0 - res.tip_position_m[0] / length),
        "tip_angle_rad": float(math.atan2(-R[2, 0], R[0, 0])),
        "newton_iterations": res.iterations,
    }
    _print(out, args.json)
    return 0


def incline_command(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.mu) and args.mu >= 0):
        raise AikoError(f"--mu must be >= 0, got {args.mu}")
    if not (0 <= args.angle_deg < 90):
        raise AikoError(f"--angle-deg must be in [0, 90), got {args.angle_deg}")
    sharp = {"sigmoid": 50.0, "trigonometric": 2.0, "heaviside": 1.0}[args.smoothing]
    try:
        res = run_incline(args.mu, math.radians(args.angle_deg), smoothing=Smoothing(args.smoothing, sharp))
    except ConvergenceError as exc:
        raise AikoError(f"incline did not converge: {exc}") from None
    out = {
        "mu": args.mu,
        "angle_deg": args.angle_deg,
        "sticks": res.sticks,
        "acceleration_m_s2": res.acceleration_m_s2,
        "coulomb_acceleration_m_s2": res.expected_acceleration_m_s2,
        "newton_iterations_mean": res.newton_iterations_mean,
    }
    _print(out, args.json)
    return 0


def run_command(args: argparse.Namespace) -> int:
    overrides = _overrides(args)
    scenario = load_rod_experiment(args.experiment, overrides)
    out = Path(args.out) if args.out else Path("runs") / f"{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}.mcap"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AikoError(f"cannot create the log directory {out.parent}: {exc.strerror}") from None
    metadata = {"source": str(args.experiment), "overrides": overrides}
    with Progress(f"rod {scenario.name}") as progress:
        summary, snapshots = record_rod_run(scenario, out, log_rate_hz(args.experiment), metadata, progress)
        progress.complete()
    if args.plot:
        _plot(snapshots, Path(args.plot), scenario.name)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{scenario.name}: {summary['steps']} steps in {summary['wall_time_s']:.1f} s, log {out}")
    return 0


def modes_command(args: argparse.Namespace) -> int:
    """Why: a coarse step's path differs from a fine step's by the motion in the modes the coarse step erases, so
    this says before any run which step a rod needs (docs/cosserat.md, "Which modes a step keeps")."""
    if not (math.isfinite(args.window) and args.window > 0):
        raise AikoError(f"--window must be > 0, got {args.window}")
    bad = [dt for dt in args.dt if not (math.isfinite(dt) and 0 < dt <= args.window)]
    if bad:
        raise AikoError(f"every --dt must be in (0, --window], got {bad[0]}")
    overrides = dict(parse_override(text) for text in args.set)
    model = load_rod_experiment(args.experiment, overrides or None).model
    modes = vibration_modes(model)
    tau = model.rod.damping_time_s
    res = step_resolution(modes.omega_rad_s, tau, args.dt, args.window)
    out = {
        "experiment": str(args.experiment),
        "overrides": overrides,
        "sections": model.n_sections,
        "damping_time_s": tau,
        "window_s": args.window,
        "rigid_modes": modes.rigid_modes,
        "frequencies_hz": [round(float(f), 4) for f in modes.frequency_hz],
        "physics_keeps": res.physics_keeps,
        "highest_kept_hz": res.highest_kept_hz,
        "needed_dt_s": res.needed_dt_s,
        "steps": [
            {"dt_s": dt, "lowest_erased_hz": low, "kept_by_physics_erased_by_step": n}
            for dt, low, n in zip(res.dt_s, res.lowest_erased_hz, res.kept_by_physics_erased_by_step, strict=True)
        ],
    }
    if args.json:
        _print(out, True)
        return 0
    f = modes.frequency_hz
    print(
        f"{len(f)} elastic modes ({modes.rigid_modes} rigid), {f[0]:.3g} to {f[-1]:.4g} Hz; Kelvin-Voigt tau {tau:g} s"
    )
    print("first ten (Hz): " + ", ".join(f"{x:.3g}" for x in f[:10]))
    if res.needed_dt_s is None:
        print(f"the physics keeps no mode over {args.window:g} s")
    else:
        print(
            f"over {args.window:g} s the physics keeps {res.physics_keeps} modes (up to {res.highest_kept_hz:.4g} Hz); "
            f"implicit Euler keeps them all at dt <= {res.needed_dt_s * 1e3:.3g} ms"
        )
    print("dt (ms) | lowest mode the step erases (Hz) | modes the physics keeps and the step erases")
    for row in out["steps"]:
        low = "none" if row["lowest_erased_hz"] is None else f"{row['lowest_erased_hz']:.4g}"
        print(f"{row['dt_s'] * 1e3:g} | {low} | {row['kept_by_physics_erased_by_step']}")
    sys.stdout.flush()
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as dotted overrides of the rod experiment file."""
    keys = {
        "mu": "contact.friction_coefficient",
        "smoothing": "contact.smoothing",
        "sharpness": "contact.sharpness",
        "duration": "run.duration_s",
    }
    return {key: getattr(args, attr) for attr, key in keys.items() if getattr(args, attr) is not None}


def _view_axes(snapshots: list[np.ndarray]) -> tuple[int, int]:
    """The two world axes along which the rod spreads most over the run: x–z for a rod dropped on a plane,
    x–y for the tube's bend in the horizontal plane (a fixed x–z view shows that one as a straight line)."""
    points = np.concatenate(snapshots)
    spread = points.max(axis=0) - points.min(axis=0)
    first, second = sorted(np.argsort(spread)[-2:].tolist())
    return first, second


def _plot(snapshots: list[np.ndarray], out: Path, title: str) -> None:
    from aiko.analysis.plots import _pyplot, save_figure

    plt = _pyplot()
    a, b = _view_axes(snapshots)
    fig, ax = plt.subplots(figsize=(7, 4))
    picks = np.linspace(0, len(snapshots) - 1, min(8, len(snapshots))).astype(int)
    for i in picks:
        c = snapshots[i]
        ax.plot(c[:, a], c[:, b], color=plt.cm.viridis(i / max(1, len(snapshots) - 1)))
    tip = np.array([s[-1] for s in snapshots])
    ax.plot(tip[:, a], tip[:, b], "k:", lw=1, label="tip path")
    ax.set_xlabel(f"{'xyz'[a]} [m]")
    ax.set_ylabel(f"{'xyz'[b]} [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(f"{title} (centreline, early → late: dark → light)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out, dpi=120)


def _print(out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    sys.stdout.flush()
