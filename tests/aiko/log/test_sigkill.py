"""A writer killed with SIGKILL loses at most ~1 s: every message recorded ≥ 1.0 s before the kill is in the
log, the log is readable as is, and after `recover` the `mcap` package reads it with its summary."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from mcap.reader import make_reader

from aiko.log import LogReader, recover
from tests.aiko.log._kill import sigkill_after

REPO = Path(__file__).resolve().parents[3]
MAX_LOSS_NS = 1_000_000_000


def test_sigkill_loses_at_most_one_second(tmp_path):
    path = tmp_path / "killed.mcap"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_kill_writer.py")), str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    if child.stdout.readline().strip() != "ready":
        sigkill_after(child, 0.0)
        raise AssertionError("the writer did not start")
    t_kill_ns = sigkill_after(child, 3.0)
    handed = {}  # topic -> list of (seq, t_ns) the child had given the recorder before it died
    for line in child.stdout.read().splitlines():
        parts = line.split()
        if len(parts) == 3:
            handed.setdefault(parts[0], []).append((int(parts[1]), int(parts[2])))
    assert set(handed) == {"/test/mocap", "/test/references", "/test/joint_feedback"}
    assert len(handed["/test/joint_feedback"]) >= 200  # ≥ 100 Hz for the ~3 s run (loaded machine: some slack)

    log = LogReader(path)  # readable without repair (up to the last complete chunk)
    assert log.truncated
    result = recover(path)
    assert result.was_truncated and result.messages > 0
    with open(result.output, "rb") as fh:  # the mcap package reads the recovered file, summary included
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count == result.messages
        by_topic = {}
        for _, channel, message in reader.iter_messages():
            by_topic.setdefault(channel.topic, []).append(message.log_time)

    for topic, sent in handed.items():
        logged = LogReader(result.output).channel(topic)
        n = len(logged)
        # what is there is exactly the first n messages handed over, in order, with their stamps
        assert n > 0, topic
        np.testing.assert_array_equal(logged["seq"], np.arange(n))
        np.testing.assert_array_equal(logged.t_ns, [t for _, t in sent[:n]])
        offset = log.log_time_offset_ns  # the file's log times are epoch ns: the run clock plus the run's offset
        assert offset > 1_600_000_000 * 10**9
        assert by_topic[topic] == [t + offset for _, t in sent[:n]]
        lost = sent[n:]
        if lost:
            first_lost_ns = lost[0][1]
            assert first_lost_ns > t_kill_ns - MAX_LOSS_NS, (
                f"{topic}: lost a message recorded {(t_kill_ns - first_lost_ns) * 1e-9:.3f} s before the kill"
            )
