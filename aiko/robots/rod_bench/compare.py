"""``aiko bench compare``: the quantities the paper's bench figures show, for two bench logs, and their errors.

Quantities (all on the run clock, seconds since the run started):

* **strain at the control points** (Figs. 19 / 22): the bending strain kappa_y (rad/m; the bench bends the rod in
  the world x-z plane, so curvature about y) at each strain node of ``/sim/rod/centreline``. Control points are the
  nodes whose reference curvature is not negligible (max |kappa_y| in log B at least 5 % of the largest node's); a
  node that barely bends has no meaningful relative error.
* **total normal force** (Fig. 20): what the flange force sensor gives, N(t) = m g - R_z(t), with R the force the
  base exerts on the rod (``/bench/observation`` ``base_force_n``) and m the rod's mass — quasi-static balance,
  i.e. the sensor tared with the rod's weight. When both logs carry ``/sim/rod/contacts`` the sum of the nodal
  contact forces' z components is reported beside it.
* **tip slide distance** (Fig. 23): |tip_xy(t) - tip_xy(0)| of the centreline's last node.

Error ("average error percentage"): the paper does not define it, so here it is, explicitly:
``100 * mean_t |a(t) - b(t)| / max_t |b(t)|`` over log B's sample times inside both logs' time span, A linearly
interpolated to them — B is the reference (the experiment, or the replay of a HIL run). For the strain it is
averaged over the control points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.log.reader import LogReader, read_log
from aiko.robots.rod_bench.bench_experiment import bench_experiment_from_text
from aiko.robots.rod_bench.bench_run import BENCH_METADATA_NAME, OBSERVATION
from aiko.robots.rod_bench.rod_samples import CENTRELINE, CONTACTS

GRAVITY_M_S2 = 9.81
CONTROL_POINT_FRACTION = 0.05


@dataclass
class BenchSeries:
    """One log's quantities (time bases may differ per channel)."""

    name: str
    t_rod_s: np.ndarray
    kappa_y: np.ndarray  # (k, nodes)
    tip_slide_m: np.ndarray  # (k,)
    t_obs_s: np.ndarray
    normal_force_n: np.ndarray  # from the base force
    t_contacts_s: np.ndarray | None = None
    contact_normal_force_n: np.ndarray | None = None


@dataclass
class Comparison:
    a: BenchSeries
    b: BenchSeries
    control_points: list[int]
    summary: dict[str, Any] = field(default_factory=dict)


def _run_times(reader: LogReader, t_ns: np.ndarray) -> np.ndarray:
    start = reader.metadata.get(BENCH_METADATA_NAME, {}).get("clock_start_ns")
    if start is None:
        raise AikoError(f"{reader.path}: not a bench log (no {BENCH_METADATA_NAME} metadata)")
    return (np.asarray(t_ns, dtype=np.int64) - int(start)) * 1e-9


def load_series(path: str | Path) -> BenchSeries:
    reader = read_log(path)
    meta = reader.run_metadata
    if "experiment_toml" not in meta:
        raise AikoError(f"{path}: not a bench log (no experiment in its metadata)")
    experiment = bench_experiment_from_text(meta["experiment_toml"], meta.get("experiment_path", str(path)))
    for topic in (CENTRELINE, OBSERVATION):
        if not reader.has(topic):
            raise AikoError(f"{path}: no {topic} channel (a real run needs the camera's strains, not built yet)")
    cl = reader.channel(CENTRELINE)
    strain = np.asarray(cl["strain"], dtype=float)
    tip = np.asarray(cl["centreline_m"], dtype=float)[:, -1, :]
    obs = reader.channel(OBSERVATION)
    mass = experiment.scenario.model.rod.mass_kg()
    normal = mass * GRAVITY_M_S2 - np.asarray(obs["base_force_n"], dtype=float)[:, 2]
    series = BenchSeries(
        name=str(path),
        t_rod_s=_run_times(reader, cl.t_ns),
        kappa_y=strain[:, :, 1],
        tip_slide_m=np.linalg.norm(tip[:, 0:2] - tip[0, 0:2], axis=1),
        t_obs_s=_run_times(reader, obs.t_ns),
        normal_force_n=normal,
    )
    if reader.has(CONTACTS):
        c = reader.channel(CONTACTS)
        series.t_contacts_s = _run_times(reader, c.t_ns)
        series.contact_normal_force_n = np.asarray(c["force_n"], dtype=float)[:, :, 2].sum(axis=1)
    return series


def error_percent(t_a: np.ndarray, a: np.ndarray, t_b: np.ndarray, b: np.ndarray) -> float:
    """``100 * mean |a - b| / max |b|`` over B's times inside both spans (A interpolated); NaN if B is all zero."""
    lo, hi = max(t_a[0], t_b[0]), min(t_a[-1], t_b[-1])
    keep = (t_b >= lo - 1e-9) & (t_b <= hi + 1e-9)
    if not np.any(keep):
        raise AikoError("the two logs do not overlap in time")
    tb, bb = t_b[keep], b[keep]
    aa = np.interp(tb, t_a, a)
    scale = float(np.max(np.abs(bb)))
    if scale == 0.0:
        return float("nan")
    return float(100.0 * np.mean(np.abs(aa - bb)) / scale)


def compare_logs(path_a: str | Path, path_b: str | Path) -> Comparison:
    a, b = load_series(path_a), load_series(path_b)
    if a.kappa_y.shape[1] != b.kappa_y.shape[1]:
        raise AikoError(f"the logs have different strain grids ({a.kappa_y.shape[1]} vs {b.kappa_y.shape[1]} nodes)")
    peak = np.max(np.abs(b.kappa_y), axis=0)
    points = [int(i) for i in np.flatnonzero(peak >= CONTROL_POINT_FRACTION * peak.max())] if peak.max() > 0 else []
    strain_errors = {i: error_percent(a.t_rod_s, a.kappa_y[:, i], b.t_rod_s, b.kappa_y[:, i]) for i in points}
    summary: dict[str, Any] = {
        "log_a": str(path_a),
        "log_b": str(path_b),
        "error_definition": "100 * mean_t |a - b| / max_t |b| on B's samples (B the reference)",
        "control_points": points,
        "strain_error_percent": float(np.mean(list(strain_errors.values()))) if strain_errors else None,
        "strain_error_percent_by_point": {str(i): e for i, e in strain_errors.items()},
        "normal_force_error_percent": error_percent(a.t_obs_s, a.normal_force_n, b.t_obs_s, b.normal_force_n),
        "tip_slide_error_percent": error_percent(a.t_rod_s, a.tip_slide_m, b.t_rod_s, b.tip_slide_m),
        "tip_slide_end_m": [float(a.tip_slide_m[-1]), float(b.tip_slide_m[-1])],
        "normal_force_end_n": [float(a.normal_force_n[-1]), float(b.normal_force_n[-1])],
        "duration_s": [float(a.t_rod_s[-1]), float(b.t_rod_s[-1])],
    }
    if a.contact_normal_force_n is not None and b.contact_normal_force_n is not None:
        assert a.t_contacts_s is not None and b.t_contacts_s is not None
        summary["contact_normal_force_error_percent"] = error_percent(
            a.t_contacts_s, a.contact_normal_force_n, b.t_contacts_s, b.contact_normal_force_n
        )
    return Comparison(a, b, points, summary)


def plot_comparison(result: Comparison, out: str | Path) -> None:
    """Three panels: strain at the control points, total normal force, tip slide distance (A solid, B dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = result.a, result.b
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for j, i in enumerate(result.control_points):
        color = f"C{j % 10}"
        axes[0].plot(a.t_rod_s, a.kappa_y[:, i], color=color, label=f"node {i}")
        axes[0].plot(b.t_rod_s, b.kappa_y[:, i], color=color, linestyle="--")
    axes[0].set_ylabel("strain kappa_y (rad/m)")
    axes[0].legend(fontsize=7, ncol=4)
    axes[1].plot(a.t_obs_s, a.normal_force_n, label="A")
    axes[1].plot(b.t_obs_s, b.normal_force_n, linestyle="--", label="B")
    axes[1].set_ylabel("total normal force (N)")
    axes[1].legend()
    axes[2].plot(a.t_rod_s, 1e3 * a.tip_slide_m, label="A")
    axes[2].plot(b.t_rod_s, 1e3 * b.tip_slide_m, linestyle="--", label="B")
    axes[2].set_ylabel("tip slide (mm)")
    axes[2].set_xlabel("time (s)")
    s = result.summary
    fig.suptitle(
        f"A {Path(s['log_a']).name} vs B {Path(s['log_b']).name}: strain {s['strain_error_percent']:.2f} %, "
        f"normal force {s['normal_force_error_percent']:.2f} %, slide {s['tip_slide_error_percent']:.2f} %",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
