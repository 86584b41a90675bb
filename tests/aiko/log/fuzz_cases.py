"""Damaged-log cases for fuzzing ``aiko log recover`` and ``aiko log info`` through the CLI (the suite and
benchmarks/log_fuzz.py).

``damage(rng, logs)`` returns the bytes of one damaged log made from real logs: bit flips, truncations, splices
of two logs, deleted or duplicated spans, whole chunks written twice, overwritten runs.
``check_case(data, directory)`` runs both commands in-process on it and returns None, or what went wrong (a crash,
a wrong exit status, an output the ``mcap`` library cannot read, a message written twice, a temporary file left
behind).
"""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path


def make_logs(directory: Path) -> list[bytes]:
    """Two small real logs (several zstd chunks, metadata, events), as the recorder writes them."""
    from aiko.log import McapRecorder
    from tests.aiko.log._channels import SERIES, SLOW_SERIES

    logs = []
    for index, compression in enumerate(("zstd", "none")):
        path = directory / f"seed{index}.mcap"
        with McapRecorder(path, {"robot": "aiko", "run": index}, compression=compression, chunk_size_bytes=1024) as rec:
            rec.event("start", 1_000, duration_s=0.6)
            for k in range(60):
                rec.record(SERIES, 1_000 + k * 10_000_000, {"k": k, "angle_h_rad": [0.01 * k] * 4})
                if k % 10 == 0:
                    rec.record(SLOW_SERIES, 1_000 + k * 10_000_000, {"k": k // 10, "angle_h_rad": [0.1] * 4})
            rec.event("stop", 1_000 + 60 * 10_000_000)
        logs.append(path.read_bytes())
    return logs


MAGIC_LENGTH = 8
CHUNK_OPCODE = 0x06


def record_spans(data: bytes | bytearray) -> list[tuple[int, int, int]]:
    """(opcode, start, end) of the top-level records, walked by their lengths from the magic until one does not fit."""
    spans, pos = [], MAGIC_LENGTH
    while pos + 9 <= len(data):
        end = pos + 9 + int.from_bytes(data[pos + 1 : pos + 9], "little")
        if end > len(data):
            break
        spans.append((data[pos], pos, end))
        pos = end
    return spans


def duplicate_chunk(rng: random.Random, data: bytearray) -> bytearray:
    """A whole chunk written again, right after itself or after a later record (a writer or a copy gone wrong)."""
    spans = record_spans(data)
    chunks = [(start, end) for op, start, end in spans if op == CHUNK_OPCODE]
    if not chunks:
        return data
    start, end = rng.choice(chunks)
    at = rng.choice([e for _, s, e in spans if s >= start])
    return data[:at] + data[start:end] + data[at:]


def damage(rng: random.Random, logs: list[bytes]) -> bytes:
    data = bytearray(rng.choice(logs))
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(
            ("flip", "flip", "flips", "truncate", "splice", "delete", "duplicate", "duplicate chunk", "overwrite")
        )
        n = len(data)
        if n == 0:
            break
        if kind == "duplicate chunk":
            data = duplicate_chunk(rng, data)
        elif kind == "flip":
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8)
        elif kind == "flips":
            for _ in range(rng.randint(2, 20)):
                i = rng.randrange(n)
                data[i] ^= 1 << rng.randrange(8)
        elif kind == "truncate":
            del data[rng.randrange(n) :]
        elif kind == "splice":
            other = rng.choice(logs)
            data = data[: rng.randrange(n)] + other[rng.randrange(len(other)) :]
        elif kind == "delete":
            i = rng.randrange(n)
            del data[i : i + rng.randint(1, 200)]
        elif kind == "duplicate":
            i = rng.randrange(n)
            data[i:i] = data[i : i + rng.randint(1, 300)]
        else:
            i = rng.randrange(n)
            span = rng.randint(1, 64)
            data[i : i + span] = bytes(rng.randrange(256) for _ in range(span))
    return bytes(data)


def check_case(data: bytes, directory: Path) -> str | None:
    """Run `aiko log info` and `aiko log recover` on ``data``; None if both behaved, else what went wrong."""
    from mcap.reader import make_reader

    from aiko.cli import main

    source = directory / "case.mcap"
    out = directory / "case.recovered.mcap"
    source.write_bytes(data)
    out.unlink(missing_ok=True)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            info = main(["log", "info", str(source), "--json"])
        except BaseException as exc:  # noqa: BLE001 - that is what we look for
            return f"info raised {type(exc).__name__}: {exc}"
        info_err = err.getvalue()
    if info not in (0, 2):
        return f"info exit {info}: {info_err.strip()}"
    if info == 2 and info_err.count("\n") != 1:
        return f"info exit 2 without exactly one line: {info_err!r}"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            status = main(["log", "recover", str(source), "--out", str(out), "--json"])
        except BaseException as exc:  # noqa: BLE001
            return f"recover raised {type(exc).__name__}: {exc}"
        recover_err = err.getvalue()
    leftovers = [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]
    if leftovers:
        return f"temporary files left: {leftovers}"
    if status == 2:
        return None if not out.exists() else "recover failed but left an output"
    if status != 0:
        return f"recover exit {status}: {recover_err.strip()}"
    try:
        with open(out, "rb") as fh:
            reader = make_reader(fh)
            summary = reader.get_summary()
            count = sum(1 for _ in reader.iter_messages())
    except Exception as exc:  # noqa: BLE001
        return f"the mcap library cannot read the recovered file: {type(exc).__name__}: {exc}"
    if summary is None or summary.statistics is None or summary.statistics.message_count != count:
        return "recovered file has no consistent summary"
    with open(out, "rb") as fh:
        keys = [(c.id, m.sequence, m.log_time, m.data) for _, c, m in make_reader(fh).iter_messages()]
    if len(set(keys)) != len(keys):
        return f"recovered file holds {len(keys) - len(set(keys))} duplicate messages"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if main(["log", "info", str(out)]) != 0:
            return "aiko log info refuses the recovered file"
    return None
