"""A driven run from the keyboard, as a person drives it: ``aiko drive`` in a tmux pane, keys sent into the pane on a
schedule (turns, speed changes, two gait switches, a pause, the stop key), then what the references asked of the
joints against the limits, the replay's comparison, and PNGs of the terminal and the live dashboard.

    python benchmarks/drive_session.py --experiment experiments/sidewinding_hil.toml --out runs/drive-demo \\
        [--screens DIR] [--no-replay] [--no-dashboard]

Prints one JSON object. Needs tmux (``apt-get install tmux``). The references are checked twice: as logged (10 Hz,
what the modules got) and as the gait function itself, rebuilt from the driven run's experiment file and sampled on
its 2 ms grid (the peaks between two references).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

# (seconds after the run started, tmux key names)
SCHEDULE: list[tuple[float, list[str]]] = [
    (5.0, ["Up", "Up"]),  # speed 1.2
    (10.0, ["Left", "Left"]),  # turn +0.5
    (17.0, ["1"]),  # lateral undulation
    (24.0, ["Right", "Right", "Right", "Right"]),  # turn -0.5
    (30.0, ["Down", "Down", "Down"]),  # speed 0.9
    (36.0, ["2"]),  # sidewinding
    (44.0, ["c"]),  # straight on
    (48.0, ["Space"]),  # pause: the wave holds
    (51.0, ["Space"]),  # resume
    (57.0, ["q"]),  # stop: the run ends once the robot stands still
]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def render_terminal(text: str, out: Path, title: str) -> Path:
    """The pane's text as a PNG (monospace, light on dark, as a terminal shows it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = text.rstrip("\n").splitlines()
    width = max((len(line) for line in lines), default=80)
    fig = plt.figure(figsize=(0.075 * width + 0.4, 0.19 * (len(lines) + 2) + 0.3), dpi=110)
    fig.patch.set_facecolor("#1e1e1e")
    fig.text(0.01, 0.99, title, family="monospace", fontsize=8, color="#7fb6ff", va="top")
    fig.text(0.01, 0.99 - 1.4 / (len(lines) + 2), "\n".join(lines), family="monospace", fontsize=8,
             color="#e8e8e8", va="top")  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, facecolor=fig.get_facecolor())
    plt.close(fig)
    return out


def fine_extremes(driven_toml: Path, duration_s: float) -> dict[str, float]:
    """The driven run's references as the gait function, sampled on its 2 ms grid."""
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.gaits.steerable import GRID_S

    gait = load_experiment(driven_toml).gait
    ts = np.arange(0.0, duration_s, GRID_S)
    angle = np.empty((ts.size, 2 * gait.n_joints))
    rate = np.empty_like(angle)
    for k, t in enumerate(ts):
        r = gait.references(float(t))
        angle[k] = np.r_[r.angle_h_rad, r.angle_v_rad]
        rate[k] = np.r_[r.rate_h_rad_s, r.rate_v_rad_s]
    return {
        "grid_s": GRID_S,
        "largest_angle_deg": math.degrees(np.abs(angle).max()),
        "largest_jump_per_grid_step_deg": math.degrees(np.abs(np.diff(angle, axis=0)).max()),
        "largest_rate_deg_s": math.degrees(np.abs(rate).max()),
        "largest_acceleration_deg_s2": math.degrees((np.abs(np.diff(rate, axis=0)) / GRID_S).max()),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default="experiments/sidewinding_hil.toml")
    p.add_argument("--backend", default=None)
    p.add_argument("--out", default="runs/drive-session", help="folder for the log, report, replay and screens")
    p.add_argument("--screens", help="also copy the PNGs here")
    p.add_argument("--no-replay", action="store_true")
    p.add_argument("--no-dashboard", action="store_true")
    p.add_argument("--session", default=f"aiko-drive-{os.getpid()}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to aiko drive")
    p.add_argument("--rt-priority", type=int, help="passed to aiko drive (SCHED_FIFO of the streaming thread)")
    args = p.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("drive_session.py needs tmux (apt-get install tmux)")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "driven.mcap"
    summary_path = out / "summary.json"
    dashboard = out / "dashboard.png"
    cmd = [sys.executable, "-m", "aiko.cli", "drive", str(Path(args.experiment).resolve()), "--out", str(log), "--json"]
    if args.backend:
        cmd += ["--backend", args.backend]
    for item in args.set:
        cmd += ["--set", item]
    if args.rt_priority is not None:
        cmd += ["--rt-priority", str(args.rt_priority)]
    if not args.no_replay:
        cmd += ["--replay"]
    if not args.no_dashboard:
        cmd += ["--live-screenshot", str(dashboard)]
    shell = f"cd {REPO} && PYTHONPATH={REPO} {' '.join(cmd)} > {summary_path}; echo AIKO-EXIT $?; sleep 3600"
    tmux("new-session", "-d", "-s", args.session, "-x", "200", "-y", "40", shell)
    try:
        started = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if "| RUN" in tmux("capture-pane", "-p", "-t", args.session):
                started = time.monotonic()
                break
            time.sleep(0.2)
        if started is None:
            screen = tmux("capture-pane", "-p", "-t", args.session)
            raise SystemExit("aiko drive did not start within 300 s:\n" + screen)
        mid_screen = ""
        for at, keys in SCHEDULE:
            while time.monotonic() - started < at:
                time.sleep(0.02)
            if "AIKO-EXIT" in tmux("capture-pane", "-p", "-t", args.session):
                break  # the run ended early (a safety stop): no keys into the shell
            for key in keys:
                tmux("send-keys", "-t", args.session, key)
                time.sleep(0.15)
            if at == 44.0:
                mid_screen = tmux("capture-pane", "-p", "-t", args.session)
        while "AIKO-EXIT" not in (screen := tmux("capture-pane", "-p", "-S", "-200", "-t", args.session)):
            if time.monotonic() - started > 600:
                raise SystemExit("aiko drive did not end:\n" + screen)
            time.sleep(0.5)
        wall_s = time.monotonic() - started
    finally:
        final_screen = tmux("capture-pane", "-p", "-S", "-200", "-t", args.session)
        subprocess.run(["tmux", "kill-session", "-t", args.session], capture_output=True)
    exit_code = int(final_screen.split("AIKO-EXIT", 1)[1].split()[0])
    screens = [render_terminal(mid_screen, out / "terminal.png", f"$ aiko drive {args.experiment} (t = 44 s)")]
    screens.append(render_terminal(final_screen.split("AIKO-EXIT")[0], out / "terminal-end.png", "at the end"))
    result: dict = {"exit_code": exit_code, "wall_s_from_run_start": round(wall_s, 1), "command": " ".join(cmd)}
    summary = json.loads(summary_path.read_text()) if summary_path.stat().st_size else {}
    result["summary"] = {
        k: summary.get(k)
        for k in (
            "duration_s",
            "tracked_point_start_m",
            "tracked_point_end_m",
            "deadlines_missed",
            "drive",
            "report_path",
            "driven_experiment_path",
            "replay_log_path",
            "comparison_plot",
        )  # fmt: skip
    }
    result["comparison"] = summary.get("comparison")
    from aiko.analysis.drive import command_rows, reference_extremes
    from aiko.log import LogReader

    reader = LogReader(log)
    result["commands"] = command_rows(reader)
    result["references_as_sent"] = reference_extremes(reader)
    if summary.get("driven_experiment_path"):
        result["references_as_function"] = fine_extremes(Path(summary["driven_experiment_path"]), summary["duration_s"])
    if dashboard.is_file():
        screens.append(dashboard)
    result["screens"] = [str(s) for s in screens]
    if args.screens:
        target = Path(args.screens)
        target.mkdir(parents=True, exist_ok=True)
        result["screens"] = [str(shutil.copy(s, target / s.name)) for s in screens]
    print(json.dumps(result, default=str))
    return 0 if exit_code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
