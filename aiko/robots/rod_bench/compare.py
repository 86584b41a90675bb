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
* **tip slide distance** (Fig. 23): |tip_xy(t) - tip_xy(0)| of the centreline's last node (``plant``); or, as a
  real bench measures it (``camera``), of the last red marker the camera tracks (``/bench/markers``: its metric
  position, from its first sighting). When one log's slide comes from the camera, the other log's plant slide is
  taken at the same material point (the centreline interpolated at that marker's arc length), so both measure
  one point of the rod.

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

OBSERVED_STRAIN = "/bench/observed_strain"
MARKERS = "/bench/markers"

GRAVITY_M_S2 = 9.81
CONTROL_POINT_FRACTION = 0.05


@dataclass
class BenchSeries:
    """One log's quantities (time bases may differ per channel)."""

    name: str
    t_slide_s: np.ndarray  # the tip slide's times (the rod's, or the camera's)
    tip_slide_m: np.ndarray  # (k,)
    t_strain_s: np.ndarray  # kappa_y's times (the rod's, or the camera's)
    kappa_y: np.ndarray  # (k, nodes)
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


FORCE_SOURCES = ("arm", "ft")
STRAIN_SOURCES = ("plant", "camera")
SLIDE_SOURCES = ("plant", "camera")


def _sensor_normal_force(reader: LogReader, experiment: Any, mass_kg: float) -> tuple[np.ndarray, np.ndarray]:
    """N(t) = m g + F_z, F the force the rod exerts on the F/T sensor (``/bench/wrench``, sensor = flange frame)
    turned into the world frame with the flange pose of the nearest ``/bench/observation`` sample."""
    from aiko.robots.rod_bench.ft_sensor import WRENCH, world_force
    from aiko.robots.rod_bench.mount import Mount

    if not reader.has(WRENCH):
        raise AikoError(f"{reader.path}: no {WRENCH} channel (the run had no [ft_sensor]); use the arm's force")
    ft = reader.channel(WRENCH)
    obs = reader.channel(OBSERVATION)
    t_obs = np.asarray(obs.t_ns, dtype=np.int64)
    poses = np.asarray(obs["flange_pose"], dtype=float)
    nearest = np.clip(np.searchsorted(t_obs, np.asarray(ft.t_ns, dtype=np.int64)), 0, len(t_obs) - 1)
    mount = Mount.from_settings(experiment.ur3)
    force = np.asarray(ft["force_mean_n"], dtype=float)  # the period's mean: not aliased (ft_sensor.FTSensorTask)
    fz = np.array([world_force(mount, poses[j], f)[2] for j, f in zip(nearest, force, strict=True)])
    return _run_times(reader, ft.t_ns), mass_kg * GRAVITY_M_S2 + fz


def load_series(
    path: str | Path,
    force_source: str = "arm",
    strain_source: str = "plant",
    slide_source: str = "plant",
    slide_arc_m: float | None = None,
) -> BenchSeries:
    """``force_source``: "arm" (the flange force the controller reports, ``/bench/observation``) or "ft" (the F/T
    sensor, ``/bench/wrench``); ``strain_source``: "plant" (the simulator's strains, ``/sim/rod/centreline``) or
    "camera" (the strain observer on the camera's markers, ``/bench/observed_strain``); ``slide_source``: "plant"
    (the centreline's tip, or its point at ``slide_arc_m``) or "camera" (the last tracked marker). A real run has
    no plant: it is read with the camera's strains and slide (and the F/T sensor's force)."""
    reader = read_log(path)
    meta = reader.run_metadata
    if "experiment_toml" not in meta:
        raise AikoError(f"{path}: not a bench log (no experiment in its metadata)")
    experiment = bench_experiment_from_text(meta["experiment_toml"], meta.get("experiment_path", str(path)))
    if force_source not in FORCE_SOURCES or strain_source not in STRAIN_SOURCES or slide_source not in SLIDE_SOURCES:
        raise AikoError(
            f"force source must be one of {FORCE_SOURCES}, strain and slide sources one of {STRAIN_SOURCES}"
        )
    strain_topic = CENTRELINE if strain_source == "plant" else OBSERVED_STRAIN
    slide_topic = CENTRELINE if slide_source == "plant" else MARKERS
    for topic in dict.fromkeys((OBSERVATION, strain_topic, slide_topic)):
        if not reader.has(topic):
            hint = " (a real run has its rod only from the camera: --strain camera --slide camera)"
            raise AikoError(f"{path}: no {topic} channel" + (hint if topic == CENTRELINE else ""))
    if slide_source == "plant":
        t_slide, slide = _plant_slide(reader, experiment, slide_arc_m)
    else:
        t_slide, slide = _camera_slide(reader, path)
    st = reader.channel(strain_topic)
    strain = np.asarray(st["strain"], dtype=float)
    obs = reader.channel(OBSERVATION)
    mass = experiment.scenario.model.rod.mass_kg()
    if force_source == "arm":
        t_obs, normal = _run_times(reader, obs.t_ns), mass * GRAVITY_M_S2 - np.asarray(obs["base_force_n"])[:, 2]
    else:
        t_obs, normal = _sensor_normal_force(reader, experiment, mass)
    series = BenchSeries(
        name=str(path),
        t_slide_s=t_slide,
        kappa_y=strain[:, :, 1],
        tip_slide_m=slide,
        t_obs_s=t_obs,
        normal_force_n=normal,
        t_strain_s=_run_times(reader, st.t_ns),
    )
    if reader.has(CONTACTS):
        c = reader.channel(CONTACTS)
        series.t_contacts_s = _run_times(reader, c.t_ns)
        series.contact_normal_force_n = np.asarray(c["force_n"], dtype=float)[:, :, 2].sum(axis=1)
    return series


def _plant_slide(reader: LogReader, experiment: Any, arc_m: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The centreline's horizontal displacement from t = 0 at its tip, or at arc length ``arc_m`` (interpolated
    between the strain nodes the centreline is logged at)."""
    cl = reader.channel(CENTRELINE)
    points = np.asarray(cl["centreline_m"], dtype=float)  # (k, nodes, 3)
    if arc_m is None:
        point = points[:, -1, :]
    else:
        x_nodes = np.asarray(experiment.scenario.model.grid.x_nodes, dtype=float)
        if points.shape[1] != len(x_nodes):
            raise AikoError(f"{reader.path}: the centreline has {points.shape[1]} points, the rod {len(x_nodes)} nodes")
        j = int(np.clip(np.searchsorted(x_nodes, arc_m) - 1, 0, len(x_nodes) - 2))
        w = (arc_m - x_nodes[j]) / (x_nodes[j + 1] - x_nodes[j])
        point = (1.0 - w) * points[:, j, :] + w * points[:, j + 1, :]
    return _run_times(reader, cl.t_ns), np.linalg.norm(point[:, 0:2] - point[0, 0:2], axis=1)


def _camera_slide(reader: LogReader, path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The last marker's horizontal displacement from its first sighting, at the frames that saw it."""
    times, xy = [], []
    for t_ns, payload in reader.messages(MARKERS):
        last = (payload.get("world_m") or [None])[-1]
        if last is not None and all(v is not None and np.isfinite(v) for v in last):
            times.append(t_ns)
            xy.append(last[:2])
    if len(xy) < 2:
        raise AikoError(f"{path}: the camera saw the last marker in {len(xy)} frames: no tip slide from the camera")
    xy_m = np.asarray(xy, dtype=float)
    return _run_times(reader, np.asarray(times, dtype=np.int64)), np.linalg.norm(xy_m - xy_m[0], axis=1)


def last_marker_arc_m(path: str | Path) -> float:
    """The arc length of the last red marker of a bench log's ``[camera]`` (where the camera's slide is measured)."""
    from aiko.robots.rod_bench.camera import marker_arcs

    meta = read_log(path).run_metadata
    experiment = bench_experiment_from_text(meta["experiment_toml"], meta.get("experiment_path", str(path)))
    if experiment.camera is None:
        raise AikoError(f"{path}: its experiment has no [camera]: no camera slide")
    return float(marker_arcs(experiment)[-1])


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


def compare_logs(
    path_a: str | Path,
    path_b: str | Path,
    *,
    force_a: str = "arm",
    force_b: str = "arm",
    strain_a: str = "plant",
    strain_b: str = "plant",
    slide_a: str = "plant",
    slide_b: str = "plant",
) -> Comparison:
    """Errors of A against B; each log's normal force, strains and tip slide from the source asked for
    (:func:`load_series`). A camera slide on one side makes the other side's plant slide the same marker's."""
    arc = None
    if "camera" in (slide_a, slide_b):
        arc = last_marker_arc_m(path_a if slide_a == "camera" else path_b)
    a = load_series(path_a, force_a, strain_a, slide_a, arc)
    b = load_series(path_b, force_b, strain_b, slide_b, arc)
    if a.kappa_y.shape[1] != b.kappa_y.shape[1]:
        raise AikoError(f"the logs have different strain grids ({a.kappa_y.shape[1]} vs {b.kappa_y.shape[1]} nodes)")
    peak = np.max(np.abs(b.kappa_y), axis=0)
    points = [int(i) for i in np.flatnonzero(peak >= CONTROL_POINT_FRACTION * peak.max())] if peak.max() > 0 else []
    strain_errors = {i: error_percent(a.t_strain_s, a.kappa_y[:, i], b.t_strain_s, b.kappa_y[:, i]) for i in points}
    summary: dict[str, Any] = {
        "log_a": str(path_a),
        "log_b": str(path_b),
        "error_definition": "100 * mean_t |a - b| / max_t |b| on B's samples (B the reference)",
        "sources": {"force": [force_a, force_b], "strain": [strain_a, strain_b], "slide": [slide_a, slide_b]},
        "slide_arc_m": arc,
        "control_points": points,
        "strain_error_percent": float(np.mean(list(strain_errors.values()))) if strain_errors else None,
        "strain_error_percent_by_point": {str(i): e for i, e in strain_errors.items()},
        "normal_force_error_percent": error_percent(a.t_obs_s, a.normal_force_n, b.t_obs_s, b.normal_force_n),
        "tip_slide_error_percent": error_percent(a.t_slide_s, a.tip_slide_m, b.t_slide_s, b.tip_slide_m),
        "tip_slide_end_m": [float(a.tip_slide_m[-1]), float(b.tip_slide_m[-1])],
        "normal_force_end_n": [float(a.normal_force_n[-1]), float(b.normal_force_n[-1])],
        "duration_s": [float(a.t_slide_s[-1]), float(b.t_slide_s[-1])],
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
        axes[0].plot(a.t_strain_s, a.kappa_y[:, i], color=color, label=f"node {i}")
        axes[0].plot(b.t_strain_s, b.kappa_y[:, i], color=color, linestyle="--")
    axes[0].set_ylabel("strain kappa_y (rad/m)")
    axes[0].legend(fontsize=7, ncol=4)
    axes[1].plot(a.t_obs_s, a.normal_force_n, label="A")
    axes[1].plot(b.t_obs_s, b.normal_force_n, linestyle="--", label="B")
    axes[1].set_ylabel("total normal force (N)")
    axes[1].legend()
    axes[2].plot(a.t_slide_s, 1e3 * a.tip_slide_m, label="A")
    axes[2].plot(b.t_slide_s, 1e3 * b.tip_slide_m, linestyle="--", label="B")
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
