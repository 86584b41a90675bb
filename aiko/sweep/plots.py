"""Sweep figures, one PNG per metric in ``OUT/plots/``: the metric against each numeric parameter (one point per
run that finished ``ok``; with more parameters, the points spread over the others), and for two or more parameters
a heatmap over the first two (the mean over the rest where a grid cell holds several runs; a scatter coloured by the
metric when the points are sampled rather than on a grid)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aiko.analysis.plots import _pyplot, _with_parent_dir, save_figure

MAX_GRID_LEVELS = 60


def _numeric(values: list[Any]) -> np.ndarray | None:
    if not values or any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        return None
    return np.asarray(values, dtype=np.float64)


def plot_sweep(
    results_path: str | Path, parameters: list[str], metrics: tuple[str, ...] | list[str], out: Path
) -> list[Path]:
    import pyarrow.parquet as pq

    path = Path(results_path)
    if not path.is_file():
        return []
    table = pq.read_table(path)
    ok = np.asarray([s == "ok" for s in table.column("status").to_pylist()], dtype=bool)
    if not ok.any():
        return []
    params = {k: _numeric(table.column(k).to_pylist()) for k in parameters if k in table.column_names}
    params = {k: v[ok] for k, v in params.items() if v is not None}
    if not params:
        return []
    written = []
    for metric in metrics:
        if metric not in table.column_names:
            continue
        y = np.asarray([np.nan if v is None else v for v in table.column(metric).to_pylist()], dtype=np.float64)[ok]
        if not np.isfinite(y).any():
            continue
        written.append(_metric_figure(metric, params, y, out / "plots" / f"{metric}.png"))
    return written


def _metric_figure(metric: str, params: dict[str, np.ndarray], y: np.ndarray, out: Path) -> Path:
    plt = _pyplot()
    keys = list(params)
    panels = len(keys) + (1 if len(keys) >= 2 else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.8), constrained_layout=True, squeeze=False)
    for ax, key in zip(axes[0], keys, strict=False):
        x = params[key]
        ax.plot(x, y, "o", ms=3.5, alpha=0.7)
        levels = np.unique(x)
        if len(levels) <= MAX_GRID_LEVELS:  # a grid: the mean at each level over the other parameters
            means = [np.nanmean(y[x == v]) if np.isfinite(y[x == v]).any() else np.nan for v in levels]
            ax.plot(levels, means, "-", color="C1", label="mean over the others" if len(keys) > 1 else None)
            if len(keys) > 1:
                ax.legend(loc="best", fontsize=8)
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    if len(keys) >= 2:
        _heatmap(fig, axes[0][-1], params[keys[0]], params[keys[1]], y, keys[0], keys[1], metric)
    fig.suptitle(f"{metric}: {len(y)} runs")
    return save_figure(fig, _with_parent_dir(out), dpi=100)


def _heatmap(fig: Any, ax: Any, x: np.ndarray, z: np.ndarray, y: np.ndarray, xkey: str, zkey: str, metric: str) -> None:
    xs, zs = np.unique(x), np.unique(z)
    if len(xs) <= MAX_GRID_LEVELS and len(zs) <= MAX_GRID_LEVELS and len(xs) * len(zs) <= 4 * len(y):
        grid = np.full((len(zs), len(xs)), np.nan)
        for i, zv in enumerate(zs):
            for j, xv in enumerate(xs):
                cell = y[(x == xv) & (z == zv)]
                if np.isfinite(cell).any():
                    grid[i, j] = np.nanmean(cell)
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs], rotation=45 if len(xs) > 6 else 0)
        ax.set_yticks(range(len(zs)), [f"{v:g}" for v in zs])
    else:  # sampled points: a scatter coloured by the metric
        image = ax.scatter(x, z, c=y, s=18, cmap="viridis")
    ax.set_xlabel(xkey)
    ax.set_ylabel(zkey)
    fig.colorbar(image, ax=ax, label=metric)
