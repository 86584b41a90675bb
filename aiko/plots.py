"""Figures: the back-to-back comparison (paper 000, Figs. 7 and 10–11 style) and the single-run report.

Matplotlib with the Agg backend (no display needed); run A solid, run B dashed, as in the paper.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

if TYPE_CHECKING:
    from aiko.compare import Comparison
    from aiko.log import LogReader


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` and close it; an unwritable path is a user error (one line, exit 2), not a traceback."""
    from aiko.errors import writing

    plt = _pyplot()
    try:
        with writing(out):
            fig.savefig(out, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(out)


def _with_parent_dir(out: Path) -> Path:
    from aiko.errors import writing

    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
    return out


def plot_comparison(cmp: Comparison, out: str | Path, labels: tuple[str, str] = ("A (real)", "B (sim)")) -> Path:
    plt = _pyplot()
    a, b = cmp.a, cmp.b
    offset = cmp.result["time_offset_s"]
    shift = np.asarray(cmp.result["position_offset_m"])
    b_t = b.t_s - offset
    b_p = b.position_m - shift
    fig = plt.figure(figsize=(12, 9), constrained_layout=True)
    grid = fig.add_gridspec(3, 2)
    ax_x, ax_y, ax_xy = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[0:2, 1])
    for ax, k, name in ((ax_x, 0, "x"), (ax_y, 1, "y")):
        ax.plot(a.t_s, a.position_m[:, k], "-", color="C0", label=labels[0])
        ax.plot(b_t, b_p[:, k], "--", color="C1", label=labels[1])
        ax.set_xlabel("t [s]")
        ax.set_ylabel(f"{name} [m]")
        ax.grid(alpha=0.3)
    ax_x.legend(loc="best")
    ax_xy.plot(a.position_m[:, 0], a.position_m[:, 1], "-", color="C0", label=labels[0])
    ax_xy.plot(b_p[:, 0], b_p[:, 1], "--", color="C1", label=labels[1])
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_xy.set_xlabel("x [m]")
    ax_xy.set_ylabel("y [m]")
    ax_xy.grid(alpha=0.3)
    r = cmp.result
    ax_xy.set_title(
        f"offset {offset * 1e3:.0f} ms, RMS {r['rms_position_error_m'] * 1e3:.1f} mm, "
        f"distance ratio {r['distance_ratio'] if r['distance_ratio'] is None else round(r['distance_ratio'], 3)}",
        fontsize=10,
    )
    _joint_series(fig.add_subplot(grid[2, 0]), cmp, labels, offset)
    _joint_rms_bars(fig.add_subplot(grid[2, 1]), r["joint_tracking_rms_rad"], labels)
    fig.suptitle(f"{Path(r['a']).name} vs {Path(r['b']).name} — tracked point {r['tracked_point']}")
    return save_figure(fig, _with_parent_dir(Path(out)), dpi=100)


def _joint_series(ax, cmp: Comparison, labels: tuple[str, str], offset_s: float) -> None:
    """The middle joint's horizontal angle: reference, run A (solid) and run B (dashed)."""
    ra, rb = cmp.a_reader, cmp.b_reader
    if not (ra.has("/joint_feedback") and rb.has("/joint_feedback")):
        ax.text(0.5, 0.5, "no joint data", ha="center", va="center", transform=ax.transAxes)
        return
    fa, fb = ra.channel("/joint_feedback"), rb.channel("/joint_feedback")
    j = fa["angle_h_rad"].shape[1] // 2
    if ra.has("/references"):
        refs = ra.channel("/references")
        ax.step(
            refs["t_s"], np.degrees(refs["angle_h_rad"][:, j]), where="post", color="0.6", lw=1, label="reference A"
        )
    ax.plot(fa["t_s"], np.degrees(fa["angle_h_rad"][:, j]), "-", color="C0", label=labels[0])
    ax.plot(fb["t_s"], np.degrees(fb["angle_h_rad"][:, j]), "--", color="C1", label=labels[1])
    ax.set_xlabel("t [s] (joint data share the reference clock: no mocap offset)")
    ax.set_ylabel(f"joint {j + 1} horizontal [deg]")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)


def _joint_rms_bars(ax, tracking: dict, labels: tuple[str, str]) -> None:
    drawn = False
    width = 0.2
    for i, (key, label) in enumerate(zip(("a", "b"), labels, strict=True)):
        data = tracking.get(key)
        if not data:
            continue
        n = len(data["h_rad"])
        x = np.arange(1, n + 1)
        ax.bar(x + (2 * i - 1.5) * width, np.degrees(data["h_rad"]), width, label=f"{label} horizontal", color=f"C{i}")
        ax.bar(
            x + (2 * i - 0.5) * width,
            np.degrees(data["v_rad"]),
            width,
            label=f"{label} vertical",
            color=f"C{i}",
            alpha=0.5,
            hatch="//",
        )
        ax.set_xticks(x)
        drawn = True
    ax.set_xlabel("joint")
    ax.set_ylabel("tracking RMS [deg]")
    ax.set_title("joint tracking: RMS of measured − reference")
    ax.grid(alpha=0.3, axis="y")
    if drawn:
        ax.legend(loc="best", fontsize=8, ncols=2)
    else:
        ax.text(0.5, 0.5, "no joint data", ha="center", va="center", transform=ax.transAxes)


def plot_run(reader: LogReader, out: str | Path | BinaryIO, joints: tuple[int, ...] = (1, 5, 9)) -> Path | None:
    """One run: tracked point x(t), y(t), x–y path, and reference vs measured for a few joints (PNG to a path
    or a binary file object)."""
    from aiko.compare import CompareError, tracked_point

    plt = _pyplot()
    fig = plt.figure(figsize=(12, 9), constrained_layout=True)
    grid = fig.add_gridspec(3, 2)
    ax_x, ax_y, ax_xy = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[0:2, 1])
    try:
        track = tracked_point(reader)
        for ax, k, name in ((ax_x, 0, "x"), (ax_y, 1, "y")):
            ax.plot(track.t_s, track.position_m[:, k], "-", color="C0")
            ax.set_ylabel(f"{name} [m]")
            ax.set_xlabel("t [s]")
            ax.grid(alpha=0.3)
        ax_xy.plot(track.position_m[:, 0], track.position_m[:, 1], "-", color="C0")
        ax_xy.set_aspect("equal", adjustable="datalim")
        ax_xy.set_title(f"tracked point {track.name} ({int(track.occluded.sum())} occluded samples)", fontsize=10)
    except CompareError as exc:
        for ax in (ax_x, ax_y, ax_xy):
            ax.text(0.5, 0.5, str(exc), ha="center", va="center", transform=ax.transAxes, wrap=True, fontsize=8)
    ax_xy.set_xlabel("x [m]")
    ax_xy.set_ylabel("y [m]")
    ax_xy.grid(alpha=0.3)
    ax_j = fig.add_subplot(grid[2, :])
    if reader.has("/references") and reader.has("/joint_feedback"):
        refs, fb = reader.channel("/references"), reader.channel("/joint_feedback")
        n = refs["angle_h_rad"].shape[1]
        for c, j in enumerate(j for j in joints if 1 <= j <= n):
            ax_j.step(
                refs["t_s"],
                np.degrees(refs["angle_h_rad"][:, j - 1]),
                where="post",
                color=f"C{c}",
                linestyle="--",
                label=f"joint {j} reference",
            )
            ax_j.plot(
                fb["t_s"], np.degrees(fb["angle_h_rad"][:, j - 1]), "-", color=f"C{c}", label=f"joint {j} measured"
            )
        ax_j.legend(loc="upper right", fontsize=8, ncols=3)
    ax_j.set_xlabel("t [s]")
    ax_j.set_ylabel("horizontal angle [deg]")
    ax_j.grid(alpha=0.3)
    fig.suptitle(f"run {reader.path.name}")
    if not isinstance(out, (str, Path)):
        fig.savefig(out, dpi=100, format="png")
        plt.close(fig)
        return None
    return save_figure(fig, _with_parent_dir(Path(out)), dpi=100)
