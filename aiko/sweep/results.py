"""A sweep's results: one Parquet table, a row per run, written as the runs finish.

Layout of the output directory::

    OUT/results.parquet        every run's row (the table; written at the end of a sweep, replaced atomically)
    OUT/parts/part-*.parquet   rows of runs finished since, one file per batch (written atomically)

Why part files rather than one ``ParquetWriter`` appending to a single file: a Parquet file is readable only once
its footer is written, so a sweep killed mid-way (power cut, Ctrl-C, the client's machine rebooted) would lose every
row of an open writer. A part file is written to a temporary name and renamed, so each finished batch is on disk
for good, and ``--resume`` finds it. At the end of a sweep (and at the start of a resumed one) the parts are folded
into ``results.parquet`` and removed; until then ``read_table`` reads the file and the parts as one table.

Writes are idempotent by run id: a row whose run already has a final row (``ok``, ``failed``, ``timeout``,
``invalid``) is dropped (Dask reruns a task whose worker died, and a late duplicate must not become a second row),
and reading keeps one row per run id, a final row before a ``lost`` one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiko.core.errors import AikoError
from aiko.sweep.worker import FINAL_STATUSES

RESULTS_FILE = "results.parquet"
PARTS_DIR = "parts"


class ResultStore:
    """Append rows in batches; knows which runs are done."""

    def __init__(
        self,
        directory: str | Path,
        parameter_columns: dict[str, list[Any]],
        metrics: Iterable[str],
        *,
        batch_rows: int = 16,
        batch_interval_s: float = 5.0,
        rerun: Iterable[str] = (),
    ) -> None:
        """``rerun``: final statuses whose runs count as not done (``timeout`` with ``--retry-timeouts``)."""
        self.directory = Path(directory)
        self.parts = self.directory / PARTS_DIR
        self.metrics = list(metrics)
        self.batch_rows = batch_rows
        self.batch_interval_s = batch_interval_s
        self.schema = _schema(parameter_columns, self.metrics)
        self.pending: list[dict[str, Any]] = []
        self.written = 0
        self._last_flush = time.monotonic()
        self._seq = 0
        try:
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AikoError(f"cannot create the sweep directory {self.directory}: {exc.strerror or exc}") from None
        self.done: set[str] = final_run_ids(self.directory, exclude=rerun)

    @property
    def results_path(self) -> Path:
        return self.directory / RESULTS_FILE

    def add(self, row: dict[str, Any]) -> bool:
        """Queue a run's row (flushed in batches); False if the run already has a final row (a duplicate)."""
        run_id = row["run_id"]
        if run_id in self.done:
            return False
        if row["status"] in FINAL_STATUSES:
            self.done.add(run_id)
        self.pending.append(row)
        if len(self.pending) >= self.batch_rows or time.monotonic() - self._last_flush >= self.batch_interval_s:
            self.flush()
        return True

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self.pending:
            return
        import pyarrow as pa

        table = pa.Table.from_pylist([_flatten(row, self.metrics) for row in self.pending], schema=self.schema)
        self._seq += 1
        # nanoseconds, not seconds: two stores of one process within a second (a resumed sweep) wrote the same name
        # and the second replaced the first's rows; names sort by time, so a later row still wins in read_table
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self._seq:06d}.parquet"
        _write_atomically(table, self.parts / name)
        self.written += len(self.pending)
        self.pending.clear()

    def compact(self) -> Path:
        """Fold every part into ``results.parquet`` (one row per run id) and remove the parts."""
        self.flush()
        return compact(self.directory)


def _schema(parameter_columns: dict[str, list[Any]], metrics: list[str]) -> Any:
    import pyarrow as pa

    fields = [pa.field("run_id", pa.string()), pa.field("index", pa.int64())]
    for key, values in parameter_columns.items():
        try:
            kind = pa.array(values).type
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise AikoError(f"parameters.{key}: values of mixed types cannot form one column: {values!r}") from None
        fields.append(pa.field(key, pa.float64() if pa.types.is_null(kind) else kind))
    fields += [
        pa.field("seed", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("wall_time_s", pa.float64()),
        pa.field("cpu_time_s", pa.float64()),
        pa.field("worker", pa.string()),
        pa.field("log_path", pa.string()),
        pa.field("finished_unix_s", pa.float64()),
    ]
    fields += [pa.field(name, pa.float64()) for name in metrics]
    return pa.schema(fields)


def _flatten(row: dict[str, Any], metrics: list[str]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in ("metrics", "params")}
    out.update(row.get("params", {}))
    out.update({name: row.get("metrics", {}).get(name) for name in metrics})
    out.setdefault("finished_unix_s", time.time())
    return out


def _write_atomically(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise AikoError(f"cannot write {path}: {exc.strerror or exc}") from None


def _files(directory: Path) -> list[Path]:
    files = [directory / RESULTS_FILE] if (directory / RESULTS_FILE).is_file() else []
    parts = directory / PARTS_DIR
    return files + (sorted(parts.glob("part-*.parquet")) if parts.is_dir() else [])


def read_table(directory: str | Path) -> Any:
    """Every run's row in ``directory`` as one ``pyarrow.Table`` (None if there is none), one row per run id: a
    final row wins over a ``lost`` one, a later row over an earlier one, sorted by the run's index."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = _files(Path(directory))
    if not files:
        return None
    try:
        tables = [pq.read_table(f) for f in files]
    except (OSError, pa.ArrowException) as exc:
        raise AikoError(f"cannot read the sweep results in {directory}: {exc}") from None
    table = pa.concat_tables(tables, promote_options="permissive")
    ids = table.column("run_id").to_pylist()
    status = table.column("status").to_pylist()
    best: dict[str, int] = {}
    for i, (run_id, s) in enumerate(zip(ids, status, strict=True)):
        j = best.get(run_id)
        if j is None or (s in FINAL_STATUSES) >= (status[j] in FINAL_STATUSES):
            best[run_id] = i  # later files and rows come later: the latest of the best kind wins
    keep = sorted(best.values(), key=lambda i: (table.column("index")[i].as_py() or 0, i))
    return table.take(pa.array(keep, type=pa.int64()))


def final_run_ids(directory: str | Path, exclude: Iterable[str] = ()) -> set[str]:
    """Runs with a final row (``ok``, ``failed``, ``timeout``, ``invalid``), but for those whose status is in
    ``exclude``."""
    final = set(FINAL_STATUSES) - set(exclude)
    table = read_table(directory)
    if table is None:
        return set()
    return {
        run_id
        for run_id, s in zip(table.column("run_id").to_pylist(), table.column("status").to_pylist(), strict=True)
        if s in final
    }


def compact(directory: str | Path) -> Path:
    directory = Path(directory)
    parts = _files(directory)[1:] if (directory / RESULTS_FILE).is_file() else _files(directory)
    target = directory / RESULTS_FILE
    table = read_table(directory)
    if table is None:
        return target
    _write_atomically(table, target)
    for part in parts:  # only those read above: a part written meanwhile by another client stays
        part.unlink(missing_ok=True)
    return target


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """``OUT/sweep.json``: the spec as run (for reading the table later and for ``--resume``)."""
    path = directory / "sweep.json"
    tmp = path.with_name(".sweep.json.tmp")
    try:
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise AikoError(f"cannot write {path}: {exc.strerror or exc}") from None
