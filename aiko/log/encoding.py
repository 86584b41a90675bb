"""JSON encoding of log payloads, by their declared schemas, and back.

Writing: a record's payload is encoded by its channel's declaration (:meth:`aiko.core.messages.Message.encode`:
checked field by field, numpy to lists, NaN to null, (k, n) vectors to objects) and serialised as compact JSON
(:func:`message_bytes`); an event likewise by its kind (:func:`aiko.core.events.encode_event`). Nothing here
infers a schema.

Reading: :func:`payload_decoder` turns a message read from a file back into the payload its writer had in memory,
using the schema the file itself carries: arrays of number-only objects (our vectors) become (k, n) lists again.
Logs written before schemas were declared (nested arrays, ``["number", "null"]`` unions) need no conversion and read
as they always did. ``null`` stays ``None`` here; the reader's arrays turn it into NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson

from aiko.core.events import encode_event
from aiko.core.messages import SchemaError, message_of

Decoder = Callable[[dict[str, Any]], dict[str, Any]]


class PayloadError(TypeError):
    """A payload holds a value that cannot be logged as JSON."""


def message_bytes(channel: str, payload: Mapping[str, Any]) -> bytes:
    """The logged bytes of one record on a declared channel (a :class:`SchemaError` if it does not match)."""
    return _dumps(message_of(channel).encode(payload, str(channel)))


def event_bytes(kind: str, fields: Mapping[str, Any]) -> bytes:
    """The logged bytes of one ``/events`` message (a :class:`SchemaError` for an undeclared kind or field)."""
    return _dumps(encode_event(kind, fields))


def _dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of an encoded payload (Python scalars, lists and str-keyed dicts: what
    :meth:`aiko.core.messages.Message.encode` and :func:`aiko.core.events.encode_event` return).

    orjson, not the standard library: a bench run logs a 40-point centreline every sample, and ``json.dumps`` of it
    took 84 us against orjson's 10.5 (the whole bench loop: ~10 % of its time). Floats are written as the shortest
    text that reads back to the same double (as ``repr`` does), so a log reads back bit for bit. The encoders have
    already turned NaN into None; orjson would write a stray one as null, never as the invalid ``NaN``."""
    return orjson.dumps(value)


def schema_bytes(schema: Mapping[str, Any]) -> bytes:
    """A JSON schema as the log file and the live server carry it (the same bytes in both)."""
    return json.dumps(schema).encode()


def decode(data: bytes) -> dict[str, Any]:
    return json.loads(data)  # type: ignore[no-any-return]


def to_jsonable(value: Any, path: str = "payload") -> Any:
    """Convert numpy scalars/arrays to Python values, NaN/inf to None; reject anything else non-JSON.

    For payloads that never pass a recorder (a run kept in memory, read back as a log: ``LogReader.from_records``)
    and for metadata, which are free-form."""
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
        if value.dtype.kind == "c":
            raise PayloadError(f"{path}: complex arrays cannot be logged; split real and imaginary parts")
        if value.dtype.kind == "f":
            out = value.astype(np.float64, copy=False)
            if np.all(np.isfinite(out)):
                return out.tolist()
            listed = out.astype(object)  # NaN and ±inf as None (JSON null)
            listed[~np.isfinite(out)] = None
            return listed.tolist()
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


def payload_decoder(schema: Mapping[str, Any]) -> Decoder | None:
    """A function turning a message of this (file's) JSON schema back into its in-memory payload, or None when
    the message is already that (no vectors: every log written before declared schemas)."""
    return _object_decoder(schema)


def _vector_axes(schema: Any) -> list[str] | None:
    """The axes of a vectors field: an array whose items are objects of numbers only."""
    if not isinstance(schema, Mapping) or schema.get("type") != "array":
        return None
    items = schema.get("items")
    if not isinstance(items, Mapping) or items.get("type") != "object":
        return None
    props = items.get("properties")
    if not isinstance(props, Mapping) or not props:
        return None
    if all(isinstance(p, Mapping) and p.get("type") == "number" for p in props.values()):
        return [str(k) for k in props]
    return None


def _object_decoder(schema: Any) -> Decoder | None:
    if not isinstance(schema, Mapping):
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    steps: list[tuple[str, Callable[[Any], Any]]] = []
    for name, prop in props.items():
        axes = _vector_axes(prop)
        if axes is not None:
            steps.append((name, _rows(axes)))
            continue
        if not isinstance(prop, Mapping):
            continue
        if prop.get("type") == "object":
            inner = _object_decoder(prop)
            if inner is not None:
                steps.append((name, _each_object(inner)))
        elif prop.get("type") == "array":
            inner = _object_decoder(prop.get("items"))
            if inner is not None:
                steps.append((name, _each_item(inner)))
    if not steps:
        return None

    def decode_object(message: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(message, dict):
            return message
        for name, convert in steps:
            if name in message:
                message[name] = convert(message[name])
        return message

    return decode_object


def _rows(axes: list[str]) -> Callable[[Any], Any]:
    def rows(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [[item.get(a) for a in axes] if isinstance(item, dict) else item for item in value]

    return rows


def _each_object(inner: Decoder) -> Callable[[Any], Any]:
    return lambda value: inner(value) if isinstance(value, dict) else value


def _each_item(inner: Decoder) -> Callable[[Any], Any]:
    return lambda value: [inner(v) if isinstance(v, dict) else v for v in value] if isinstance(value, list) else value


__all__ = [
    "Decoder",
    "PayloadError",
    "SchemaError",
    "decode",
    "event_bytes",
    "message_bytes",
    "payload_decoder",
    "schema_bytes",
    "to_jsonable",
]
