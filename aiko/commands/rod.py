"""``aiko rod``: the Cosserat rod simulator (paper 004) — cantilever checks, the incline, and scenario runs."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.core.progress import Progress
from aiko.robots.rod_bench.experiment import load_rod_experiment, log_rate_hz
from sim.cosserat import ConvergenceError, Smoothing, build_model, uniform_rod
from sim.cosserat.incline import run_incline
from sim.cosserat.scenario import Sample, simulate
from sim.cosserat.slack import SMOOTHINGS
from sim.cosserat.statics import solve_statics


def register(sub: argparse._SubParsersAction) -> None:
    rod = sub.add_parser("rod", help="Cosserat rod simulator (paper 004)")
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


def _open_recorder(path: Path, metadata: dict[str, Any]):
    """The standard experiment log (aiko.log, issue 5); a JSON-lines stand-in if that package is absent."""
    try:
        from aiko.log import McapRecorder
    except ImportError:
        return _JsonLinesRecorder(path.with_suffix(".jsonl"), metadata)
    from aiko.robots.aiko.run import foxglove_views

    return McapRecorder(path, metadata=metadata, foxglove_views=foxglove_views(None))


class _JsonLinesRecorder:
    """Stand-in Recorder (one JSON object per line) used only while aiko.log is not installed."""

    def __init__(self, path: Path, metadata: dict[str, Any]) -> None:
        self.path = path
        self._f = path.open("w")
        self._f.write(json.dumps({"metadata": metadata}) + "\n")

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        self._f.write(json.dumps({"channel": channel, "t_ns": t_ns, "payload": payload}) + "\n")

    def event(self, kind: str, t_ns: int, **fields: Any) -> None:
        self._f.write(json.dumps({"event": kind, "t_ns": t_ns, **fields}) + "\n")

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_command(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.mu is not None:
        overrides["contact.friction_coefficient"] = args.mu
    if args.smoothing is not None:
        overrides["contact.smoothing"] = args.smoothing
    if args.sharpness is not None:
        overrides["contact.sharpness"] = args.sharpness
    if args.duration is not None:
        overrides["run.duration_s"] = args.duration
    scenario = load_rod_experiment(args.experiment, overrides)
    rate = log_rate_hz(args.experiment)
    every = max(1, int(round(1.0 / (rate * scenario.dt_s))))
    out = Path(args.out) if args.out else Path("runs") / f"{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}.mcap"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AikoError(f"cannot create the log directory {out.parent}: {exc.strerror}") from None
    metadata = {
        "experiment": scenario.name,
        "source": str(args.experiment),
        "simulator": "sim.cosserat",
        "dt_s": scenario.dt_s,
        "n_sections": scenario.model.n_sections,
        "overrides": overrides,
    }
    snapshots: list[np.ndarray] = []
    wall0 = time.perf_counter()
    with _open_recorder(out, metadata) as recorder, Progress(f"rod {scenario.name}") as progress:
        t0_ns = time.monotonic_ns()

        def on_sample(sample: Sample) -> None:
            progress(sample.t_s, scenario.duration_s)
            t_ns = t0_ns + int(round(sample.t_s * 1e9))
            payload: dict[str, Any] = {
                "t_s": sample.t_s,
                "centreline_m": sample.centreline_m.tolist(),
                "strain": (sample.state.q[6:].reshape(-1, 6) + sample.model.xi_ref_nodes).tolist(),
            }
            recorder.record("/sim/rod/centreline", t_ns, payload)
            if sample.info is not None:
                recorder.record(
                    "/sim/rod/contacts",
                    t_ns,
                    {
                        "force_n": sample.info.contact_force_n.tolist(),
                        "gap_m": sample.info.contact_gap_m.tolist(),
                    },
                )
                recorder.record(
                    "/sim/rod/base_wrench",
                    t_ns,
                    {
                        "moment_n_m": sample.info.base_wrench[0:3].tolist(),
                        "force_n": sample.info.base_wrench[3:6].tolist(),
                        "newton_iterations": sample.info.iterations,
                    },
                )
            snapshots.append(sample.centreline_m.copy())

        recorder.event("run_started", t0_ns, experiment=scenario.name)
        try:
            result = simulate(scenario, on_sample, every)
            progress.complete()
        except ConvergenceError as exc:
            recorder.event("run_failed", time.monotonic_ns(), error=str(exc))
            raise AikoError(f"{scenario.name}: simulation stopped: {exc}") from None
        recorder.event("run_finished", t0_ns + int(scenario.duration_s * 1e9))
    wall = time.perf_counter() - wall0
    log_path = getattr(recorder, "path", out)
    summary = {
        "experiment": scenario.name,
        "duration_s": float(result.times_s[-1]),
        "steps": int(len(result.times_s)),
        "wall_time_s": wall,
        "realtime_factor": float(result.times_s[-1] / wall),
        "newton_iterations_mean": float(np.mean(result.iterations)),
        "halved_steps": int(np.sum(result.substeps > 1)),
        "tip_start_m": snapshots[0][-1].tolist(),
        "tip_end_m": result.tip_m[-1].tolist(),
        "log_path": str(log_path),
    }
    if args.plot:
        _plot(snapshots, Path(args.plot), scenario.name)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{scenario.name}: {summary['steps']} steps in {wall:.1f} s, log {log_path}")
    return 0


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
