"""Shared test vectors (vectors.json): physical values, raw integers and payloads of every message family.

Both codecs are checked against this one file: Python in tests, C through a host-gcc harness. Regenerate with
``python -m firmware_protocol.vectors`` after editing the DBC (a test fails while the file is stale).
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

from firmware_protocol.codec import MessageLayout, default_codec
from firmware_protocol.dbc import MessageKind

VECTORS_PATH = Path(__file__).with_name("vectors.json")
_SEED = 20260000
_PER_FAMILY_RANDOM = 12


def _raw_value(layout: MessageLayout, name: str, value: float) -> float | int:
    s = next(x for x in layout.signals if x.name == name)
    if s.is_float:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return round((value - s.offset) / s.scale)


def _random_values(layout: MessageLayout, rng: random.Random, mode: str) -> dict[str, float]:
    values = {}
    for s in layout.signals:
        if s.is_float:
            # float32-exact values, so that C (binary32) and Python agree without rounding questions
            values[s.name] = struct.unpack("<f", struct.pack("<f", rng.uniform(-1e4, 1e4)))[0]
        else:
            if mode == "min":
                raw = s.raw_minimum
            elif mode == "max":
                raw = s.raw_maximum
            else:
                raw = rng.randint(s.raw_minimum, s.raw_maximum)
            # the decimal value of the grid point (32767 * 0.05 is 1638.3500000000001 in binary)
            values[s.name] = float(f"{raw * s.scale + s.offset:.12g}")
    return values


def build_vectors() -> list[dict]:
    codec = default_codec()
    rng = random.Random(_SEED)
    vectors = []
    for kind in MessageKind:
        nodes = [0] if kind in codec.scheme.broadcast_ids else list(codec.scheme.node_ids)
        modes = ["min", "max"] + ["random"] * _PER_FAMILY_RANDOM
        if kind is MessageKind.EMERGENCY_STOP:
            modes = ["min"]  # a single valid payload exists
        for i, mode in enumerate(modes):
            node = nodes[i % len(nodes)]
            layout = codec.layout(kind, node)
            values = _random_values(layout, rng, mode)
            if kind is MessageKind.EMERGENCY_STOP:
                values = {"Key": 0xA5}
            frame_id, data = codec.encode(kind, node, values)
            vectors.append(
                {
                    "message": kind.value,
                    "node": node,
                    "frame_id": frame_id,
                    "values": values,
                    "raw": {name: _raw_value(layout, name, v) for name, v in values.items()},
                    "data": data.hex(),
                }
            )
    return vectors


def write_vectors(path: Path = VECTORS_PATH) -> None:
    path.write_text(json.dumps({"seed": _SEED, "vectors": build_vectors()}, indent=1) + "\n")


def load_vectors(path: Path = VECTORS_PATH) -> list[dict]:
    return json.loads(path.read_text())["vectors"]


if __name__ == "__main__":
    write_vectors()
