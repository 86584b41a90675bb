"""Write → read round trip of the experiment log: identical values and timestamps, readable by mcap."""

import json
import math
import time

import numpy as np
import pytest
from mcap.reader import make_reader

from aiko.core.events import events_json_schema
from aiko.core.messages import Channel, Message, SchemaError, number
from aiko.core.mocap import MOCAP_CHANNEL
from aiko.log import LogReader, LogWriteError, McapRecorder
from aiko.robots.aiko.joints import FEEDBACK_CHANNEL, REFERENCES_CHANNEL

from ._channels import COUNTER, MIXED


def _feedback(rng, k, n):
    return {
        "t_s": 0.01 * k,
        "angle_h_rad": rng.normal(size=n),
        "angle_v_rad": rng.normal(size=n),
        "rate_h_rad_s": rng.normal(size=n),
        "rate_v_rad_s": rng.normal(size=n),
        "status": rng.integers(0, 32, size=n).astype(np.uint8),
    }


def _mocap(position_m, occluded):
    return {"capture_t_ns": 1, "latency_s": 0.0, "frame": 1, "source": "test", "names": ["link6"],
            "position_m": position_m, "quaternion_wxyz": np.ones((1, 4)), "occluded": [occluded]}  # fmt: skip


def test_round_trip_values_and_timestamps_are_identical(tmp_path):
    rng = np.random.default_rng(7)
    path = tmp_path / "run.mcap"
    n = 10
    sent = []
    t0 = 123_456_789_012_345
    with McapRecorder(path, metadata={"experiment": "sidewinding.toml", "robot": {"n_links": 11}}) as rec:
        rec.event("start", t0, duration_s=2.0)
        for k in range(200):
            payload = _feedback(rng, k, n)
            t_ns = t0 + k * 10_000_000 + int(rng.integers(0, 1000))  # jittered stamps, must survive exactly
            rec.record(FEEDBACK_CHANNEL, t_ns, payload)
            sent.append((t_ns, payload))
        rec.event("stop", t0 + 2_000_000_000)
    log = LogReader(path)
    assert not log.truncated
    fb = log.channel("/joint_feedback")
    np.testing.assert_array_equal(fb.t_ns, [t for t, _ in sent])
    assert fb.t_ns.dtype == np.int64
    for name in ("angle_h_rad", "angle_v_rad"):
        assert fb[name].shape == (200, n)
        # bit-exact: JSON float repr round-trips float64
        np.testing.assert_array_equal(fb[name], np.stack([p[name] for _, p in sent]))
    np.testing.assert_array_equal(fb["status"], np.stack([p["status"] for _, p in sent]))
    assert fb["status"].dtype == np.int64
    np.testing.assert_array_equal(fb["t_s"], [p["t_s"] for _, p in sent])
    assert [(e.kind, e.t_ns) for e in log.events()] == [("start", t0), ("stop", t0 + 2_000_000_000)]
    assert log.events("start")[0].fields == {"duration_s": 2.0}
    meta = log.run_metadata
    assert meta["experiment"] == "sidewinding.toml" and meta["robot"] == {"n_links": 11}
    for key in ("software_version", "host", "wall_clock_start_utc", "monotonic_start_ns"):
        assert key in meta


def test_nan_is_logged_as_null_and_read_back_as_nan(tmp_path):
    path = tmp_path / "nan.mcap"
    with McapRecorder(path) as rec:
        rec.record(MOCAP_CHANNEL, 1, _mocap(np.array([[np.nan, np.nan, np.nan]]), True))
        rec.record(MOCAP_CHANNEL, 2, _mocap(np.array([[0.1, 0.2, 0.3]]), False))
        rec.record(MOCAP_CHANNEL, 3, _mocap([[0.4, np.inf, 0.6]], False))
    with open(path, "rb") as fh:  # standard JSON on disk (Foxglove/PlotJuggler parse it): a vector is an object
        raw = [json.loads(m.data) for _, _, m in make_reader(fh).iter_messages(topics=["/mocap"])]
    assert raw[0]["position_m"] == [{"x": None, "y": None, "z": None}]
    assert raw[1]["position_m"] == [{"x": 0.1, "y": 0.2, "z": 0.3}]
    mocap = LogReader(path).channel("/mocap")
    assert mocap["position_m"].shape == (3, 1, 3)  # the (k, 3) array the writer had, per message
    assert np.isnan(mocap["position_m"][0]).all()
    np.testing.assert_array_equal(mocap["position_m"][1], [[0.1, 0.2, 0.3]])
    assert math.isnan(mocap["position_m"][2, 0, 1])  # inf is not representable either: logged as null → NaN
    np.testing.assert_array_equal(mocap["occluded"], [[True], [False], [False]])


def test_the_schema_in_the_file_is_the_declaration_and_mcap_reads_the_complete_file(tmp_path):
    path = tmp_path / "s.mcap"
    refs = {"t_s": 0.5, "angle_h_rad": [0.1, 0.2], "angle_v_rad": [0.0, 0.0], "rate_h_rad_s": [0.0, 0.0],
            "rate_v_rad_s": [0.0, 0.0]}  # fmt: skip
    with McapRecorder(path) as rec:
        rec.record(REFERENCES_CHANNEL, 5, refs)
    with open(path, "rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count == 1
        schema, channel, message = next(reader.iter_messages(topics=["/references"]))
        schemas = {s.name: json.loads(s.data) for s in summary.schemas.values()}
    assert schema.encoding == "jsonschema" and channel.message_encoding == "json"
    assert schema.name == "aiko.JointReferences"
    assert json.loads(schema.data) == REFERENCES_CHANNEL.message.json_schema()
    assert schemas["aiko.Event"] == events_json_schema()  # /events is declared from the start, every kind in it
    assert json.loads(message.data) == refs
    arrays = LogReader(path).channel("/references")
    np.testing.assert_array_equal(arrays["angle_h_rad"], [[0.1, 0.2]])


def test_fields_that_come_and_go_become_object_columns(tmp_path):
    path = tmp_path / "h.mcap"
    with McapRecorder(path) as rec:
        rec.record(MIXED, 1, {"a": 1.0, "v": [1.0]})
        rec.record(MIXED, 2, {"a": 2.0, "v": [1.0, 2.0], "b": "late"})
    x = LogReader(path).channel("/test/mixed")
    np.testing.assert_array_equal(x["a"], [1.0, 2.0])
    assert x["v"].dtype == object and x["v"][1] == [1.0, 2.0]
    assert list(x["b"]) == [None, "late"]


def test_the_recorder_refuses_what_is_not_declared_and_writes_none_of_it(tmp_path):
    path = tmp_path / "refused.mcap"
    rec = McapRecorder(path)
    with pytest.raises(SchemaError, match="'/x' has no declared schema"):
        rec.record("/x", 1, {"a": 1.0})  # a bare topic: nothing says what it holds
    with pytest.raises(SchemaError, match="field 'extra' is not declared"):
        rec.record(COUNTER, 1, {"k": 1, "extra": 2})
    with pytest.raises(SchemaError, match="missing field"):
        rec.record(COUNTER, 1, {})
    with pytest.raises(SchemaError, match="expected an integer, got float"):
        rec.record(COUNTER, 1, {"k": 1.5})
    with pytest.raises(SchemaError, match=r"/test/mixed\.v: expected a 1-D array"):
        rec.record(MIXED, 1, {"a": 1.0, "v": [[1.0, 2.0]]})  # arrays of arrays: the viewers reject them
    with pytest.raises(SchemaError, match="event kind 'operator_said' is not declared"):
        rec.event("operator_said", 1, text="go")
    with pytest.raises(SchemaError, match="event 'deadline_missed': field 'why' is not declared"):
        rec.event("deadline_missed", 1, task="t", count=1, gap_s=0.1, late_s=0.1, run_t_s=0.9, resume_t_s=1.0, why="?")
    with pytest.raises(SchemaError, match="event 'deadline_missed': missing field"):
        rec.event("deadline_missed", 1, task="t")
    with pytest.raises(SchemaError, match="'kind' is not declared"):
        rec.event("start", 1, duration_s=1.0, kind="x")
    with pytest.raises(SchemaError, match="/events takes events"):
        rec.record(Channel("/events", Message("test.Events", "not events", {"k": number("k")})), 1, {"k": 1.0})
    twin = Channel("/test/counter", Message("test.Twin", "another type on the same topic", {"k": number("k")}))
    rec.record(COUNTER, 1, {"k": 1})
    with pytest.raises(SchemaError, match="already in this log as test.Counter"):
        rec.record(twin, 2, {"k": 2.0})
    rec.close()
    log = LogReader(path)
    assert log.topics == ["/events", "/test/counter"]
    assert len(log.messages("/test/counter")) == 1 and log.events() == []


def test_a_closed_recorder_raises_a_specific_error(tmp_path):
    rec = McapRecorder(tmp_path / "e.mcap")
    rec.close()
    rec.close()  # twice is fine
    with pytest.raises(LogWriteError, match="closed"):
        rec.record(COUNTER, 2, {"k": 1})


def test_flush_interval_makes_data_visible_before_close(tmp_path):
    """While the writer is still open, another reader sees everything recorded before the last flush."""
    path = tmp_path / "live.mcap"
    rec = McapRecorder(path, flush_interval_s=10.0)  # no periodic flush during the test: only the explicit one
    for k in range(50):
        rec.record(COUNTER, k, {"k": k})
    rec.flush()
    partial = LogReader(path)
    assert partial.truncated  # no footer yet
    np.testing.assert_array_equal(partial.channel("/test/counter")["k"], np.arange(50))
    rec.close()
    assert not LogReader(path).truncated


def test_log_times_are_unix_epoch_and_the_reader_gives_the_run_clock_back(tmp_path):

    path = tmp_path / "epoch.mcap"
    t0 = time.monotonic_ns()
    before_ns = time.time_ns()
    with McapRecorder(path) as rec:
        for k in range(3):
            rec.record(COUNTER, t0 + k * 10_000_000, {"k": k})
    after_ns = time.time_ns()
    with open(path, "rb") as fh:
        times = [(m.log_time, m.publish_time) for _, _, m in make_reader(fh).iter_messages(topics=["/test/counter"])]
    # on the wall clock (Foxglove shows today's date), 10 ms apart exactly as stamped: one offset, no jumps
    assert before_ns - 1_000_000_000 <= times[0][0] <= after_ns + 1_000_000_000
    assert [lt for lt, _ in times] == [pt for _, pt in times]
    assert np.diff([lt for lt, _ in times]).tolist() == [10_000_000, 10_000_000]
    log = LogReader(path)
    assert log.channel("/test/counter").t_ns.tolist() == [t0, t0 + 10_000_000, t0 + 20_000_000]
    assert log.epoch_ns(t0) == times[0][0]
    assert log.run_metadata["log_time_offset_ns"] == log.log_time_offset_ns
    from datetime import datetime

    from aiko.log.info import log_info

    start = datetime.fromisoformat(log_info(log)["start_utc"]).timestamp()
    assert abs(start - times[0][0] / 1e9) < 1e-3


def test_a_log_from_before_epoch_log_times_reads_as_it_always_did(tmp_path):
    from mcap.writer import Writer

    from aiko.log.recorder import encode_metadata

    path = tmp_path / "old.mcap"
    with open(path, "wb") as fh:  # what the recorder wrote before: monotonic log times, no offset in aiko.run
        writer = Writer(fh)
        writer.start(profile="", library="aiko-stack 0.1.0")
        writer.add_metadata("aiko.run", encode_metadata({"experiment": "old.toml", "monotonic_start_ns": 5_000}))
        schema = writer.register_schema(name="aiko.references", encoding="jsonschema", data=b"{}")
        channel = writer.register_channel(topic="/references", message_encoding="json", schema_id=schema)
        for k in range(3):
            t = 5_000 + k * 100_000_000
            writer.add_message(channel_id=channel, log_time=t, publish_time=t, data=json.dumps({"k": k}).encode())
        writer.finish()
    log = LogReader(path)
    assert log.log_time_offset_ns == 0
    assert log.channel("/references").t_ns.tolist() == [5_000, 100_005_000, 200_005_000]
    assert log.epoch_ns(5_000) == 5_000
    from aiko.log.info import log_info

    assert log_info(log)["start_utc"] is None  # no wall-clock start to show
