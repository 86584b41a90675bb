"""``aiko gait show``: sample an experiment's references, exactly as the control loop would send them."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from aiko.analysis.plots import save_figure
from aiko.commands import SUMMARIES
from aiko.core.errors import AikoError, writing
from aiko.robots.aiko.experiment import load_experiment

MAX_SAMPLES = 1_000_000
"""A CSV row per sample: a million rows (~200 MB) is already more than a plot or a check needs."""


def register(sub: argparse._SubParsersAction) -> None:
    gait = sub.add_parser("gait", help=SUMMARIES["gait"])
    gait_sub = gait.add_subparsers(dest="gait_command", metavar="ACTION", parser_class=type(gait))
    show = gait_sub.add_parser("show", help="sample an experiment's joint references to CSV (and a plot)")
    show.add_argument("experiment", help="experiment TOML file")
    show.add_argument("--csv", required=True, metavar="OUT.csv", help="write t_s, alpha_h_*, alpha_v_* (radians)")
    show.add_argument("--plot", metavar="OUT.png", help="also plot the references")
    show.add_argument("--duration", type=float, metavar="S", help="seconds to sample (default: the run's)")
    show.add_argument("--rate", type=float, metavar="HZ", help="sample rate (default: the reference rate)")
    show.set_defaults(handler=show_gait)
    gait.set_defaults(handler=lambda args: gait.print_help() or 2)


def sample_gait(experiment_path: str, duration_s: float | None, rate_hz: float | None) -> tuple[np.ndarray, ...]:
    experiment = load_experiment(experiment_path)
    duration_s = experiment.run.duration_s if duration_s is None else duration_s
    rate_hz = experiment.run.reference_rate_hz if rate_hz is None else rate_hz
    if not duration_s > 0 or not np.isfinite(duration_s):
        raise AikoError(f"--duration must be a positive number of seconds, got {duration_s}")
    if not rate_hz > 0 or not np.isfinite(rate_hz):
        raise AikoError(f"--rate must be a positive frequency in Hz, got {rate_hz}")
    n_samples = int(np.floor(duration_s * rate_hz + 1e-9)) + 1
    if n_samples > MAX_SAMPLES:
        raise AikoError(
            f"--duration {duration_s:g} s at --rate {rate_hz:g} Hz gives {n_samples} samples; at most {MAX_SAMPLES}"
        )
    times = np.arange(n_samples) / rate_hz
    refs = [experiment.gait.references(float(t)) for t in times]
    return times, np.array([r.angle_h_rad for r in refs]), np.array([r.angle_v_rad for r in refs])


def show_gait(args: argparse.Namespace) -> int:
    times, angle_h, angle_v = sample_gait(args.experiment, args.duration, args.rate)
    n = angle_h.shape[1]
    out = Path(args.csv)
    with writing(out), out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s", *[f"alpha_h_{i}" for i in range(1, n + 1)], *[f"alpha_v_{i}" for i in range(1, n + 1)]])
        for row in zip(times, angle_h, angle_v, strict=True):
            writer.writerow([repr(float(row[0])), *map(repr, row[1].tolist()), *map(repr, row[2].tolist())])
    if args.plot:
        _plot(times, angle_h, angle_v, Path(args.plot))
    return 0


def _plot(times: np.ndarray, angle_h: np.ndarray, angle_v: np.ndarray, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for axis, data, label in ((axes[0], angle_h, "horizontal α_h"), (axes[1], angle_v, "vertical α_v")):
        for i in range(data.shape[1]):
            axis.plot(times, np.degrees(data[:, i]), lw=1, label=f"joint {i + 1}")
        axis.set_ylabel(f"{label} [deg]")
        axis.grid(alpha=0.3)
    axes[1].set_xlabel("t [s]")
    axes[0].legend(ncol=5, fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, dpi=110)
