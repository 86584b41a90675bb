"""Figures: the back-to-back comparison (paper 000, Figs. 7 and 10–11 style) and the single-run report.

Matplotlib with the Agg backend (no display needed); run A solid, run B dashed, as in the paper.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

if TYPE_CHECKING:
    from aiko.analysis.compare import Comparison
    from aiko.log import LogReader


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` and close it; an unwritable path is a user error (one line, exit 2), not a traceback."""
    from aiko.core.errors import writing

    plt = _pyplot()
    try:
        with writing(out):
            fig.savefig(out, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(out)


def _with_parent_dir(out: Path) -> Path:
    from aiko.core.errors import writing

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
    from aiko.analysis.compare import CompareError, tracked_point

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
    return _save_to(fig, out)


def _save_to(fig, out: str | Path | BinaryIO, dpi: int = 100) -> Path | None:
    """Write ``fig`` to a path (its directory made) or a binary file object, and close it."""
    if isinstance(out, (str, Path)):
        return save_figure(fig, _with_parent_dir(Path(out)), dpi=dpi)
    plt = _pyplot()
    try:
        fig.savefig(out, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return None


def plot_joints(reader: LogReader, out: str | Path | BinaryIO) -> Path | None | bool:
    """Reference (dashed) and measured (solid) angle of every joint, horizontal and vertical, one panel each;
    False when the log has no joint references and feedback."""
    if not (reader.has("/references") and reader.has("/joint_feedback")):
        return False
    refs, fb = reader.channel("/references"), reader.channel("/joint_feedback")
    n = refs["angle_h_rad"].shape[1]
    plt = _pyplot()
    fig, axes = plt.subplots(n, 2, figsize=(12, 1.3 * n + 1), sharex=True, squeeze=False, constrained_layout=True)
    for j in range(n):
        for c, axis in enumerate(("h", "v")):
            ax = axes[j, c]
            ax.step(refs["t_s"], np.degrees(refs[f"angle_{axis}_rad"][:, j]), where="post", color="C1", ls="--", lw=1)
            ax.plot(fb["t_s"], np.degrees(fb[f"angle_{axis}_rad"][:, j]), "-", color="C0", lw=1)
            ax.set_ylabel(f"{j + 1}{axis} [deg]", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    axes[0, 0].set_title("horizontal joints: reference (dashed) and measured", fontsize=10)
    axes[0, 1].set_title("vertical joints: reference (dashed) and measured", fontsize=10)
    axes[-1, 0].set_xlabel("t [s]")
    axes[-1, 1].set_xlabel("t [s]")
    return _save_to(fig, out)


def plot_body_shapes(reader: LogReader, out: str | Path | BinaryIO, instants: int = 5) -> Path | None | bool:
    """The body (link centres from the measured joint angles) at a few instants, from above and from the side,
    placed at the tracked link's motion-capture pose where the log has one; False without joint feedback or a
    robot description in the log."""
    from aiko.robots.aiko.experiment import experiment_from_log
    from aiko.robots.aiko.shape import body_shape

    if not reader.has("/joint_feedback"):
        return False
    try:
        experiment = experiment_from_log(reader)
    except Exception:  # no experiment in the metadata: no robot to draw
        return False
    robot = experiment.robot
    fb = reader.channel("/joint_feedback")
    if fb["angle_h_rad"].shape[1] != robot.n_joints:
        return False
    mocap = reader.channel("/mocap") if reader.has("/mocap") else None
    tracked = 6 if robot.n_links >= 6 else 1
    if mocap is not None and "names" in mocap and mocap["names"].ndim == 2:
        name = str(mocap["names"][0, 0])
        tracked = int(name.removeprefix("link")) if name.startswith("link") and name[4:].isdigit() else tracked
    plt = _pyplot()
    fig, (ax_top, ax_side) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    picks = np.linspace(0, len(fb) - 1, instants).round().astype(int)
    cmap = plt.get_cmap("viridis")
    poses = None
    if mocap is not None and "position_m" in mocap and "quaternion_wxyz" in mocap:
        p = np.asarray(mocap["position_m"], dtype=float).reshape(len(mocap), -1, 3)[:, 0]
        q = np.asarray(mocap["quaternion_wxyz"], dtype=float).reshape(len(mocap), -1, 4)[:, 0]
        seen = np.isfinite(p).all(axis=1) & np.isfinite(q).all(axis=1)  # occluded samples skipped
        poses = (mocap.t_ns[seen], p[seen], q[seen]) if seen.any() else None
    for c, i in enumerate(picks):
        # without motion capture: link `tracked` at the origin, the body along x (link frames run along e_z)
        position, quaternion = np.zeros(3), np.array([np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0])
        if poses is not None:
            k = int(np.argmin(np.abs(poses[0] - fb.t_ns[i])))
            position, quaternion = poses[1][k], poses[2][k]
        try:
            shape = body_shape(robot, fb["angle_h_rad"][i], fb["angle_v_rad"][i], tracked, position, quaternion)
        except Exception:  # a NaN angle: skip that instant
            continue
        x = shape.positions_m
        label = f"t = {fb.t_s[i] - fb.t_s[0]:.1f} s"
        color = cmap(c / max(1, instants - 1))
        ax_top.plot(x[:, 0], x[:, 1], "o-", color=color, ms=4, label=label)
        ax_top.plot(x[0, 0], x[0, 1], "s", color=color, ms=7)
        ax_side.plot(x[:, 0], x[:, 2], "o-", color=color, ms=4, label=label)
    ax_top.set_aspect("equal", adjustable="datalim")
    where = f"placed at link {tracked}'s mocap pose" if poses is not None else f"link {tracked} at the origin"
    ax_top.set_title(f"body from above (square: link 1; {where})", fontsize=10)
    ax_top.set_xlabel("x [m]")
    ax_top.set_ylabel("y [m]")
    ax_side.set_title("body from the side", fontsize=10)
    ax_side.set_xlabel("x [m]")
    ax_side.set_ylabel("z [m]")
    for ax in (ax_top, ax_side):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save_to(fig, out)
