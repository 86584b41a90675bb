"""The SDK client in a child process (aiko.devices.vicon.client_child): its lines become samples stamped on arrival
with the run's clock, and its connection events reach the log; a refused connection fails at start."""

import json
import math
import socket

import numpy as np
import pytest

from aiko.core.errors import HardwareError
from aiko.devices.vicon.client import ViconBody, ViconMocap


def test_child_lines_become_samples_and_events():
    now = [5_000_000_000]
    mocap = ViconMocap(
        "v:801", [ViconBody("aiko", "link6"), ViconBody("aiko", "link5")], own_process=True, clock_ns=lambda: now[0]
    )
    frame = {
        "frame": 42,
        "latency_s": 0.015,
        "position_m": [[0.1, 0.2, 0.3], [math.nan] * 3],
        "quaternion_wxyz": [[1.0, 0.0, 0.0, 0.0], [math.nan] * 4],
        "occluded": [False, True],
    }
    lines = [
        json.dumps({"event": "mocap_connection_lost", "fields": {"result": 10}}),
        "not json\n",
        json.dumps({"event": "mocap_reconnected", "fields": {"reconnects": 1}}),
        json.dumps(frame),  # NaN is written as NaN by json and read back
    ]
    mocap._read_lines(lines)
    now[0] += 20_000_000
    s = mocap.sample(now[0])
    assert s.frame == 42 and list(s.occluded) == [False, True]
    np.testing.assert_allclose(s.position_m[0], [0.1, 0.2, 0.3])
    assert np.isnan(s.position_m[1]).all()
    assert s.received_t_ns == 5_000_000_000 and s.reported_latency_s == 0.015
    assert s.capture_t_ns == 5_000_000_000 - 15_000_000
    assert s.payload()["received_t_ns"] == 5_000_000_000
    events = mocap.pop_events()
    assert [e.kind for e in events] == ["mocap_connection_lost", "mocap_reconnected"]
    assert events[0].fields == {"host": "v:801", "result": 10} and mocap.reconnects == 1


def test_stale_samples_keep_the_same_fields():
    mocap = ViconMocap("v:801", [ViconBody("aiko", "link6")], own_process=True, clock_ns=lambda: 0)
    s = mocap.sample(10**9)
    assert s.occluded.all() and s.received_t_ns == -1 and math.isnan(s.reported_latency_s)
    assert set(s.payload()) >= {"received_t_ns", "reported_latency_s", "capture_t_ns", "occluded"}


def test_a_refused_connection_fails_at_start():
    with socket.create_server(("127.0.0.64", 0)) as s:
        port = s.getsockname()[1]  # closed again: nothing listens there
    mocap = ViconMocap(f"127.0.0.64:{port}", [ViconBody("aiko", "link6")], own_process=True)
    with pytest.raises(HardwareError, match="Vicon"):  # without the extra: its pip hint; with it: cannot connect
        mocap.start()
    mocap.stop()
