"""``aiko optimize``: CMA-ES (the ``cma`` package) over an experiment's settings for one metric, each generation's
evaluations run in parallel on the sweep's Dask cluster through the sweep's run path.

CMA-ES searches the unit cube (every parameter scaled from its ``[low, high]``), with ``cma``'s own bound handling
(``BoundTransform``), so one initial step ``sigma`` fits parameters of any unit. The start point is evaluated first
(generation 0: the experiment as it is, the baseline the result is compared with), then ``generations`` CMA-ES
iterations of ``population`` evaluations each. An evaluation that fails, times out or is lost is a row like any
other and counts as worse than every evaluation that worked (the worst value seen so far plus the spread of the
values seen), so CMA-ES moves away from it; a generation in which nothing worked and no value was ever seen stops
the optimisation with the runs' first error.

Every evaluation is a row of ``OUT/results.parquet`` (the sweep's table, with ``generation`` and ``candidate``
columns). The run ids follow from the spec and CMA-ES's seeded draws, so ``--resume`` replays an interrupted
optimisation: CMA-ES asks the same points again, those with a row are read back instead of run.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from aiko.core.errors import AikoError
from aiko.sweep.connect import close_cluster, connect
from aiko.sweep.execute import SweepOptions, _check_same_sweep, submit_and_collect
from aiko.sweep.optimize_spec import OptimizeSpec
from aiko.sweep.results import ResultStore, final_run_ids, read_table, write_manifest
from aiko.sweep.spec import RunPoint, _run_id, _run_seed
from aiko.sweep.worker import STATUS_FAILED, STATUS_LOST, STATUS_OK, STATUS_TIMEOUT


class _CapturingStore(ResultStore):
    """The sweep's result store, also keeping each run's row for CMA-ES."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, row: dict[str, Any]) -> bool:
        self.rows.setdefault(row["run_id"], row)
        return super().add(row)


def run_optimization(
    spec: OptimizeSpec, backend: str, options: SweepOptions, *, progress_stream: IO[str] | None = sys.stderr
) -> dict[str, Any]:
    """Run CMA-ES as ``spec`` says; returns the JSON summary (and writes the best point as an experiment file)."""
    try:
        import cma
    except ImportError:
        raise AikoError("aiko optimize needs the cma package: pip install 'aiko-stack[sweep]'") from None
    import numpy as np

    sweep = spec.sweep_spec()
    out = options.out
    columns: dict[str, list[Any]] = {"generation": [0], "candidate": [0], **{k: [0.0] for k in spec.keys}}
    if final_run_ids(out) and not options.resume:
        raise AikoError(f"{out} already holds results; --resume continues that optimisation, or choose another --out")
    if options.resume:
        _check_same_sweep(out, str(spec.experiment_path.resolve()), backend)
    previous = _previous_rows(out) if options.resume else {}
    store = _CapturingStore(out, columns, spec.metrics)
    write_manifest(
        out,
        {
            "kind": "optimize",
            "spec": str(spec.path),
            "experiment": str(spec.experiment_path.resolve()),
            "backend": backend,
            "metric": spec.metric,
            "goal": spec.goal,
            "set": spec.fixed,
            "parameters": {p.key: {"low": p.low, "high": p.high, "start": p.start} for p in spec.parameters},
            "generations": spec.generations,
            "population": spec.population,
            "sigma": spec.sigma,
            "seed": spec.seed,
        },
    )
    low = np.array([p.low for p in spec.parameters])
    span = np.array([p.high - p.low for p in spec.parameters])
    x0 = (np.array([p.start for p in spec.parameters]) - low) / span
    cma_options: dict[str, Any] = {"bounds": [0.0, 1.0], "seed": spec.seed + 1, "verbose": -9}
    if spec.population:
        cma_options["popsize"] = spec.population
    # one parameter: pycma 4.5's step-size limits fail in one dimension ("not yet initialized (dimension needed)"
    # in _stds_into_limits), so CMA-ES runs in two, the second coordinate inert (no run reads it)
    inert = len(x0) == 1
    es = cma.CMAEvolutionStrategy([*x0, 0.5] if inert else list(x0), spec.sigma, cma_options)
    sign = -1.0 if spec.goal == "maximize" else 1.0

    counts = {STATUS_OK: 0, STATUS_FAILED: 0, STATUS_TIMEOUT: 0, STATUS_LOST: 0}
    seen: list[float] = []  # objective values (minimised) of every evaluation that worked
    evaluations: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    client = cluster = None
    started = time.monotonic()
    ran = reused = 0
    try:
        for generation in range(spec.generations + 1):
            unit = [np.clip(x0, 0.0, 1.0)] if generation == 0 else es.ask()
            points = []
            for k, u in enumerate(unit):
                coordinates = low + span * np.asarray(u)[: len(spec.keys)]
                params = {key: round(float(v), 9) for key, v in zip(spec.keys, coordinates, strict=True)}
                run_id = _run_id(sweep, {"generation": generation, "candidate": k, **params})
                points.append(
                    RunPoint(
                        run_id,
                        len(evaluations) + k,
                        params,
                        _run_seed(spec.seed, run_id),
                        {"generation": generation, "candidate": k},
                    )
                )
            todo = [p for p in points if p.run_id not in previous]
            if todo:
                if client is None:
                    client, cluster = connect(options, str(spec.experiment_path.resolve()))
                submit_and_collect(client, sweep, todo, backend, options, store, counts, None)
                ran += len(todo)
            reused += len(points) - len(todo)
            results = [_result(previous.get(p.run_id) or store.rows.get(p.run_id), spec.metric) for p in points]
            values = [sign * v if status == STATUS_OK and v is not None else None for status, v, _ in results]
            seen += [v for v in values if v is not None]
            if not seen:
                errors = [e for _, _, e in results if e]
                raise AikoError(
                    f"optimize: every evaluation of generation {generation} failed"
                    + (f" (e.g. {errors[0]})" if errors else f" or gave no {spec.metric}")
                )
            penalty = max(seen) + (max(seen) - min(seen)) + 1.0
            f = [v if v is not None else penalty for v in values]
            if generation > 0:
                es.tell(unit, f)
            for point, (status, value, error) in zip(points, results, strict=True):
                evaluations.append(
                    {"generation": generation, "params": point.params, "status": status, "value": value, "error": error}
                )
            history.append(_generation_line(generation, spec, results, evaluations, started, progress_stream))
    finally:
        store.flush()
        if client is not None:
            close_cluster(client, cluster)
    results_path = store.compact()
    worked = [e for e in evaluations if e["status"] == STATUS_OK and e["value"] is not None]
    best = (max if spec.goal == "maximize" else min)(worked, key=lambda e: e["value"])
    start = evaluations[0]
    experiment_path = out / f"{spec.name}-optimized.toml"
    write_experiment(spec, backend, best["params"], experiment_path, best["value"])
    statuses = [e["status"] for e in evaluations]
    summary = {
        "metric": spec.metric,
        "goal": spec.goal,
        "evaluations": len(evaluations),
        "generations": spec.generations,
        "ran": ran,
        "reused": reused,
        "completed": statuses.count(STATUS_OK),
        "failed": statuses.count(STATUS_FAILED),
        "timeout": statuses.count(STATUS_TIMEOUT),
        "lost": statuses.count(STATUS_LOST),
        "start": {"value": start["value"], "params": start["params"], "status": start["status"]},
        "best": {"value": best["value"], "params": best["params"], "generation": best["generation"]},
        "history": history,
        "experiment_path": str(experiment_path),
        "results_path": str(results_path),
        "out": str(out),
        "wall_time_s": time.monotonic() - started,
    }
    (out / "optimize-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _previous_rows(out: Path) -> dict[str, dict[str, Any]]:
    table = read_table(out)
    if table is None:
        return {}
    return {row["run_id"]: row for row in table.to_pylist() if row["status"] != STATUS_LOST}


def _result(row: dict[str, Any] | None, metric: str) -> tuple[str, float | None, str | None]:
    """(status, metric value or None, error) of a row just run (metrics in a dict) or read back (a column)."""
    if row is None:  # cannot happen: every submitted run comes back as a row
        return STATUS_LOST, None, "no row"
    value = row["metrics"].get(metric) if "metrics" in row else row.get(metric)
    if value is not None and not math.isfinite(value):
        value = None
    return row["status"], value, row.get("error")


def _generation_line(
    generation: int,
    spec: OptimizeSpec,
    results: list[tuple[str, float | None, str | None]],
    evaluations: list[dict[str, Any]],
    started: float,
    stream: IO[str] | None,
) -> dict[str, Any]:
    pick = max if spec.goal == "maximize" else min
    values = [v for s, v, _ in results if s == STATUS_OK and v is not None]
    so_far = [e["value"] for e in evaluations if e["status"] == STATUS_OK and e["value"] is not None]
    entry = {
        "generation": generation,
        "evaluations": len(results),
        "not_ok": len(results) - len(values),
        "best": pick(values) if values else None,
        "mean": sum(values) / len(values) if values else None,
        "best_so_far": pick(so_far) if so_far else None,
    }
    if stream is not None:
        label = "start" if generation == 0 else f"generation {generation}/{spec.generations}"
        text = "no result" if entry["best"] is None else f"best {entry['best']:.6g}, mean {entry['mean']:.6g}"
        bad = f", {entry['not_ok']} not ok" if entry["not_ok"] else ""
        stream.write(
            f"optimize: {label}: {len(results)} runs{bad}, {spec.metric} {text}; "
            f"best so far {entry['best_so_far']:.6g} ({time.monotonic() - started:.0f} s)\n"
        )
        stream.flush()
    return entry


def write_experiment(
    spec: OptimizeSpec, backend: str, params: dict[str, Any], path: Path, value: float | None = None
) -> Path:
    """The base experiment file with ``[set]`` and the best ``params`` written into its tables (its comments kept,
    by ``tomlkit``), its robot path made to work from ``path``, and ``[backend] default`` the optimised backend:
    ``aiko run PATH`` runs the optimum as is."""
    import tomlkit

    from aiko.core.config import read_config_text

    base = spec.experiment_path
    doc = tomlkit.parse(read_config_text(base, "experiment file"))
    robot = doc.get("robot")
    if isinstance(robot, str) and not Path(robot).is_absolute():
        target, here = (base.parent / robot).resolve(), path.parent.resolve()
        # relative where the two share a folder below the root (a checkout moves as one), else absolute
        doc["robot"] = os.path.relpath(target, here) if os.path.commonpath([target, here]) != "/" else str(target)
    verdict_text = f" = {value:.4g}" if value is not None else ""
    doc["description"] = (
        f"{spec.metric}{verdict_text}: CMA-ES optimum ({spec.goal}) of {base.name} by aiko optimize. "
        + str(doc.get("description", ""))
    ).strip()
    for key, value_ in {**spec.fixed, **params, "backend.default": backend}.items():
        _set(doc, key.split("."), value_)
    header = tomlkit.document()
    header.add(tomlkit.comment(f"written by aiko optimize from {spec.path.name}: the experiment {base.name}"))
    verdict = f" = {value:.6g}" if value is not None else ""
    searched = ", ".join(spec.keys)
    header.add(tomlkit.comment(f"with the best {spec.metric}{verdict} ({spec.goal}) of CMA-ES over {searched}"))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(tomlkit.dumps(header) + tomlkit.dumps(doc).rstrip("\n") + "\n")
    os.replace(tmp, path)
    return path


def _set(doc: Any, parts: list[str], value: Any) -> None:
    import tomlkit

    node = doc
    for part in parts[:-1]:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
    node[parts[-1]] = value
