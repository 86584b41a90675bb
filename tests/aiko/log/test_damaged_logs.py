"""`aiko log recover` and `aiko log info` on damaged logs: never a crash, a readable output, atomic writes.

A few hundred hypothesis cases here; `benchmarks/log_fuzz.py` runs 10 000."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader

from aiko.log import LogReader, McapRecorder, recover
from aiko.log.reader import LogReadError
from tests.aiko.log.fuzz_cases import check_case, damage, make_logs

from ._channels import COUNTER, OTHER_COUNTER
from ._cli import run_cli


class _Logs(list):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing case
        return f"<{len(self)} seed logs>"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return _Logs(make_logs(tmp_path_factory.mktemp("seed")))


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_recover_and_info_never_crash_on_damaged_logs(logs, tmp_path_factory, seed):
    directory = tmp_path_factory.mktemp("case")
    problem = check_case(damage(random.Random(seed), logs), directory)
    assert problem is None, problem


def _log_with_two_channels(path):
    with McapRecorder(path, chunk_size_bytes=512) as rec:
        for k in range(50):
            rec.record(COUNTER, 1_000 + k, {"k": k})
            rec.record(OTHER_COUNTER, 1_000 + k, {"k": k})


def test_a_flipped_chunk_loses_that_chunk_only(tmp_path, capsys):
    path = tmp_path / "x.mcap"
    _log_with_two_channels(path)
    data = bytearray(path.read_bytes())
    # the compression name of the second chunk (found, not at a fixed offset: the schemas before the first chunk
    # grow whenever an event kind gains a field)
    chunks = [i for i in range(len(data)) if data.startswith(b"zstd", i)]
    assert len(chunks) > 3
    data[chunks[1] + 40] ^= 0x10  # inside its compressed records
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(bytes(data))
    assert run_cli(["log", "info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged" in err and "aiko log recover" in err
    result = recover(bad, tmp_path / "fixed.mcap")
    assert result.was_truncated and result.error
    fixed = LogReader(result.output)
    a, b = fixed.channel("/test/counter")["k"], fixed.channel("/test/other")["k"]
    assert 0 < len(a) < 50 and list(a) == sorted(set(a))  # a gap where the chunk was, nothing invented
    assert set(a) <= set(range(50)) and set(b) <= set(range(50))


def test_messages_on_an_unknown_channel_are_dropped_and_counted(tmp_path):
    path = tmp_path / "x.mcap"
    _log_with_two_channels(path)
    data = path.read_bytes()
    # an uncompressed copy makes the channel ids easy to damage: rewrite through recover with no compression
    from mcap.writer import CompressionType, Writer

    plain = tmp_path / "plain.mcap"
    with open(plain, "wb") as fh:
        w = Writer(fh, compression=CompressionType.NONE)
        w.start()
        w.register_channel("/a", "json", 0)
        w.add_message(1, 1, b'{"k": 0}', 1)
        w.add_message(7, 2, b'{"k": 1}', 2)  # channel 7 is never defined
        w.add_message(1, 3, b'{"k": 2}', 3)
        w.finish()
    assert data  # the zstd log above is only the seed for the fixture shape
    with pytest.raises(LogReadError, match="channel id 7, which the file never defines"):
        LogReader(plain)
    result = recover(plain, tmp_path / "fixed.mcap")
    assert result.messages == 2 and result.dropped == {"message on unknown channel id 7": 1}
    assert list(LogReader(result.output).channel("/a")["k"]) == [0, 2]


def test_a_failed_recover_leaves_no_output(tmp_path):
    bad = tmp_path / "noise.mcap"
    bad.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(5000)))
    with pytest.raises(LogReadError, match="no readable MCAP records"):
        recover(bad, tmp_path / "out.mcap")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["noise.mcap"]


def test_recover_replaces_its_output_atomically(tmp_path, logs, monkeypatch):
    source = tmp_path / "a.mcap"
    source.write_bytes(logs[0])
    out = tmp_path / "out.mcap"
    out.write_bytes(b"previous")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", broken)
    with pytest.raises(Exception, match="No space left"):
        recover(source, out)
    assert out.read_bytes() == b"previous"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mcap", "out.mcap"]
    monkeypatch.undo()
    recover(source, out)
    with open(out, "rb") as fh:
        assert make_reader(fh).get_summary().statistics.message_count == 68


def _with_a_chunk_written_twice(path, out, which: int = 1):
    """The log with its ``which``-th chunk copied right after itself (a writer or a copy gone wrong)."""
    from tests.aiko.log.fuzz_cases import CHUNK_OPCODE, record_spans

    data = path.read_bytes()
    start, end = [(s, e) for op, s, e in record_spans(data) if op == CHUNK_OPCODE][which]
    out.write_bytes(data[:end] + data[start:end] + data[end:])
    return start, end


def test_a_chunk_written_twice_is_read_once_and_reported(tmp_path, capsys):
    """Issue 26: one chunk repeated made `aiko log info` count its messages twice and `recover` write them twice."""
    import json

    path = tmp_path / "x.mcap"
    _log_with_two_channels(path)
    clean = LogReader(path)
    bad = tmp_path / "twice.mcap"
    start, end = _with_a_chunk_written_twice(path, bad)
    reader = LogReader(bad)
    for topic in (COUNTER, OTHER_COUNTER):
        assert reader.messages(topic) == clean.messages(topic)  # once each, in order
    assert reader.duplicates.messages > 0
    assert reader.duplicates.describe() == [
        f"the chunk at byte {end} repeats {reader.duplicates.messages} messages of the chunk at byte {start}"
    ]
    assert run_cli(["log", "info", str(bad), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["messages"] == 100  # 50 on each channel: as in the clean log
    assert info["duplicates"]["messages"] == reader.duplicates.messages
    assert run_cli(["log", "info", str(bad)]) == 0
    assert f"found {reader.duplicates.messages} duplicate messages, counted once" in capsys.readouterr().out
    result = recover(bad, tmp_path / "fixed.mcap")
    assert result.messages == clean_count(path) and result.dropped == {"duplicate message": reader.duplicates.messages}
    assert f"the chunk at byte {end} repeats" in result.error
    with open(result.output, "rb") as fh:
        keys = [(c.topic, m.sequence) for _, c, m in make_reader(fh).iter_messages()]
    assert len(keys) == len(set(keys)) == result.messages


def clean_count(path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in make_reader(fh).iter_messages())


def test_two_different_messages_at_one_time_with_sequence_0_are_both_kept(tmp_path):
    """A writer that leaves every sequence at 0 (not ours) may log two messages on one channel at one time: they
    differ in their bytes, so neither is a duplicate."""
    from mcap.writer import Writer

    path = tmp_path / "foreign.mcap"
    with open(path, "wb") as fh:
        writer = Writer(fh)
        writer.start()
        schema = writer.register_schema("x", "jsonschema", b'{"type": "object"}')
        channel = writer.register_channel("/x", "json", schema)
        for payload in (b'{"v": 1}', b'{"v": 2}', b'{"v": 2}'):
            writer.add_message(channel, log_time=5, data=payload, publish_time=5, sequence=0)
        writer.finish()
    reader = LogReader(path)
    assert [p for _, p in reader.messages("/x")] == [{"v": 1}, {"v": 2}] and reader.duplicates.messages == 1
