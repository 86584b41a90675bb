"""Declared message types: the JSON schema a declaration gives, what encoding checks and converts, the channel
registry, and the in-memory recorder refusing what the log would refuse."""

import math
import pickle

import numpy as np
import pytest

from aiko.core.events import EVENT_KINDS, declare_event, encode_event, events_json_schema
from aiko.core.messages import (
    XYZ,
    Channel,
    Message,
    SchemaError,
    boolean,
    find_channel,
    integer,
    integers,
    number,
    numbers,
    record,
    records,
    string,
    vectors,
)
from aiko.core.recording import MemoryRecorder

POSES = Message("test.Poses", "link poses", {
    "t_s": number("time", "s"),
    "position_m": vectors("link centres", XYZ, "m"),
    "ids": integers("link ids"),
    "arm": record("the arm", {"mode": integer("mode"), "stopped": boolean("stopped")}, optional=True),
    "forces": records("per link", {"normal_n": numbers("per obstacle", "N")}, optional=True),
    "label": string("a label", optional=True),
})  # fmt: skip
CHANNEL = Channel("/test/poses", POSES)


def _types(schema):
    """Every "type" in a schema, with the path to it."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "type":
                yield value
            yield from _types(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _types(value)


def test_the_schema_is_in_the_viewers_subset():
    schema = POSES.json_schema()
    assert schema["title"] == "test.Poses" and schema["type"] == "object"
    assert all(isinstance(t, str) for t in _types(schema))  # one type per field: no ["number", "null"]
    props = schema["properties"]
    assert props["position_m"]["items"]["type"] == "object"  # a vector is an object, never an array of arrays
    assert list(props["position_m"]["items"]["properties"]) == ["x", "y", "z"]
    assert props["t_s"] == {"type": "number", "description": "time [s]"}
    assert schema["required"] == ["t_s", "position_m", "ids"] and schema["additionalProperties"] is False
    assert "null" in schema["description"]  # the NaN convention is stated in every schema


def test_encoding_converts_vectors_nan_and_numpy():
    out = POSES.encode({
        "t_s": np.float64(0.5), "position_m": np.array([[1.0, 2.0, 3.0], [np.nan, np.inf, 0.0]]),
        "ids": np.arange(2), "arm": {"mode": np.int64(7), "stopped": np.bool_(False)},
        "forces": [{"normal_n": np.array([1.5, np.nan])}],
    })  # fmt: skip
    assert out == {
        "t_s": 0.5,
        "position_m": [{"x": 1.0, "y": 2.0, "z": 3.0}, {"x": None, "y": None, "z": 0.0}],
        "ids": [0, 1],
        "arm": {"mode": 7, "stopped": False},
        "forces": [{"normal_n": [1.5, None]}],
    }
    assert type(out["arm"]["mode"]) is int and type(out["t_s"]) is float
    assert POSES.encode({"t_s": math.nan, "position_m": [], "ids": []})["t_s"] is None


@pytest.mark.parametrize("axes", [("u", "v"), XYZ, ("a", "b", "c", "d"), ("kx", "ky", "kz", "ex", "ey", "ez")])
def test_plain_float_lists_encode_as_their_arrays_do(axes):
    """Lists of finite floats skip the numpy round trip: the result is the checked path's, for every row width and
    for lists that must take the checked path (NaN, ints, numpy scalars)."""
    message = Message("test.Rows", "rows", {"rows": vectors("rows", axes), "values": numbers("values")})
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(5, len(axes)))
    values = rng.normal(size=7)
    cases = [
        (rows.tolist(), values.tolist()),
        ([[*r[:-1], math.nan] for r in rows.tolist()], [*values.tolist()[:-1], math.inf]),
        ([[1] * len(axes)], [1, 2.5]),
        ([[np.float64(0.25)] * len(axes)], [np.float64(0.5), 0.75]),
    ]
    for listed_rows, listed_values in cases:
        fast = message.encode({"rows": listed_rows, "values": listed_values})
        checked = message.encode({"rows": np.array(listed_rows, dtype=float), "values": np.array(listed_values)})
        assert fast == checked
        assert [list(row) for row in fast["rows"]] == [list(axes)] * len(listed_rows)
        assert all(type(x) is float or x is None for row in fast["rows"] for x in row.values())
    with pytest.raises(SchemaError, match="expected numbers"):
        message.encode({"rows": [[1.0] * (len(axes) - 1) + [True]], "values": []})
    with pytest.raises(SchemaError, match=f"rows of {len(axes)} values"):
        message.encode({"rows": [[1.0] * (len(axes) + 1)], "values": []})


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"t_s": 0.0, "position_m": [], "ids": [], "extra": 1}, "field 'extra' is not declared"),
        ({"t_s": 0.0, "position_m": []}, "missing field"),
        ({"t_s": "0", "position_m": [], "ids": []}, "t_s: expected a number, got str"),
        ({"t_s": True, "position_m": [], "ids": []}, "expected a number, got bool"),
        ({"t_s": 0.0, "position_m": [[1.0, 2.0]], "ids": []}, "rows of 3 values"),
        ({"t_s": 0.0, "position_m": [], "ids": [1.5]}, r"ids\[0\]: expected an integer"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "arm": {"mode": 1}}, r"arm: missing field"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "forces": [{"normal_n": [["x"]]}]}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "label": 3}, "expected a string"),
        # what numpy's float conversion would silently turn into numbers: numeric strings, booleans, bytes
        ({"t_s": 0.0, "position_m": [[1.0, "2", 3.0]], "ids": []}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [[1.0, True, 3.0]], "ids": []}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [(1.0, 2.0, np.bool_(False))], "ids": []}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "forces": [{"normal_n": ["1.5"]}]}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "forces": [{"normal_n": [np.str_("1.5")]}]}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "forces": [{"normal_n": [b"1"]}]}, "expected numbers"),
        ({"t_s": 0.0, "position_m": [], "ids": [], "forces": [{"normal_n": [1.0, np.True_]}]}, "expected numbers"),
    ],
)
def test_encoding_refuses_what_does_not_match(payload, message):
    with pytest.raises(SchemaError, match=message):
        POSES.encode(payload)


def test_declarations_that_the_viewers_would_reject_are_refused_at_declaration():
    with pytest.raises(ValueError, match="vectors"):
        records("numbers only", {"x": number("x"), "y": number("y")})  # that is vectors(): readers give arrays
    with pytest.raises(ValueError, match="distinct"):
        vectors("v", ("x", "x"))
    with pytest.raises(ValueError, match="dotted name"):
        Message("has space", "x", {})
    with pytest.raises(ValueError, match="start with '/'"):
        Channel("no_slash", POSES)


def test_a_channel_is_its_topic_carries_its_type_and_pickles_as_the_topic():
    assert CHANNEL == "/test/poses" and hash(CHANNEL) == hash("/test/poses")
    assert {CHANNEL: 1}["/test/poses"] == 1 and CHANNEL.message is POSES
    assert type(pickle.loads(pickle.dumps(CHANNEL))) is str  # to the dashboard's process: a topic
    assert find_channel("/test/poses") is CHANNEL
    other = Channel("/test/poses", Message("test.OtherPoses", "same topic, another type", {"t_s": number("t")}))
    with pytest.raises(SchemaError, match="declared types on that topic"):
        find_channel("/test/poses")  # two types: the log's schema name says which
    assert find_channel("/test/poses", "test.OtherPoses") is other
    with pytest.raises(SchemaError, match="none"):
        find_channel("/never/declared")


def test_the_memory_recorder_refuses_what_the_log_refuses():
    memory = MemoryRecorder()
    memory.record(CHANNEL, 1, {"t_s": 0.0, "position_m": [[0.0, 0.0, 0.0]], "ids": [1]})
    assert memory.channels["/test/poses"][0][1]["position_m"] == [[0.0, 0.0, 0.0]]  # kept as given
    with pytest.raises(SchemaError, match="no declared schema"):
        memory.record("/test/poses", 2, {"t_s": 0.0})
    with pytest.raises(SchemaError, match="not declared"):
        memory.event("something_new", 3)
    memory.event("deadline_missed", 4, task="feedback", count=2, gap_s=0.02, late_s=0.02, run_t_s=0.09, resume_t_s=0.1)
    assert memory.event_kinds() == ["deadline_missed"]


def test_every_event_kind_is_described_and_a_field_name_keeps_one_type():
    schema = events_json_schema()
    assert schema["title"] == "aiko.Event" and set(schema["properties"]["kind"]["enum"]) == set(EVENT_KINDS)
    by_kind = {branch["if"]["properties"]["kind"]["const"]: branch["then"] for branch in schema["allOf"]}
    assert set(by_kind) == set(EVENT_KINDS)
    missed = by_kind["deadline_missed"]
    assert set(missed["required"]) == {"kind", "task", "count", "gap_s", "late_s", "run_t_s", "resume_t_s"}
    assert missed["properties"]["count"]["type"] == "integer" and missed["additionalProperties"] is False
    assert all(isinstance(t, str) for t in _types({k: v for k, v in schema.items() if k != "allOf"}))
    with pytest.raises(ValueError, match="one field name, one type"):
        declare_event("test_conflict", "a new field, then a count that is a string", test_only=number("x"),
                      count=string("not a number"))  # fmt: skip
    assert "test_conflict" not in EVENT_KINDS and "test_only" not in events_json_schema()["properties"]
    with pytest.raises(ValueError, match="declared twice"):
        declare_event("start", "again")
    assert encode_event("start", {"duration_s": np.float64(2.0)}) == {"kind": "start", "duration_s": 2.0}
