"""A driven run back into an experiment file: the experiment as it ran, its ``[gait]`` replaced by the steerable
gait with the operator's commands (``/drive/commands``) as its script. ``aiko run FILE`` then sends the same
references at the same instants (on any backend, in lockstep or in real time), and ``aiko drive FILE`` plays the
commands and takes more from the operator on top."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from aiko.core.errors import AikoError
from aiko.robots.aiko.drive.session import COMMANDS_CHANNEL


def driven_experiment_text(log_path: str | Path) -> str:
    """The TOML text of the experiment that replays the driven run in ``log_path``."""
    import tomlkit

    from aiko.log import LogReader
    from aiko.robots.aiko.drive.run import DRIVE_METADATA_NAME

    reader = LogReader(log_path)
    meta = reader.run_metadata
    drive = meta.get(DRIVE_METADATA_NAME)
    text = meta.get("experiment_toml")
    if not isinstance(text, str) or not text:
        raise AikoError(f"{log_path}: no experiment in the log's metadata (was it written by aiko drive?)")
    commands = [payload for _, payload in reader.messages(COMMANDS_CHANNEL)] if reader.has(COMMANDS_CHANNEL) else []
    if drive is None and not commands:
        raise AikoError(f"{log_path}: not a driven run (no {COMMANDS_CHANNEL} channel and no drive metadata)")
    doc = tomlkit.parse(text)
    for key, value in dict(meta.get("overrides") or {}).items():
        _set(doc, key.split("."), value)
    robot_text = meta.get("robot_toml")
    if isinstance(robot_text, str) and robot_text:
        doc["robot"] = tomlkit.parse(robot_text)  # self-contained: the file runs from any folder
    old_gait = tomllib.loads(tomlkit.dumps(doc)).get("gait", {})
    gait = tomlkit.table()
    gait.add("kind", "steerable")
    drive = drive or {}
    start = str(drive.get("start_gait", "sidewinding"))
    gait.add("start", start)
    if "max_speed" in drive:
        gait.add("max_speed", round(float(drive["max_speed"]), 6))
        gait.add("max_turn_deg", round(float(drive["max_turn_deg"]), 6))
        gait.add("max_accel_deg_s2", round(float(drive["accel_limit_deg_s2"]), 6))
    entries = tomlkit.array()
    entries.multiline(True)
    for c in commands:
        entry = tomlkit.inline_table()
        entry.update({"t_s": round(float(c["t_s"]), 6), "command": c["command"]})
        if c["command"] in ("speed", "turn"):
            entry["value"] = float(c["value"])
        elif c["command"] == "gait":
            entry["value"] = c["gait"]
        entry["source"] = c.get("source", "script")
        entries.append(entry)
    gait.add("commands", entries)
    if old_gait.get("kind", "serpenoid") == "serpenoid" and start in ("sidewinding", "lateral_undulation"):
        family = {k: v for k, v in old_gait.items() if k not in ("kind", "soft_start", "soft_start_threshold_deg")}
        sub = tomlkit.table()
        for k, v in family.items():
            sub.add(k, v)
        gait.add(start, sub)
    elif old_gait.get("kind") == "steerable":
        for family in ("sidewinding", "lateral_undulation"):
            if family in old_gait:
                gait.add(family, old_gait[family])
    doc["gait"] = gait
    run = doc.get("run")
    if run is not None and commands:
        last = max(float(c["t_s"]) for c in commands)
        summary = reader.metadata.get("aiko.summary", {})
        duration = float(summary.get("duration_s", last + 5.0))
        run["duration_s"] = round(max(duration, last + 1.0), 3)
    header = tomlkit.document()
    header.add(tomlkit.comment(f"written by aiko drive from {Path(log_path).name}: the driven run as an experiment"))
    header.add(tomlkit.comment("`aiko run` on this file sends the same references at the same instants"))
    return tomlkit.dumps(header) + tomlkit.dumps(doc).rstrip("\n") + "\n"


def write_driven_experiment(log_path: str | Path, out: str | Path) -> Path:
    out = Path(out)
    text = driven_experiment_text(log_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return out


def _set(doc: Any, parts: list[str], value: Any) -> None:
    import tomlkit

    node = doc
    for part in parts[:-1]:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
    node[parts[-1]] = value
