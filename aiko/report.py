"""The run report: one self-contained HTML page (or a PNG) per run, written beside its log by ``aiko run``.

It shows what a lab looks at first: the run summary, the channels and their rates, the events (faults, stops,
reconnects), the tracked point's path, and reference against measured angles.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from aiko.errors import AikoError, writing
from aiko.log import LogReader
from aiko.log.info import log_info
from aiko.plots import plot_run


def default_report_path(log_path: str | Path) -> Path:
    return Path(log_path).with_suffix(".html")


def write_report(log_path: str | Path, out: str | Path | None = None) -> Path:
    """Write ``out`` (.html or .png; default LOG.html) and return its path."""
    reader = LogReader(log_path)
    out = Path(out) if out is not None else default_report_path(log_path)
    if out.suffix.lower() == ".png":
        return plot_run(reader, out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise AikoError(f"report {out}: choose a .html or .png file name")
    buffer = io.BytesIO()  # in memory: a PNG beside the log could be someone else's file (a screenshot, ...)
    plot_run(reader, buffer)
    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(reader, base64.b64encode(buffer.getvalue()).decode()))
    return out


def _table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def render_html(reader: LogReader, png_b64: str) -> str:
    info = log_info(reader)
    meta = reader.run_metadata
    summary = reader.metadata.get("aiko.summary", {})
    head = [
        ("log", reader.path.name),
        ("experiment", meta.get("experiment_path", "")),
        ("backend", meta.get("backend", "")),
        ("robot", meta.get("robot", "")),
        ("started (UTC)", meta.get("wall_clock_start_utc", meta.get("wall_clock_start_unix_s", ""))),
        ("host", meta.get("host", "")),
        ("software", meta.get("software_version", "")),
        ("duration [s]", info["duration_s"]),
        ("truncated", info["truncated"]),
    ]
    channels = [(topic, f"{c['messages']} msgs, {c['rate_hz']:.2f} Hz") for topic, c in info["channels"].items()]
    events = [
        (
            f"{(e['t_ns'] - (info['start_t_ns'] or 0)) * 1e-9:.3f} s",
            f"{e['kind']} " + json.dumps({k: v for k, v in e.items() if k not in ("t_ns", "kind")}),
        )
        for e in info["events"]
    ]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;margin:1em 0}"
        "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px} th{background:#f4f4f4}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(reader.path.name)}</title>"
        f"<style>{style}</style></head><body><h1>Run report: {html.escape(reader.path.name)}</h1>"
        f"<h2>Run</h2>{_table(head)}<h2>Summary</h2>{_table(sorted(summary.items()))}"
        f"<h2>Channels</h2>{_table(channels)}<h2>Events</h2>{_table(events)}"
        f"<h2>Figures</h2><img alt='run figure' style='max-width:100%' src='data:image/png;base64,{png_b64}'>"
        "</body></html>"
    )
