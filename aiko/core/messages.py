"""Declared message types: each logged channel's schema, written once, beside the type it logs.

A logged message is a dict of numbers, strings, booleans and arrays (``as_payload()`` of a command, an
observation, a sensor sample). Its schema is declared once with the field builders below, as a :class:`Message`
(a name, what it is, its fields), and a topic is bound to it with :class:`Channel`::

    JOINT_FEEDBACK = Channel("/joint_feedback", Message("aiko.JointFeedback", "what the joint modules report", {
        "t_s": number("run time of the reading", "s"),
        "angle_h_rad": numbers("measured yaw angles, joint 1 first", "rad"),
        ...
    }))
    recorder.record(JOINT_FEEDBACK, t_ns, feedback.as_payload())

The MCAP recorder, the live Foxglove server and the readers take the JSON schema from the declaration
(:meth:`Message.json_schema`); nothing is inferred from a channel's first message. The recorders refuse a channel
that was not declared, a field that was not declared, a missing field and a value of the wrong type
(:class:`SchemaError`), so a log always says what it holds.

The schemas stay inside the JSON-schema subset that Foxglove Studio's and Lichtblick's parser accepts
(``parseJsonSchema`` of ``@foxglove/mcap-support``; ``tests/aiko/log/test_viewer_parser.py`` runs that very code
over every log kind): one ``type`` per field (no ``["number", "null"]``), arrays of numbers, integers, strings,
booleans or objects (never arrays of arrays), every object listing its properties. Two conventions keep numeric
data inside it:

* **NaN is written as null.** JSON has no NaN; a number that is NaN (an occluded marker, a sensor not yet heard)
  is written as ``null`` in a field whose type is ``"number"``, and the readers turn it back into NaN. Foxglove's
  and PlotJuggler's plots draw no point for it (a gap), which is what a missing sample is. Where a reason is known a
  validity field says it (``occluded``, ``visible``, ``status``).
* **Vectors are objects.** A (k, 3) array, e.g. the positions of k links, is declared with :func:`vectors` and
  logged as an array of ``{"x": …, "y": …, "z": …}`` objects (plotted as ``/sim/link_poses.position_m[5].z``);
  the payload in memory keeps its (k, 3) list or array and the readers give it back as one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

JSON_SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"
NAN_NOTE = "A number that is NaN (not measured) is written as null."


class SchemaError(ValueError):
    """A record does not match its declared schema, or its channel or event kind was never declared."""


_FLOAT_TYPES = (float, int, np.floating, np.integer)


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _FLOAT_TYPES):
        raise SchemaError(f"{where}: expected a number, got {type(value).__name__} {value!r:.60}")
    v = float(value)
    return v if math.isfinite(v) else None


_NOT_NUMBERS = (str, bytes, bool, np.bool_)  # what np.array(..., dtype=float) would silently turn into numbers


def _float_array(value: Any, where: str, ndim: int) -> np.ndarray:
    """``value`` (a list or a numpy array) as float64 of ``ndim`` dimensions; None/NaN stay NaN."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fiu":
            raise SchemaError(f"{where}: expected numbers, got a numpy array of dtype {value.dtype}")
        array = value.astype(np.float64, copy=False)
    elif isinstance(value, (list, tuple)):
        try:
            array = np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise SchemaError(f"{where}: expected numbers, got {value!r:.80}") from None
        # numpy turned numeric strings and booleans into floats: refuse them. The element types are collected in C
        # (map, set) and only the few distinct ones checked: a per-element isinstance was half of a record's cost.
        if array.ndim == ndim:  # otherwise refused below; 2-D here means rows of equal length
            elements = value if ndim == 1 else itertools.chain.from_iterable(value)
            if any(issubclass(t, _NOT_NUMBERS) for t in set(map(type, elements))):
                raise SchemaError(f"{where}: expected numbers, got {value!r:.80}")
    else:
        raise SchemaError(f"{where}: expected a list of numbers, got {type(value).__name__}")
    if array.ndim != ndim and not (array.size == 0 and ndim == 2):
        raise SchemaError(f"{where}: expected a {ndim}-D array, got shape {array.shape}")
    return array


def _listed(array: np.ndarray) -> list[Any]:
    """A float array as nested lists, NaN and ±inf as None."""
    if np.isfinite(array).all():
        return list(array.tolist())  # the common case, ~3x faster than through an object array
    listed = array.astype(object)  # Python floats, room for None
    listed[~np.isfinite(array)] = None
    return list(listed.tolist())


def _finite_floats(values: Iterable[Any], again: Iterable[Any]) -> bool:
    """Every value (``values`` and ``again``: the same values, iterated twice) a finite Python float.

    The fast path of a payload whose producer already called ``tolist()``: such a list is logged as it is, without
    the round trip through a numpy array (6 numbers: 6.5 -> 1.0 us). Anything else (ints, numpy scalars, None, NaN,
    strings) takes the checked path."""
    return set(map(type, values)) == {float} and all(map(math.isfinite, again))


def _row_objects(axes: tuple[str, ...], rows: list[list[Any]]) -> list[dict[str, Any]]:
    """Rows (checked to have one value per axis) as ``{axis: value}`` objects. The literal dict of the two- and
    three-axis cases is 4x faster than ``dict(zip(...))`` (46 -> 11 us for 40 points); a rod's centreline is logged
    at every sample, so this is a visible share of a bench run's loop."""
    if len(axes) == 3:
        a, b, c = axes
        return [{a: x, b: y, c: z} for x, y, z in rows]
    if len(axes) == 2:
        a, b = axes
        return [{a: x, b: y} for x, y in rows]
    if len(axes) == 6:  # strains [kappa; eps], wrenches
        a, b, c, d, e, f = axes
        return [{a: x, b: y, c: z, d: u, e: v, f: w} for x, y, z, u, v, w in rows]
    return [dict(zip(axes, row, strict=True)) for row in rows]


@dataclass(frozen=True)
class Field:
    """One field of a message: its JSON-schema type, what it means, its unit, and how a value is encoded."""

    kind: str
    doc: str
    unit: str = ""
    optional: bool = False
    axes: tuple[str, ...] = ()
    fields: Mapping[str, Field] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        doc = f"{self.doc} [{self.unit}]" if self.unit else self.doc
        scalar = {"number": "number", "integer": "integer", "string": "string", "boolean": "boolean"}
        if self.kind in scalar:
            return {"type": scalar[self.kind], "description": doc}
        if self.kind in ("numbers", "integers", "strings", "booleans"):
            return {"type": "array", "items": {"type": scalar[self.kind[:-1]]}, "description": doc}
        if self.kind == "vectors":
            item = _object_schema({axis: Field("number", axis) for axis in self.axes}, "")
            return {"type": "array", "items": item, "description": doc}
        if self.kind == "record":
            return _object_schema(self.fields, doc)
        if self.kind == "records":
            return {"type": "array", "items": _object_schema(self.fields, ""), "description": doc}
        raise AssertionError(self.kind)

    def encode(self, value: Any, where: str) -> Any:
        kind = self.kind
        if kind == "number":
            return _number(value, where)
        if kind == "integer":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise SchemaError(f"{where}: expected an integer, got {type(value).__name__} {value!r:.60}")
            return int(value)
        if kind == "string":
            if not isinstance(value, str):
                raise SchemaError(f"{where}: expected a string, got {type(value).__name__} {value!r:.60}")
            return value
        if kind == "boolean":
            if not isinstance(value, (bool, np.bool_)):
                raise SchemaError(f"{where}: expected a boolean, got {type(value).__name__} {value!r:.60}")
            return bool(value)
        if kind == "numbers":
            if type(value) is list and _finite_floats(value, value):
                return value
            return _listed(_float_array(value, where, 1))
        if kind == "vectors":
            n = len(self.axes)
            if type(value) is list and value and all(type(row) is list and len(row) == n for row in value):
                if _finite_floats(itertools.chain.from_iterable(value), itertools.chain.from_iterable(value)):
                    return _row_objects(self.axes, value)
            array = _float_array(value, where, 2)
            if array.size == 0:
                return []
            if array.shape[1] != len(self.axes):
                raise SchemaError(f"{where}: expected rows of {len(self.axes)} values ({', '.join(self.axes)}), "
                                  f"got shape {array.shape}")  # fmt: skip
            return _row_objects(self.axes, _listed(array))
        if kind in ("integers", "strings", "booleans"):
            return self._encode_list(value, where)
        if kind == "record":
            return _encode_object(self.fields, value, where)
        if kind == "records":
            if not isinstance(value, (list, tuple)):
                raise SchemaError(f"{where}: expected a list of objects, got {type(value).__name__}")
            return [_encode_object(self.fields, item, f"{where}[{i}]") for i, item in enumerate(value)]
        raise AssertionError(kind)

    def _encode_list(self, value: Any, where: str) -> list[Any]:
        item = Field(self.kind[:-1], self.doc)
        if isinstance(value, np.ndarray):
            allowed = {"integers": "iu", "strings": "U", "booleans": "b"}[self.kind]
            if value.ndim != 1 or value.dtype.kind not in allowed:
                raise SchemaError(f"{where}: expected a 1-D array of {self.kind}, got {value.dtype} {value.shape}")
            return value.tolist()  # type: ignore[no-any-return]
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{where}: expected a list of {self.kind}, got {type(value).__name__}")
        return [item.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]


def _object_schema(fields: Mapping[str, Field], doc: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    if doc:
        out["description"] = doc
    out["properties"] = {name: f.json_schema() for name, f in fields.items()}
    out["required"] = [name for name, f in fields.items() if not f.optional]
    out["additionalProperties"] = False
    return out


def _encode_object(fields: Mapping[str, Field], value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SchemaError(f"{where}: expected an object, got {type(value).__name__}")
    out = {}
    for name, item in value.items():
        spec = fields.get(name)
        if spec is None:
            raise SchemaError(f"{where}: field {name!r} is not declared (declared: {', '.join(fields)})")
        out[name] = spec.encode(item, f"{where}.{name}")
    if len(out) < len(fields):
        missing = [name for name, f in fields.items() if not f.optional and name not in out]
        if missing:
            raise SchemaError(f"{where}: missing field(s) {', '.join(missing)}")
    return out


# -- field builders: what a declaration reads like
def number(doc: str, unit: str = "", *, optional: bool = False) -> Field:
    """A float; NaN is written as null (see the module docstring)."""
    return Field("number", doc, unit, optional)


def integer(doc: str, unit: str = "", *, optional: bool = False) -> Field:
    return Field("integer", doc, unit, optional)


def string(doc: str, *, optional: bool = False) -> Field:
    return Field("string", doc, "", optional)


def boolean(doc: str, *, optional: bool = False) -> Field:
    return Field("boolean", doc, "", optional)


def numbers(doc: str, unit: str = "", *, optional: bool = False) -> Field:
    """A 1-D array of floats (a list or a numpy array); NaN written as null."""
    return Field("numbers", doc, unit, optional)


def integers(doc: str, unit: str = "", *, optional: bool = False) -> Field:
    return Field("integers", doc, unit, optional)


def strings(doc: str, *, optional: bool = False) -> Field:
    return Field("strings", doc, "", optional)


def booleans(doc: str, *, optional: bool = False) -> Field:
    return Field("booleans", doc, "", optional)


def vectors(doc: str, axes: Sequence[str], unit: str = "", *, optional: bool = False) -> Field:
    """A (k, len(axes)) array in memory, logged as k objects ``{axis: value}`` (viewers accept no arrays of
    arrays); the readers give the (k, len(axes)) array back."""
    if len(set(axes)) != len(axes) or not axes:
        raise ValueError(f"vectors: axes must be distinct names, got {axes!r}")
    return Field("vectors", doc, unit, optional, tuple(axes))


def record(doc: str, fields: Mapping[str, Field], *, optional: bool = False) -> Field:
    """A nested object with its own declared fields."""
    return Field("record", doc, "", optional, (), dict(fields))


def records(doc: str, fields: Mapping[str, Field], *, optional: bool = False) -> Field:
    """An array of objects with declared fields (not all plain numbers: that is :func:`vectors`, which readers
    give back as a (k, n) array)."""
    if all(f.kind == "number" for f in fields.values()):
        raise ValueError(f"records {doc!r}: objects of numbers only are vectors; declare them with vectors()")
    return Field("records", doc, "", optional, (), dict(fields))


XYZ = ("x", "y", "z")
WXYZ = ("w", "x", "y", "z")


@dataclass(frozen=True)
class Message:
    """A logged message type: ``name`` (the schema name in the log and live, e.g. ``aiko.JointFeedback``), what it
    is, and its fields (in the order a reader shows them)."""

    name: str
    doc: str
    fields: Mapping[str, Field]

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"message name {self.name!r}: give a dotted name without spaces, e.g. aiko.JointFeedback")

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema written to the log and announced live (draft 2020-12, the viewers' subset)."""
        schema = {"$schema": JSON_SCHEMA_DRAFT, "title": self.name}
        schema.update(_object_schema(self.fields, f"{self.doc} {NAN_NOTE}"))
        return schema

    def encode(self, payload: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """The payload as the log stores it (numpy to lists, NaN to null, vectors to objects), checked against the
        declaration: a field not declared, a required field missing or a value of the wrong type is a
        :class:`SchemaError`."""
        return _encode_object(self.fields, payload, where or self.name)


class Channel(str):
    """A topic bound to its declared message type: ``Channel("/joint_feedback", JOINT_FEEDBACK_MESSAGE)``.

    It *is* the topic string (so every recorder, dict and comparison that takes a topic takes it) and carries its
    ``message``. The MCAP recorder and the live server accept only channels declared this way. Pickled (to the live
    dashboard's process, to a Dask worker) it becomes the plain topic string."""

    message: Message

    def __new__(cls, topic: str, message: Message) -> Channel:
        if not topic.startswith("/"):
            raise ValueError(f"topic {topic!r} must start with '/'")
        if not isinstance(message, Message):
            raise TypeError(f"{topic}: message must be an aiko.core.messages.Message, got {type(message).__name__}")
        self = super().__new__(cls, topic)
        self.message = message
        _DECLARED.setdefault(topic, {})[message.name] = self
        return self

    @property
    def topic(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (self.topic,))

    def __repr__(self) -> str:
        return f"Channel({self.topic!r}, {self.message.name})"


_DECLARED: dict[str, dict[str, Channel]] = {}


def declared_channels() -> list[Channel]:
    """Every channel declared so far in this process (those of the modules imported), by topic and name."""
    return [c for topic in sorted(_DECLARED) for _, c in sorted(_DECLARED[topic].items())]


def find_channel(topic: str, message_name: str | None = None) -> Channel:
    """The declared channel of ``topic`` (and message type ``message_name``, where several types share a topic,
    as the simulators' ``/sim/link_poses``): e.g. to record again what a log holds. Its module must be imported."""
    by_name = _DECLARED.get(str(topic), {})
    if message_name is not None and message_name in by_name:
        return by_name[message_name]
    if message_name is None and len(by_name) == 1:
        return next(iter(by_name.values()))
    known = ", ".join(by_name) or "none (is its module imported?)"
    raise SchemaError(f"no declared channel {topic!r}{f' of type {message_name}' if message_name else ''}; "
                      f"declared types on that topic: {known}")  # fmt: skip


def message_of(channel: str) -> Message:
    """The declared message type of ``channel``, or a :class:`SchemaError` saying how to declare one."""
    message = getattr(channel, "message", None)
    if not isinstance(message, Message):
        raise SchemaError(
            f"channel {channel!r} has no declared schema: record an aiko.core.messages.Channel declared beside its "
            "message type, e.g. Channel('/my/topic', Message('aiko.MyMessage', 'what it is', {...}))"
        )
    return message
