"""JSON encoding of log payloads and the JSON schema that describes them.

Payloads are plain dicts of numbers, strings, booleans, numpy arrays and nested dicts. JSON cannot carry NaN,
yet occluded motion-capture samples *are* NaN, so non-finite floats are written as ``null`` (valid JSON that
Foxglove Studio and PlotJuggler accept) and the reader turns ``null`` back into NaN in numeric fields.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


class PayloadError(TypeError):
    """A payload holds a value that cannot be logged as JSON."""


def to_jsonable(value: Any, path: str = "payload") -> Any:
    """Convert numpy scalars/arrays to Python values, NaN/inf to None; reject anything else non-JSON."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            if value.dtype.kind == "c":
                raise PayloadError(f"{path}: complex arrays cannot be logged; split real and imaginary parts")
            out = value.astype(np.float64, copy=False)
            if np.all(np.isfinite(out)):
                return out.tolist()
            return _nan_to_none(out.tolist())
        if value.dtype.kind in "iub":
            return value.tolist()
        if value.dtype.kind in "US":
            return value.astype(str).tolist()
        raise PayloadError(f"{path}: numpy array of dtype {value.dtype} cannot be logged")
    if isinstance(value, Mapping):
        out_dict = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(f"{path}: keys must be strings, got {key!r}")
            out_dict[key] = to_jsonable(item, f"{path}.{key}")
        return out_dict
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise PayloadError(
        f"{path}: value of type {type(value).__name__} cannot be logged "
        "(allowed: numbers, str, bool, None, numpy arrays, lists, dicts)"
    )


def _nan_to_none(values: Any) -> Any:
    if isinstance(values, list):
        return [_nan_to_none(v) for v in values]
    return values if math.isfinite(values) else None


def encode(payload: Mapping[str, Any]) -> bytes:
    """Payload dict → compact UTF-8 JSON bytes (floats keep all 17 significant digits)."""
    return json.dumps(to_jsonable(payload), separators=(",", ":"), allow_nan=False).encode()


def decode(data: bytes) -> dict[str, Any]:
    return json.loads(data)


def infer_schema(value: Any) -> dict[str, Any]:
    """JSON schema (draft 2020-12 subset) describing ``value``, used when a channel is first recorded."""
    value = to_jsonable(value)
    return _schema_of(value)


def _schema_of(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float) or value is None:
        # A float may later be NaN (→ null); None alone most likely stands for a NaN float.
        return {"type": ["number", "null"]}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        items = _schema_of(value[0]) if value else {"type": ["number", "null"]}
        if any(isinstance(v, float) or v is None for v in value) and items.get("type") == "integer":
            items = {"type": ["number", "null"]}
        return {"type": "array", "items": items}
    if isinstance(value, dict):
        return {"type": "object", "properties": {k: _schema_of(v) for k, v in value.items()}}
    raise PayloadError(f"no JSON schema for {type(value).__name__}")
