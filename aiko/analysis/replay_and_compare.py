"""The lab's daily loop after a run, in one call: replay the log on the simulator, compare the two back to back,
plot them. ``aiko run --replay`` is its caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiko.analysis.compare import compare_logs
from aiko.analysis.plots import plot_comparison
from aiko.analysis.replay import replay
from aiko.core.progress import Progress


def replay_and_compare(
    log_path: str | Path,
    *,
    backend_name: str | None = None,
    overrides: dict[str, Any] | None = None,
    replay_path: str | Path | None = None,
    plot_path: str | Path | None = None,
) -> dict[str, Any]:
    """The lab's daily loop after a run: replay it on the simulator, compare the two back to back, plot.

    Writes ``<log>-replay.mcap`` and ``<log>-vs-replay.png`` beside the log unless told otherwise; returns
    ``{"replay_log_path", "comparison", "comparison_plot"}``.
    """
    log_path = Path(log_path)
    replay_path = Path(replay_path) if replay_path else log_path.with_name(log_path.stem + "-replay.mcap")
    plot_path = Path(plot_path) if plot_path else log_path.with_name(log_path.stem + "-vs-replay.png")
    with Progress(f"replay {log_path.name}") as progress:
        replay(log_path, replay_path, overrides, backend_name=backend_name, progress=progress)
        progress.complete()
    comparison = compare_logs(log_path, replay_path)
    plot_comparison(comparison, plot_path, ("run", "replay (sim)"))
    return {"replay_log_path": str(replay_path), "comparison": comparison.result, "comparison_plot": str(plot_path)}
