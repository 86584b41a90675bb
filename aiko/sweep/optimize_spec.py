"""The optimisation file of ``aiko optimize``: which experiment, which settings to search within which bounds, which
metric to maximise or minimise, and how long CMA-ES runs.

```toml
experiment = "../sidewinding.toml"       # relative to this file
backend = "sim"                          # default: the experiment's
metric = "speed_m_s"                     # a name from aiko.sweep.metrics (aiko sweep --list-metrics)
goal = "maximize"                        # or "minimize" (e.g. cost_of_transport)
metrics = ["distance_m"]                 # optional: more metrics recorded in every row
seed = 0                                 # CMA-ES's draw and the runs' seeds
out = "sidewinding-opt"                  # default output directory (relative to this file); --out wins
[set]                                    # fixed overrides for every run: any key `aiko run --set` accepts
"run.duration_s" = 5.0
[parameters]                             # the searched settings, each within [low, high]
"gait.amplitude_h_deg" = {}              # an amplitude: default bounds 0 .. the robot's joint limit (less offset)
"gait.phase_step_h_deg" = { low = -90.0, high = -20.0, start = -50.0 }
[cmaes]
generations = 10                         # CMA-ES iterations after the start point's evaluation
population = 8                           # evaluations per generation (default: CMA-ES's 4 + 3 ln n)
sigma = 0.25                             # initial step, a fraction of each parameter's range
[limits]
run_timeout_s = 120.0                    # as in a sweep: past it an evaluation is a timeout row
```

A parameter's start is its ``start``, else the experiment's own value (with ``[set]``; a serpenoid gait's preset
values count), else the middle of its bounds; it is clipped into the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiko.core.config import Table, read_toml
from aiko.core.errors import ConfigError
from aiko.sweep.spec import Parameter, SweepSpec, _flat_overrides

GOALS = ("maximize", "minimize")

# serpenoid [gait] keys (degrees) -> SerpenoidParams attributes (radians)
_SERPENOID_KEYS = {
    "gait.amplitude_h_deg": "amplitude_h_rad",
    "gait.frequency_h_deg_s": "omega_h_rad_s",
    "gait.phase_step_h_deg": "delta_h_rad",
    "gait.offset_h_deg": "offset_h_rad",
    "gait.amplitude_v_deg": "amplitude_v_rad",
    "gait.frequency_v_deg_s": "omega_v_rad_s",
    "gait.phase_step_v_deg": "delta_v_rad",
    "gait.phase_v0_deg": "delta_0_rad",
    "gait.offset_v_deg": "offset_v_rad",
}
_AMPLITUDES = {  # amplitude key -> (axis, the gait's offset on that axis, if it has one)
    "gait.amplitude_h_deg": ("h", "offset_h_rad"),
    "gait.amplitude_v_deg": ("v", "offset_v_rad"),
    "gait.amplitude_deg": ("h", None),  # the planar obstacle-aided gait's body wave
}


@dataclass(frozen=True)
class SearchParameter:
    key: str
    low: float
    high: float
    start: float


@dataclass(frozen=True)
class OptimizeSpec:
    path: Path
    name: str
    experiment_path: Path
    backend: str | None
    metric: str
    goal: str
    extra_metrics: tuple[str, ...]
    fixed: dict[str, Any]
    parameters: tuple[SearchParameter, ...]
    generations: int
    population: int | None
    sigma: float
    seed: int
    out: Path | None
    run_timeout_s: float | None

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.metric, *self.extra_metrics)))

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.parameters]

    def sweep_spec(self) -> SweepSpec:
        """The same runs as a sweep sees them (one run path: ``aiko.sweep.execute.submit_and_collect``)."""
        return SweepSpec(
            path=self.path,
            name=self.name,
            experiment_path=self.experiment_path,
            backend=self.backend,
            metrics=self.metrics,
            fixed=self.fixed,
            parameters=tuple(Parameter(p.key, low=p.low, high=p.high) for p in self.parameters),
            sampling="random",
            count=1,
            sampling_seed=self.seed,
            seed=self.seed,
            keep_logs=False,
            out=self.out,
            run_timeout_s=self.run_timeout_s,
        )


def load_optimize_spec(path: str | Path) -> OptimizeSpec:
    """Read and check an optimisation file, with bounds and starts resolved against the experiment."""
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.sweep.metrics import check_metric_names

    path = Path(path)
    source = str(path)
    data, _ = read_toml(path, "optimisation file")
    top = Table(data, "", source)
    experiment = top.string("experiment")
    experiment_path = Path(experiment) if Path(experiment).is_absolute() else path.parent / experiment
    backend = top.string("backend", None)
    metric = top.string("metric")
    check_metric_names([metric], f"{source}: metric")
    goal = top.string("goal", "maximize", choices=GOALS)
    extra = top.raw("metrics", [])
    if not isinstance(extra, list) or not all(isinstance(m, str) for m in extra):
        raise ConfigError(f"{source}: metrics: expected a list of metric names, got {extra!r}")
    check_metric_names(extra, f"{source}: metrics")
    seed = top.integer("seed", 0, min=0, max=2**32 - 1)
    out_raw = top.string("out", None)
    top.string("name", None)
    fixed = _flat_overrides(top.table("set", {}), source)
    cmaes = top.table("cmaes", {})
    generations = cmaes.integer("generations", 10, min=1, max=10_000)
    population = cmaes.integer("population", None, min=2, max=10_000)
    sigma = cmaes.number("sigma", 0.25, min=0.0, min_exclusive=True, max=1.0)
    cmaes.finish()
    limits = top.table("limits", {})
    run_timeout_s = limits.number("run_timeout_s", None, min=0.0, min_exclusive=True)
    limits.finish()
    raw_parameters = top.table("parameters")
    top.finish()

    try:
        base = load_experiment(experiment_path, fixed)
    except ConfigError as exc:
        raise ConfigError(f"{source}: experiment: {exc}") from None
    base_data, _ = read_toml(experiment_path, "experiment file", fixed)
    parameters = []
    for key in raw_parameters.keys():
        raw = raw_parameters.raw(key)
        if key in fixed:
            raise ConfigError(f"{source}: parameters.{key}: also set in [set]; a setting is fixed or searched")
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: parameters.{key}: expected a table {{ low, high, start }}, got {raw!r}")
        table = Table(raw, f"parameters.{key}", source)
        low = table.number("low", None)
        high = table.number("high", None)
        start = table.number("start", None)
        table.finish()
        default_low, default_high = _default_bounds(key, base)
        low = default_low if low is None else float(low)
        high = default_high if high is None else float(high)
        if low is None or high is None:
            raise ConfigError(
                f"{source}: parameters.{key}: give its bounds (low, high); only amplitudes have defaults "
                "(the robot's joint limits)"
            )
        if not high > low:
            raise ConfigError(f"{source}: parameters.{key}: high ({high!r}) must be above low ({low!r})")
        if start is None:
            start = _current_value(key, base, base_data)
        if start is None or not math.isfinite(start):
            start = 0.5 * (low + high)
        parameters.append(SearchParameter(key, low, high, min(max(float(start), low), high)))
    if not parameters:
        raise ConfigError(f"{source}: parameters: nothing to search; give at least one setting with its bounds")
    return OptimizeSpec(
        path=path,
        name=str(data.get("name") or path.stem),
        experiment_path=experiment_path,
        backend=backend,
        metric=metric,
        goal=goal,
        extra_metrics=tuple(extra),
        fixed=fixed,
        parameters=tuple(parameters),
        generations=generations,
        population=population,
        sigma=float(sigma),
        seed=seed,
        out=(path.parent / out_raw) if out_raw else None,
        run_timeout_s=float(run_timeout_s) if run_timeout_s is not None else None,
    )


def _default_bounds(key: str, experiment: Any) -> tuple[float | None, float | None]:
    """An amplitude's bounds: 0 .. the robot's joint limit less the gait's offset on that axis (what
    ``validate_serpenoid`` accepts); nothing for other keys."""
    if key not in _AMPLITUDES:
        return None, None
    axis, offset_attr = _AMPLITUDES[key]
    limit = experiment.robot.limit_h_rad if axis == "h" else experiment.robot.limit_v_rad
    params = getattr(experiment.gait, "params", None)
    offset = abs(getattr(params, offset_attr, 0.0)) if params is not None and offset_attr else 0.0
    return 0.0, math.degrees(max(limit - offset, 0.0))


def _current_value(key: str, experiment: Any, data: Mapping[str, Any]) -> float | None:
    params = getattr(experiment.gait, "params", None)
    if key in _SERPENOID_KEYS and params is not None:
        return round(math.degrees(getattr(params, _SERPENOID_KEYS[key])), 9)  # 30.0, not 29.999999999999996
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None
