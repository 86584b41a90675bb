"""The sweep file: which experiment, which settings vary and how, which metrics to record.

```toml
experiment = "../sidewinding.toml"       # relative to this file
backend = "sim"                          # default: the experiment's
metrics = ["distance_m", "speed_m_s"]    # names from aiko.sweep.metrics (default: these two)
seed = 0                                 # base of the per-run seeds (default 0)
keep_logs = false                        # true: every run also writes its MCAP log under OUT/logs/
out = "sweep-out"                        # default output directory (relative to this file); --out wins
[set]                                    # fixed overrides for every run: any key `aiko run --set` accepts
"run.duration_s" = 5.0
[parameters]                             # swept settings: a list, or a range
"gait.amplitude_h_deg" = [20.0, 30.0, 40.0]
"gait.phase_step_h_deg" = { low = -70.0, high = -30.0, count = 5 }   # count: grid only
"sim.mu_rolling" = { low = 0.01, high = 0.1, count = 3, scale = "log" }
"sim.max_iterations" = { low = 200, high = 2000, count = 4, integer = true }
[sampling]                               # kind = "grid" (default) | "random" | "lhs"; count and seed for the last two
kind = "grid"
[limits]                                 # optional
run_timeout_s = 120.0                    # a run still going after this (wall) time is a row with status "timeout"
```

A grid is the product of every parameter's values, the first parameter varying slowest. ``random`` draws ``count``
points uniformly (a list parameter: one of its values); ``lhs`` is a Latin hypercube of ``count`` points (each
parameter's range cut in ``count`` equal strata, one point in each). Both are reproducible from ``sampling.seed``.

Every run has a stable id (a hash of the experiment, backend, fixed settings and its parameter values, so the same
point of a changed grid keeps its id and ``--resume`` recognises it) and its own seed (from ``seed`` and the id).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.config import Table, read_toml
from aiko.core.errors import ConfigError

SAMPLING_KINDS = ("grid", "random", "lhs")
DEFAULT_METRICS = ("distance_m", "speed_m_s")
MAX_RUNS = 1_000_000


@dataclass(frozen=True)
class Parameter:
    """One swept setting: explicit ``values``, or a range ``low``..``high`` (``count`` points on a grid)."""

    key: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    count: int | None = None
    scale: str = "linear"
    integer: bool = False

    def grid(self) -> list[Any]:
        if self.values is not None:
            return list(self.values)
        assert self.count is not None and self.low is not None and self.high is not None
        u = np.linspace(0.0, 1.0, self.count) if self.count > 1 else np.zeros(1)
        return self._at(u)

    def sample(self, u: np.ndarray) -> list[Any]:
        """Values at unit coordinates ``u`` in [0, 1)."""
        if self.values is not None:
            index = np.minimum((u * len(self.values)).astype(int), len(self.values) - 1)
            return [self.values[i] for i in index]
        return self._at(u)

    def _at(self, u: np.ndarray) -> list[Any]:
        lo, hi = float(self.low), float(self.high)  # type: ignore[arg-type]
        x = np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))) if self.scale == "log" else lo + u * (hi - lo)
        # the ends exactly as written: exp(log(0.01)) is 0.010000000000000004
        x = np.where(u == 0.0, lo, np.where(u == 1.0, hi, x))
        return [int(round(v)) for v in x] if self.integer else [float(v) for v in x]


@dataclass(frozen=True)
class RunPoint:
    """One run of a sweep: its stable id, its place in the expansion, its parameter values and its seed."""

    run_id: str
    index: int
    params: dict[str, Any]
    seed: int
    columns: dict[str, Any] = field(default_factory=dict)  # more result columns, not settings (e.g. generation)


@dataclass(frozen=True)
class SweepSpec:
    path: Path
    name: str
    experiment_path: Path
    backend: str | None
    metrics: tuple[str, ...]
    fixed: dict[str, Any]
    parameters: tuple[Parameter, ...]
    sampling: str
    count: int | None
    sampling_seed: int
    seed: int
    keep_logs: bool
    out: Path | None
    run_timeout_s: float | None = None

    @property
    def parameter_keys(self) -> list[str]:
        return [p.key for p in self.parameters]


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a sweep file (its runs are checked against the experiment by :func:`validate_runs`)."""
    path = Path(path)
    data, _ = read_toml(path, "sweep file")
    return spec_from_dict(data, path)


def spec_from_dict(data: Mapping[str, Any], path: Path) -> SweepSpec:
    from aiko.sweep.metrics import check_metric_names

    source = str(path)
    top = Table(data, "", source)
    experiment = top.string("experiment")
    experiment_path = Path(experiment) if Path(experiment).is_absolute() else path.parent / experiment
    backend = top.string("backend", None)
    metrics_raw = top.raw("metrics", list(DEFAULT_METRICS))
    if not isinstance(metrics_raw, list) or not metrics_raw or not all(isinstance(m, str) for m in metrics_raw):
        raise ConfigError(f"{source}: metrics: expected a non-empty list of metric names, got {metrics_raw!r}")
    check_metric_names(metrics_raw, f"{source}: metrics")
    seed = top.integer("seed", 0, min=0, max=2**63 - 1)
    keep_logs = top.boolean("keep_logs", False)
    out_raw = top.string("out", None)
    top.string("name", None)
    fixed = _flat_overrides(top.table("set", {}), source)
    parameters = _parameters(top.table("parameters"), source)
    sampling_table = top.table("sampling", {})
    kind = sampling_table.string("kind", "grid", choices=SAMPLING_KINDS)
    count = sampling_table.integer("count", None, min=1, max=MAX_RUNS)
    sampling_seed = sampling_table.integer("seed", 0, min=0, max=2**63 - 1)
    sampling_table.finish()
    limits = top.table("limits", {})
    run_timeout_s = limits.number("run_timeout_s", None, min=0.0, min_exclusive=True)
    limits.finish()
    top.finish()

    for p in parameters:
        if p.key in fixed:
            raise ConfigError(f"{source}: parameters.{p.key}: also set in [set]; a setting is fixed or swept, not both")
        if kind == "grid" and p.values is None and p.count is None:
            raise ConfigError(f"{source}: parameters.{p.key}: a range on a grid needs a count (low, high, count)")
        if kind != "grid" and p.count is not None:
            raise ConfigError(
                f"{source}: parameters.{p.key}: count belongs to grid ranges; {kind} sampling takes sampling.count"
            )
    if kind == "grid" and count is not None:
        raise ConfigError(f"{source}: sampling.count: a grid's size is the product of its parameters' counts")
    if kind != "grid" and count is None:
        raise ConfigError(f"{source}: sampling.count: required for {kind} sampling")
    if kind == "grid" and math.prod(len(p.grid()) for p in parameters) > MAX_RUNS:
        raise ConfigError(f"{source}: parameters: the grid has more than {MAX_RUNS} points")
    return SweepSpec(
        path=path,
        name=str(data.get("name") or path.stem),
        experiment_path=experiment_path,
        backend=backend,
        metrics=tuple(dict.fromkeys(metrics_raw)),
        fixed=fixed,
        parameters=tuple(parameters),
        sampling=kind,
        count=count,
        sampling_seed=sampling_seed,
        seed=seed,
        keep_logs=keep_logs,
        out=(path.parent / out_raw) if out_raw else None,
        run_timeout_s=float(run_timeout_s) if run_timeout_s is not None else None,
    )


def _flat_overrides(table: Table, source: str) -> dict[str, Any]:
    """``[set]`` takes dotted keys (``"run.duration_s" = 5.0``) or nested tables (``[set.run] duration_s = 5.0``)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out[prefix] = value

    for key in table.keys():
        walk(key, table.raw(key))
    return out


def _parameters(table: Table, source: str) -> list[Parameter]:
    params = []
    for key in table.keys():
        raw = table.raw(key)
        where = f"{source}: parameters.{key}"
        if isinstance(raw, list):
            if not raw:
                raise ConfigError(f"{where}: an empty list of values")
            params.append(Parameter(key, values=tuple(raw)))
            continue
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a list of values or a range {{ low, high, count }}, got {raw!r}")
        r = Table(raw, f"parameters.{key}", source)
        scale = r.string("scale", "linear", choices=("linear", "log"))
        low = r.number("low", min=0.0 if scale == "log" else None, min_exclusive=scale == "log")
        high = r.number("high", min=0.0 if scale == "log" else None, min_exclusive=scale == "log")
        count = r.integer("count", None, min=1, max=MAX_RUNS)
        integer = r.boolean("integer", False)
        r.finish()
        if high < low:
            raise ConfigError(f"{where}: high ({high!r}) is below low ({low!r})")
        params.append(Parameter(key, low=float(low), high=float(high), count=count, scale=scale, integer=integer))
    if not params:
        raise ConfigError(f"{source}: parameters: no swept setting; give at least one (a list or a range)")
    return params


def expand(spec: SweepSpec) -> list[RunPoint]:
    """The sweep's runs in order; points equal in every parameter are one run (they would have the same id)."""
    keys = spec.parameter_keys
    if spec.sampling == "grid":
        rows = [
            dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(p.grid() for p in spec.parameters))
        ]
    else:
        assert spec.count is not None
        rng = np.random.default_rng(spec.sampling_seed)
        n, d = spec.count, len(spec.parameters)
        if spec.sampling == "random":
            u = rng.random((n, d))
        else:  # Latin hypercube: a random permutation of the strata per dimension, a uniform point in each stratum
            u = np.column_stack([(rng.permutation(n) + rng.random(n)) / n for _ in range(d)])
        columns = [p.sample(u[:, j]) for j, p in enumerate(spec.parameters)]
        rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
    runs: dict[str, RunPoint] = {}
    for row in rows:
        run_id = _run_id(spec, row)
        if run_id not in runs:
            runs[run_id] = RunPoint(run_id, len(runs), row, _run_seed(spec.seed, run_id))
    return list(runs.values())


def _run_id(spec: SweepSpec, params: Mapping[str, Any]) -> str:
    identity = {
        "experiment": str(spec.experiment_path.resolve()),
        "backend": spec.backend,
        "set": spec.fixed,
        "params": params,
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run_seed(base: int, run_id: str) -> int:
    """A 32-bit seed per run (numpy's legacy seeding takes < 2**32), independent of the run's place in the sweep."""
    return int.from_bytes(hashlib.sha256(f"{base}:{run_id}".encode()).digest()[:4], "little")


def run_overrides(spec: SweepSpec, run: RunPoint) -> dict[str, Any]:
    return {**spec.fixed, **run.params}


def validate_runs(spec: SweepSpec, runs: list[RunPoint]) -> str:
    """Load the experiment with every run's overrides (strict, as ``aiko run --set``); the first bad one is a
    one-line error naming the run. Returns the backend the runs use."""
    backend, invalid = screen_runs(spec, runs)
    if invalid:
        raise ConfigError(next(iter(invalid.values())))
    return backend


def screen_runs(spec: SweepSpec, runs: list[RunPoint]) -> tuple[str, dict[str, str]]:
    """Check every run's settings as ``aiko run --set`` would; returns the backend and the refused runs
    (run id -> one-line error naming the run, in run order).

    Why not stop at the first refused run: a range or a sample that crosses a limit (an amplitude beyond the joint
    limit for some phase offsets) is a normal sweep, and its valid points are worth running; the refused ones
    become rows with status ``invalid``. A sweep none of whose runs is valid (a misspelt key, an unknown backend)
    is an error of the file: raised here, before any cluster starts."""
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.plugins import backend_info, backend_names

    backend = spec.backend
    invalid: dict[str, str] = {}
    for run in runs:
        try:
            experiment = load_experiment(spec.experiment_path, run_overrides(spec, run))
        except ConfigError as exc:
            invalid[run.run_id] = f"{spec.path}: run {run.index} ({_describe(run.params)}): {exc}"
            continue
        backend = backend or experiment.default_backend
    if runs and len(invalid) == len(runs):
        raise ConfigError(next(iter(invalid.values())))
    if backend not in backend_names():
        raise ConfigError(
            f"{spec.path}: backend: unknown backend {backend!r}; known backends: {', '.join(backend_names())}"
        )
    if backend_info(backend).wall_clock_only:
        raise ConfigError(f"{spec.path}: backend: {backend} drives the real robot; sweeps run simulated backends only")
    return backend, invalid  # type: ignore[return-value]


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())
