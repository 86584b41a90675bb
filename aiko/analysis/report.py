"""The run report: one self-contained HTML page (or a PNG) per run, written beside its log by ``aiko run``.

It shows what a lab looks at first: the run, the gait and its parameters, every joint's tracking error and status
counts (saturation, limits, faults, watchdog), what ``--replay`` found, the summary with the joint modules' health
and the emulator's statistics as tables, the channels, the events, and figures: the tracked point's path, reference
against measured angles of every joint (horizontal and vertical) and the body shape at a few instants.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from aiko.analysis.plots import plot_body_shapes, plot_joints, plot_run
from aiko.core.errors import AikoError, writing
from aiko.log import LogReader
from aiko.log.info import log_info
from aiko.robots.aiko.joints import JointStatus

log = logging.getLogger(__name__)


def default_report_path(log_path: str | Path) -> Path:
    return Path(log_path).with_suffix(".html")


def replay_beside(log_path: str | Path) -> Path:
    """Where ``aiko run --replay`` puts the replay of ``log_path``."""
    log_path = Path(log_path)
    return log_path.with_name(log_path.stem + "-replay.mcap")


def write_report(log_path: str | Path, out: str | Path | None = None, comparison: dict[str, Any] | None = None) -> Path:
    """Write ``out`` (.html or .png; default LOG.html) and return its path.

    ``comparison`` is what ``--replay`` found (``aiko.analysis.compare``); without it the replay written beside the
    log by ``--replay`` (LOG-replay.mcap), if there is one, is compared here."""
    reader = LogReader(log_path)
    out = Path(out) if out is not None else default_report_path(log_path)
    if out.suffix.lower() == ".png":
        return plot_run(reader, out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise AikoError(f"report {out}: choose a .html or .png file name")
    if comparison is None and replay_beside(log_path).is_file():
        from aiko.analysis.compare import compare_logs

        try:
            comparison = compare_logs(log_path, replay_beside(log_path)).result
        except AikoError as exc:
            log.warning("report: the replay beside %s cannot be compared: %s", log_path, exc)
    figures = []
    for plot in (plot_run, plot_joints, plot_body_shapes):
        buffer = io.BytesIO()  # in memory: a PNG beside the log could be someone else's file (a screenshot, ...)
        if plot(reader, buffer) is not False:
            figures.append(base64.b64encode(buffer.getvalue()).decode())
    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(reader, figures, comparison))
    return out


def _table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _grid(
    header: list[str],
    rows: list[list[Any]],
    flag: Callable[[Any], bool] = lambda v: False,
    value: Callable[[Any], Any] = lambda v: v,
) -> str:
    """A table with a header row; cells for which ``flag`` is true are highlighted."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=flag' if flag(v) else ''}>{_cell(value(v))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _cell(value: Any) -> str:
    """Scalars as text; a dict of scalars as a small nested table (never raw JSON)."""
    if isinstance(value, dict):
        return _table(list(value.items()))
    return html.escape(_fmt(value))


_ALARM_COLUMNS = frozenset({"fault", "watchdog", "estop", "stale"})


def _per_node_table(records: list[dict[str, Any]]) -> str:
    """[{node: 1, a: .., b: ..}, ...] → one row per node; a set alarm flag (fault, watchdog, ...) highlighted."""
    keys = list(dict.fromkeys(k for r in records for k in r))
    rows = [[(k in _ALARM_COLUMNS and r.get(k) is True, r.get(k)) for k in keys] for r in records]
    return _grid(keys, rows, lambda cell: cell[0], lambda cell: cell[1])


def _alarming(value: Any) -> bool:
    return value in ("FAULT", "WATCHDOG", "SATURATED")


def _lists_by_node(stats: dict[str, Any], n: int) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """A statistics dict split into per-node columns (lists of length n, nested dicts flattened) and the rest."""
    columns: dict[str, list[Any]] = {}
    rest: dict[str, Any] = {}
    for key, value in stats.items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for sub, v in items:
            name = f"{key}.{sub}" if sub else key
            if isinstance(v, list) and len(v) == n:
                columns[name] = v
            else:
                rest[name] = v
    return columns, rest


def joint_status_counts(reader: LogReader) -> dict[str, np.ndarray] | None:
    """Per joint module: feedback samples with each alarming status bit set (SATURATED, AT_LIMIT, ...)."""
    if not reader.has("/joint_feedback"):
        return None
    fb = reader.channel("/joint_feedback")
    if "status" not in fb or fb["status"].ndim != 2:
        return None
    status = fb["status"].astype(np.int64)
    out = {"samples": np.full(status.shape[1], status.shape[0])}
    for flag in (JointStatus.SATURATED, JointStatus.AT_LIMIT, JointStatus.FAULT, JointStatus.WATCHDOG):
        out[flag.name] = ((status & int(flag)) != 0).sum(axis=0)
    out["not ENABLED"] = ((status & int(JointStatus.ENABLED)) == 0).sum(axis=0)
    return out


def _joints_section(reader: LogReader, summary: dict[str, Any]) -> str:
    from aiko.analysis.compare import joint_tracking_rms

    rms = joint_tracking_rms(reader)
    counts = joint_status_counts(reader)
    if rms is None and counts is None:
        return "<p>No joint references or feedback in this log.</p>"
    n = len(rms["h_rad"]) if rms else len(counts["samples"])
    header = ["joint", "RMS error horizontal [deg]", "RMS error vertical [deg]"]
    if counts is not None:
        header += [f"{name} samples" for name in counts if name != "samples"]
    rows = []
    for j in range(n):
        row: list[Any] = [j + 1]
        row += [float(np.degrees(rms["h_rad"][j])), float(np.degrees(rms["v_rad"][j]))] if rms else [None, None]
        if counts is not None:
            row += [int(v[j]) for name, v in counts.items() if name != "samples"]
        rows.append(row)
    text = (
        "<p>Tracking error: measured minus the reference in force (held until the next one), every feedback sample. "
        "Status counts: feedback samples with the module's flag set"
        + (f" (of {int(counts['samples'][0])} per joint)" if counts is not None else "")
        + "; highlighted where non-zero.</p>"
    )
    flagged = _grid(header, rows, lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0)
    # the joint number column is an int > 0 too: unflag it
    flagged = flagged.replace("<tr><td class=flag>", "<tr><td>")
    return text + flagged


def _gait_section(reader: LogReader) -> str:
    import tomllib

    meta = reader.run_metadata
    rows: list[tuple[str, Any]] = []
    try:
        table = tomllib.loads(meta.get("experiment_toml", "")).get("gait", {})
    except (tomllib.TOMLDecodeError, RecursionError):
        table = {}
    rows += [(f"[gait] {k}", v) for k, v in table.items()]
    rows += [(f"--set {k}", v) for k, v in (meta.get("overrides") or {}).items()]
    try:  # the gait as it ran, rebuilt as a replay would
        from aiko.robots.aiko.experiment import experiment_from_log

        params = getattr(experiment_from_log(reader).gait, "params", None)
    except Exception:  # an old or foreign log: the file's table is all there is
        params = None
    if params is not None and dataclasses.is_dataclass(params):
        for f in dataclasses.fields(params):
            value = getattr(params, f.name)
            if f.name.endswith("_rad") and isinstance(value, float):
                rows.append((f.name.removesuffix("_rad") + " [deg]", float(np.degrees(value))))
            elif f.name.endswith("_rad_s") and isinstance(value, float):
                rows.append((f.name.removesuffix("_rad_s") + " [deg/s]", float(np.degrees(value))))
            else:
                rows.append((f.name, value))
    return (_table(rows) if rows else "<p>The log does not say which gait ran.</p>") + _drive_section(reader)


def _drive_section(reader: LogReader) -> str:
    """A driven run (aiko drive): the operator's commands and what the references asked of the joints."""
    from aiko.analysis.drive import command_rows, reference_extremes

    commands = command_rows(reader)
    if not commands and "aiko.drive" not in reader.run_metadata:
        return ""
    extremes = reference_extremes(reader) or {}
    limits = [(k, v) for k, v in extremes.items()]
    return f"<h3>Driven: operator commands</h3>{_table(commands)}<h3>References against the limits</h3>{_table(limits)}"


def _health_section(summary: dict[str, Any]) -> str:
    parts = []
    health = summary.get("module_health")
    if isinstance(health, list) and health and all(isinstance(h, dict) for h in health):
        parts.append("<h3>Joint modules at the end of the run</h3>" + _per_node_table(health))
    emulator = summary.get("emulator")
    if isinstance(emulator, dict):
        n = len(health) if isinstance(health, list) and health else len(next(iter(emulator.values()), []) or [])
        columns, rest = _lists_by_node(emulator, n)
        rows = [[i + 1, *(col[i] for col in columns.values())] for i in range(n)]
        parts.append("<h3>Emulated joint modules (per node)</h3>" + _grid(["node", *columns], rows, _alarming))
        if rest:
            parts.append(_table(list(rest.items())))
    return "".join(parts)


def _replay_section(comparison: dict[str, Any] | None, reader: LogReader) -> str:
    meta = reader.run_metadata
    if comparison is None:
        return (
            "<p>No replay. <code>aiko run … --replay</code> (or <code>aiko replay</code> then "
            "<code>aiko report</code>) runs the same references through the simulator and compares.</p>"
        )
    rms_mm = comparison["rms_position_error_m"] * 1e3
    ratio = comparison.get("distance_ratio")
    rows = [
        ("replay log", comparison.get("b")),
        ("tracked point", comparison.get("tracked_point")),
        ("RMS position gap [mm]", rms_mm),
        ("largest position gap [mm]", comparison["max_position_error_m"] * 1e3),
        ("distance travelled: run [m]", comparison["run_a"]["distance_m"]),
        ("distance travelled: replay [m]", comparison["run_b"]["distance_m"]),
        ("distance ratio (replay / run)", ratio),
        ("time offset [s]", comparison.get("time_offset_s")),
    ]
    between = comparison.get("joint_angle_rms_between_runs_rad")
    joint_gap = ""
    worst = ""
    if between:
        h, v = np.degrees(between["h_rad"]), np.degrees(between["v_rad"])
        joint_gap = _grid(
            ["joint", "angle gap horizontal [deg RMS]", "angle gap vertical [deg RMS]"],
            [[j + 1, float(h[j]), float(v[j])] for j in range(len(h))],
        )
        k = int(np.argmax(np.maximum(h, v)))
        worst = f" The joints themselves moved differently by up to {max(h[k], v[k]):.2f}° RMS (joint {k + 1})."
    backend = html.escape(str(meta.get("backend", "the run's backend")))
    meaning = (
        f"<b>What the numbers say.</b> The RMS gap ({rms_mm:.0f} mm) is how far apart the tracked point of the run "
        "and of its replay are on average, once their start positions and clocks are aligned; the distance ratio "
        f"({'n/a' if ratio is None else f'{ratio:.2f}'}) is the replay's distance over the run's (1: as far)."
    )
    if rms_mm < 5 and ratio is not None and 0.95 <= ratio <= 1.05:
        verdict = "The simulation reproduces this run: the model and the controllers agree."
    else:
        counts = joint_status_counts(reader)
        saturated = int(counts["SATURATED"].sum()) if counts is not None else 0
        why = (
            f" In this run the joint modules reported SATURATED in {saturated} feedback samples (joint table): their "
            "torque limit cut the motion there, which the replay's joints need not do."
            if saturated
            else ""
        )
        verdict = (
            f"The simulation does not reproduce this run.{worst} Both received the very same references, so the "
            f"gap is what lies between a reference and the ground: here the <b>{backend}</b> backend against the "
            "simulator's own joint controllers (for <code>hil</code>: the emulated joint-module firmware over CAN, "
            f"with its gains, torque limits and bus timing).{why} Sidewinding moves by ground contact, which turns "
            "small joint differences into a different path (on the 3D simulator a 5e-16 rad difference in the start "
            "posture grows to 4 mm in 3 s). <b>When it is expected:</b> a HIL or real-robot run replayed on the "
            "simulator always shows such a gap; on <code>make run</code> (HIL vs <code>sim</code>) it is about "
            "200 mm RMS with a distance ratio of 0.70. It only means something is wrong when the run itself was a "
            "simulation of the same model (then the gap should be ~0), or when the simulator is meant to predict the "
            "robot: then tune the simulator (<code>--set sim.mu_…</code>, joint gains and limits) until the ratio "
            "approaches 1."
        )
    verdict = f"{meaning}</p><p>{verdict}"
    return f"{_table(rows)}<p>{verdict}</p>{joint_gap}"


def render_html(reader: LogReader, figures: list[str], comparison: dict[str, Any] | None = None) -> str:
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
        ("git commit", meta.get("git_commit") or "unknown"),
        ("duration [s]", info["duration_s"]),
        ("truncated", info["truncated"]),
    ]
    scalars = sorted((k, v) for k, v in summary.items() if k not in ("module_health", "emulator"))
    channels = [(topic, f"{c['messages']} msgs, {c['rate_hz']:.2f} Hz") for topic, c in info["channels"].items()]
    events = [
        (
            f"{(e['t_ns'] - (info['start_t_ns'] or 0)) * 1e-9:.3f} s",
            {"event": e["kind"], **{k: v for k, v in e.items() if k not in ("t_ns", "kind")}},
        )
        for e in info["events"]
    ]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;margin:1em 0}"
        "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px} th{background:#f4f4f4}"
        "td.flag{background:#ffd6cc;font-weight:bold} td table{margin:0}"
    )
    images = "".join(
        f"<img alt='figure {i + 1}' style='max-width:100%' src='data:image/png;base64,{png}'>"
        for i, png in enumerate(figures)
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(reader.path.name)}</title>"
        f"<style>{style}</style></head><body><h1>Run report: {html.escape(reader.path.name)}</h1>"
        f"<h2>Run</h2>{_table(head)}<h2>Gait</h2>{_gait_section(reader)}"
        f"<h2>Joints</h2>{_joints_section(reader, summary)}"
        f"<h2>Replay against the simulation</h2>{_replay_section(comparison, reader)}"
        f"<h2>Summary</h2>{_table(scalars)}{_health_section(summary)}"
        f"<h2>Channels</h2>{_table(channels)}<h2>Events</h2>{_table(events)}"
        f"<h2>Figures</h2>{images}"
        "</body></html>"
    )
