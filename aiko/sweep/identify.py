"""``aiko identify``: fit model settings so the simulator, replayed with a log's references, reproduces the logged
motion: scipy's ``least_squares`` (trust-region reflective, within bounds) with its Jacobian's columns, one replay
each, evaluated in parallel on the sweep's Dask cluster.

The residual of a candidate is the replay (``aiko.analysis.replay``: the logged references at the logged instants,
from the logged start posture) against the log: the tracked point's planar position at the log's capture times
(per ``position_scale_m``, 1 cm by default) and, unless left out, every joint angle at the log's feedback times
(per ``angle_scale_deg``, 1° by default), so one centimetre of the tracked point weighs as much as one degree of
one joint at one instant. Samples the log lacks (occluded capture) are left out; samples the replay lacks count
zero, so every residual vector has the same length.

The Jacobian is by forward differences, a step of ``step`` (5 %) of each parameter's range (backwards at the upper
bound): one replay per parameter, all at once on the cluster. The uncertainty is the usual linearisation at the
optimum: covariance = s² (JᵀJ)⁻¹ with s² = ‖r‖² / (m − n), the residual's variance per sample, so it holds for
residuals that are independent noise and understates it for a model error that is correlated in time.

With ``starts`` > 1 (``--starts``), several such fits run at once from a seeded Latin hypercube of starts inside the
bounds (``start_points``), their replays interleaved on the cluster; the lowest final cost wins. Contact makes the
residual rough at small scales, so one fit stops in the first dip it meets; spread starts find the deeper ones.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from aiko.core.errors import AikoError, ConfigError


@dataclass(frozen=True)
class IdentifyParameter:
    key: str
    low: float
    high: float
    start: float


def residual_dict(task: dict[str, Any]) -> dict[str, Any]:
    """On a worker: replay ``task["log"]`` with ``task["overrides"]`` and return its residual against the log
    (``{"residual": [...], "position_rms_m": ..., "joint_rms_deg": ...}``), or ``{"error": ...}``."""
    from aiko.analysis.replay import replay
    from aiko.log import LogReader

    try:
        with tempfile.TemporaryDirectory(prefix="aiko-identify-") as tmp:
            out = os.path.join(tmp, "replay.mcap")
            replay(task["log"], out, task["overrides"], backend_name=task.get("backend"))
            parts = residual_parts(LogReader(task["log"]), LogReader(out), task.get("joints", True))
    except Exception as exc:  # noqa: BLE001 - the client says which candidate failed and why
        return {"error": f"{type(exc).__name__}: {exc}".strip()[:2000]}
    position, joints = parts
    scale_m, scale_rad = task.get("position_scale_m", 0.01), math.radians(task.get("angle_scale_deg", 1.0))
    residual = np.concatenate([position.ravel() / scale_m, joints.ravel() / scale_rad])
    return {
        "residual": np.nan_to_num(residual, nan=0.0).tolist(),
        "position_rms_m": _rms(position),
        "joint_rms_deg": math.degrees(_rms(joints)) if joints.size else None,
    }


def _rms(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.sqrt(np.mean(finite**2))) if finite.size else math.nan


def residual_parts(log: Any, replayed: Any, joints: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(replayed − logged planar tracked point at the log's valid capture times (k, 2) m, empty for a log without
    motion capture; replayed − logged joint angles at the log's feedback times (k, 2 n) rad, empty without
    ``joints``); NaN where the replay has no sample."""
    from aiko.analysis.compare import CompareError, sample_track, tracked_point

    try:
        logged = tracked_point(log)
    except CompareError:  # no motion capture (e.g. HIL on the inertia plant): the joints alone
        position = np.zeros((0, 2))
    else:
        use = logged.valid & (logged.t_s >= 0)
        position = sample_track(tracked_point(replayed), logged.t_s[use])[:, :2] - logged.position_m[use, :2]
    if not joints or not (log.has("/joint_feedback") and replayed.has("/joint_feedback")):
        return position, np.zeros((0, 0))
    fa, fb = log.channel("/joint_feedback"), replayed.channel("/joint_feedback")
    columns = []
    for axis in ("h", "v"):
        qa, qb = fa[f"angle_{axis}_rad"], fb[f"angle_{axis}_rad"]
        for j in range(qa.shape[1]):
            inside = (fa["t_s"] >= fb["t_s"][0]) & (fa["t_s"] <= fb["t_s"][-1])
            column = np.full(len(fa["t_s"]), np.nan)
            column[inside] = np.interp(fa["t_s"][inside], fb["t_s"], qb[:, j]) - qa[inside, j]
            columns.append(column)
    return position, np.column_stack(columns)


def logged_value(key: str, experiment: Any) -> float | None:
    """The value ``key`` had in the logged run: a ``[sim]`` model setting, a serpenoid gait key, or a table value."""
    from aiko.sweep.optimize_spec import _current_value

    section, _, name = key.partition(".")
    if section == "sim":
        try:
            model_settings = experiment.settings("sim").model_settings
        except Exception:  # noqa: BLE001 - no simulator section: look in the raw table below
            model_settings = None
        for obj in (getattr(model_settings, "model", None), model_settings):
            value = getattr(obj, name, None) if obj is not None else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return _current_value(key, experiment, experiment.tables)


def parse_bounds(text: str | None, keys: list[str]) -> dict[str, tuple[float, float]]:
    """``KEY=LOW:HIGH,KEY=LOW:HIGH`` -> {key: (low, high)}; every key of ``keys`` needs its bounds."""
    bounds: dict[str, tuple[float, float]] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, span = item.partition("=")
        low_text, _, high_text = span.partition(":")
        try:
            low, high = float(low_text), float(high_text)
        except ValueError:
            raise ConfigError(f"--bounds {item!r}: expected KEY=LOW:HIGH, e.g. sim.mu_rolling=0.0:0.3") from None
        if not (math.isfinite(low) and math.isfinite(high) and high > low):
            raise ConfigError(f"--bounds {item!r}: HIGH must be above LOW, both finite")
        if key.strip() not in keys:
            raise ConfigError(f"--bounds {item!r}: {key.strip()} is not one of --params ({', '.join(keys)})")
        bounds[key.strip()] = (low, high)
    missing = [k for k in keys if k not in bounds]
    if missing:
        raise ConfigError(f"--bounds: give the bounds of {', '.join(missing)} (KEY=LOW:HIGH)")
    return bounds


def parse_values(text: str | None, keys: list[str], what: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        if key.strip() not in keys:
            raise ConfigError(f"{what} {item!r}: {key.strip()} is not one of --params ({', '.join(keys)})")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"{what} {item!r}: expected KEY=VALUE with a number") from None
    return values


class _Evaluator:
    """Residuals of candidates, each a replay on a Dask worker; a batch of candidates runs at once. Shared by the
    starts of a multi-start fit, each in its own client thread: the cache is locked, the Dask client is
    thread-safe, so their replays interleave on the cluster."""

    def __init__(self, client: Any, task: dict[str, Any], keys: list[str], stream: IO[str] | None) -> None:
        self.client = client
        self.task = task
        self.keys = keys
        self.stream = stream
        self.cache: dict[tuple[float, ...], dict[str, Any]] = {}
        self.replays = 0
        self.lock = threading.Lock()

    def many(self, xs: list[np.ndarray]) -> list[dict[str, Any]]:
        from aiko.sweep.execute import _by_name

        with self.lock:
            todo = [tuple(float(v) for v in x) for x in xs]
            todo = list(dict.fromkeys(t for t in todo if t not in self.cache))
        futures = [
            self.client.submit(
                *_by_name(
                    "aiko.sweep.identify:residual_dict",
                    {**self.task, "overrides": {**self.task["overrides"], **dict(zip(self.keys, t, strict=True))}},
                ),
                pure=False,
            )
            for t in todo
        ]
        for t, result in zip(todo, self.client.gather(futures), strict=True):
            if "error" in result:
                point = ", ".join(f"{k}={v:.6g}" for k, v in zip(self.keys, t, strict=True))
                raise AikoError(f"identify: the replay at {point} failed: {result['error']}")
            with self.lock:
                self.cache[t] = result
                self.replays += 1
        with self.lock:
            return [self.cache[tuple(float(v) for v in x)] for x in xs]

    def one(self, x: np.ndarray) -> dict[str, Any]:
        return self.many([x])[0]


def start_points(x0: np.ndarray, low: np.ndarray, high: np.ndarray, starts: int, seed: int) -> np.ndarray:
    """(starts, n) starting points: ``x0`` first, then ``starts - 1`` points of a Latin hypercube inside the bounds
    (scipy's, seeded: the same seed gives the same starts), so every parameter's range is cut into ``starts - 1``
    strata and each stratum holds one start. Why: the residual of a replay with contact is rough, and a single
    least-squares run stops in the first dip it meets; starts spread over the box find the deepest one."""
    from scipy.stats import qmc

    if starts < 1:
        raise ConfigError(f"--starts must be at least 1, got {starts}")
    x0 = np.clip(np.asarray(x0, dtype=float), low, high)
    if starts == 1:
        return x0[None, :]
    unit = qmc.LatinHypercube(d=len(x0), seed=seed).random(starts - 1)
    return np.vstack([x0, qmc.scale(unit, low, high)])


def identify(
    log_path: str | Path,
    parameters: list[IdentifyParameter],
    options: Any,
    *,
    joints: bool = True,
    step: float = 0.05,
    max_evaluations: int = 30,
    starts: int = 1,
    seed: int = 0,
    backend: str | None = None,
    progress_stream: IO[str] | None = sys.stderr,
) -> dict[str, Any]:
    """Fit ``parameters`` to the log; returns the summary (estimate, uncertainty, residuals before and after).

    With ``starts`` > 1, that many least-squares fits (``start_points``), each of at most ``max_evaluations``
    evaluations, run at once, their replays sharing the cluster; the fit of the lowest final cost is the estimate,
    and every start's outcome is in ``summary["starts"]``."""
    from scipy.optimize import least_squares

    from aiko.sweep.connect import close_cluster, connect

    if not 0 < step <= 0.5:
        raise ConfigError(f"--step must be in (0, 0.5] (a fraction of each parameter's range), got {step}")
    log = str(Path(log_path).resolve())
    keys = [p.key for p in parameters]
    low = np.array([p.low for p in parameters])
    high = np.array([p.high for p in parameters])
    span = high - low
    points = start_points(np.array([p.start for p in parameters]), low, high, starts, seed)
    task = {"log": log, "overrides": {}, "joints": joints, "backend": backend}
    started = time.monotonic()
    client, cluster = connect(options, log)
    try:
        evaluator = _Evaluator(client, task, keys, progress_stream)
        jac = _jacobian(evaluator, low, high, span * step)

        def fit_from(index: int) -> Any:
            fun = _progress_function(evaluator, keys, index, len(points), started, progress_stream)
            return least_squares(
                fun,
                points[index],
                jac=jac,
                bounds=(low, high),
                x_scale=span,
                xtol=1e-4,
                ftol=1e-6,
                max_nfev=max_evaluations,
            )

        before = evaluator.one(points[0])
        if len(points) == 1:
            fits = [fit_from(0)]
        else:
            evaluator.many(list(points))  # every start's first residual in one batch
            with ThreadPoolExecutor(max_workers=len(points), thread_name_prefix="aiko-identify-start") as pool:
                fits = list(pool.map(fit_from, range(len(points))))
        best = int(np.argmin([fit.cost for fit in fits]))
        fit = fits[best]
        after = evaluator.one(fit.x)
        replays = evaluator.replays
    finally:
        close_cluster(client, cluster)
    m, n = len(fit.fun), len(keys)
    s2 = float(np.sum(fit.fun**2)) / max(m - n, 1)
    covariance = s2 * np.linalg.pinv(fit.jac.T @ fit.jac)
    std = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    x0 = points[0]  # the given start, where residual_before is; the winning one is starts[best_start]
    return {
        "log": log,
        "parameters": {
            k: {"value": float(v), "std": float(s), "start": float(s0), "low": float(lo), "high": float(hi)}
            for k, v, s, s0, lo, hi in zip(keys, fit.x, std, x0, low, high, strict=True)
        },
        "correlation": _correlation(covariance).tolist(),
        "residual_before": _residual_summary(before),
        "residual_after": _residual_summary(after),
        "at_bound": [k for k, v, lo, hi in zip(keys, fit.x, low, high, strict=True) if v <= lo or v >= hi],
        "evaluations": int(sum(f.nfev for f in fits)),
        "jacobians": int(sum(f.njev or 0 for f in fits)),
        "replays": replays,
        "status": int(fit.status),
        "message": str(fit.message),
        "samples": m,
        "step": step,
        "seed": seed,
        "best_start": best,
        "starts": [_start_summary(keys, p, f) for p, f in zip(points, fits, strict=True)],
        "wall_time_s": time.monotonic() - started,
    }


def _start_summary(keys: list[str], start: np.ndarray, fit: Any) -> dict[str, Any]:
    """One start's outcome: where it began, where it ended, its final cost and how long it took."""
    return {
        "start": dict(zip(keys, map(float, start), strict=True)),
        "value": dict(zip(keys, map(float, fit.x), strict=True)),
        "cost": float(fit.cost),
        "evaluations": int(fit.nfev),
        "status": int(fit.status),
    }


def _progress_function(
    evaluator: _Evaluator,
    keys: list[str],
    index: int,
    count: int,
    started: float,
    stream: IO[str] | None,
) -> Callable[[np.ndarray], np.ndarray]:
    """The residual function of one start, which writes a progress line per evaluation."""
    iteration = [0]
    label = f"start {index + 1}/{count}, " if count > 1 else ""

    def fun(x: np.ndarray) -> np.ndarray:
        result = evaluator.one(x)
        iteration[0] += 1
        if stream is not None:
            point = ", ".join(f"{k}={v:.6g}" for k, v in zip(keys, x, strict=True))
            cost = 0.5 * float(np.sum(np.square(result["residual"])))
            joint = result["joint_rms_deg"]
            position = result["position_rms_m"]
            parts = [f"tracked point RMS {1000 * position:.2f} mm"] if math.isfinite(position) else []
            parts += [f"joint RMS {joint:.4f} deg"] if joint is not None else []
            stream.write(
                f"identify: {label}evaluation {iteration[0]}: {point}: cost {cost:.6g}, {', '.join(parts)} "
                f"({time.monotonic() - started:.0f} s)\n"
            )
            stream.flush()
        return np.asarray(result["residual"])

    return fun


def _jacobian(
    evaluator: _Evaluator, low: np.ndarray, high: np.ndarray, h: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    def jac(x: np.ndarray) -> np.ndarray:
        base = np.asarray(evaluator.one(x)["residual"])
        steps = np.where(x + h <= high, h, -h)  # backwards at the upper bound
        points = []
        for i, hi in enumerate(steps):
            point = x.copy()
            point[i] = min(max(point[i] + hi, low[i]), high[i])
            points.append(point)
        columns = [
            (np.asarray(r["residual"]) - base) / (p[i] - x[i])
            for i, (p, r) in enumerate(zip(points, evaluator.many(points), strict=True))
        ]
        return np.column_stack(columns)

    return jac


def _correlation(covariance: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.clip(np.diag(covariance), 1e-300, None))
    return covariance / np.outer(d, d)


def _residual_summary(result: dict[str, Any]) -> dict[str, Any]:
    r = np.asarray(result["residual"])
    position = result["position_rms_m"]
    return {
        "cost": 0.5 * float(np.sum(r**2)),
        "position_rms_mm": 1000 * position if math.isfinite(position) else None,  # None: no motion capture
        "joint_rms_deg": result["joint_rms_deg"],
    }


def write_overlay(summary: dict[str, Any], path: Path) -> Path:
    """The identified settings as an experiment overlay: only those keys, in their tables (TOML), each with its
    uncertainty; ``aiko run``/``aiko replay`` take them as ``--set KEY=VALUE``."""
    import tomlkit

    from aiko.sweep.optimize import _set

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"identified by aiko identify from {summary['log']}"))
    before, after = summary["residual_before"], summary["residual_after"]
    if before["position_rms_mm"] is not None:
        doc.add(
            tomlkit.comment(f"tracked point RMS {before['position_rms_mm']:.2f} -> {after['position_rms_mm']:.2f} mm")
        )
    if before["joint_rms_deg"] is not None:
        doc.add(tomlkit.comment(f"joint angle RMS {before['joint_rms_deg']:.4f} -> {after['joint_rms_deg']:.4f} deg"))
    doc.add(
        tomlkit.comment(
            "as flags: " + " ".join(f"--set {k}={p['value']:.6g}" for k, p in summary["parameters"].items())
        )
    )
    for key, p in summary["parameters"].items():
        _set(doc, key.split("."), float(f"{p['value']:.6g}"))
        parts = key.split(".")
        node = doc
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]].comment(f"± {p['std']:.2g} (1 sigma), from {p['start']:.6g}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(doc))
    return path
