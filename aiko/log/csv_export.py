"""One CSV per channel: ``t_ns``, one column per scalar and ``name[i]`` (``name[i][j]``) per array element.

Indices count from 1, like joints, links and nodes everywhere else in aiko: ``angle_h_rad[1]`` is joint 1,
``position_m[1]`` is x.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from aiko.core.errors import writing
from aiko.log.reader import ChannelArrays, LogReader


def channel_file_name(topic: str) -> str:
    """'/sim/link_poses' → 'sim_link_poses.csv' (safe on every file system)."""
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in topic.strip("/")) or "root"
    return stem + ".csv"


def export_csv(reader: LogReader, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every non-empty channel; returns topic → CSV path."""
    out = Path(out_dir)
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
    written = {}
    for topic in reader.topics:
        if not reader.has(topic):
            continue
        path = out / channel_file_name(topic)
        write_channel_csv(reader.channel(topic), path)
        written[topic] = path
    return written


def write_channel_csv(arrays: ChannelArrays, path: Path) -> None:
    header = ["t_ns"]
    columns: list[np.ndarray] = [arrays.t_ns.astype(object)]
    for name, values in arrays.fields.items():
        if values.dtype == object or values.ndim == 1:
            header.append(name)
            columns.append(values)
            continue
        flat = values.reshape(len(values), -1)
        for k, index in enumerate(np.ndindex(values.shape[1:])):
            header.append(name + "".join(f"[{i + 1}]" for i in index))
            columns.append(flat[:, k])
    with writing(path), open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in range(len(arrays.t_ns)):
            writer.writerow([_cell(col[row]) for col in columns])


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return "" if not np.isfinite(value) else repr(float(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, np.bool_):
        return str(bool(value))
    return str(value)
