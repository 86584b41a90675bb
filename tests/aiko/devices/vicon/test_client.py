"""Vicon source with a stand-in client (no Vicon server here): mm → m, occlusion → NaN + flag, stale frames,
dropped connection → event + reconnect, clear message without the extra."""

import enum
import sys
import threading
import time

import numpy as np
import pytest

from aiko.core.errors import HardwareError
from aiko.devices.vicon.client import RESULT_NOT_CONNECTED, RESULT_SUCCESS, ViconBody, ViconMocap, import_pyvicon

NO_FRAME = 10


class FakeViconClient:
    """The pyvicon_datastream.PyViconDatastream methods ViconMocap uses, driven by a script of frames. It brings its
    own StreamMode, so these tests run where the SDK client is not built."""

    StreamMode = enum.Enum("StreamMode", "ClientPull ClientPullPreFetch ServerPush")

    def __init__(self, frames):
        self.frames = list(frames)  # each: dict segment -> (xyz_mm, quat_wxyz) | None, or "drop"
        self.connected = False
        self.connect_calls = 0
        self.refuse_connects = 0
        self.current = {}
        self.frame_number = 0
        self.served = threading.Event()

    def connect(self, host):
        self.connect_calls += 1
        if self.refuse_connects > 0:
            self.refuse_connects -= 1
            return RESULT_NOT_CONNECTED
        self.connected = True
        return RESULT_SUCCESS

    def is_connected(self):
        return self.connected

    def disconnect(self):
        self.connected = False

    def enable_segment_data(self):
        pass

    def set_stream_mode(self, mode):
        self.stream_mode = mode

    def get_frame(self):
        if not self.connected:
            return RESULT_NOT_CONNECTED
        if not self.frames:
            self.served.set()
            time.sleep(0.005)
            return NO_FRAME
        item = self.frames.pop(0)
        if item == "drop":
            self.connected = False
            self.refuse_connects = 2
            return RESULT_NOT_CONNECTED
        self.current = item
        self.frame_number += 1
        time.sleep(0.002)
        return RESULT_SUCCESS

    def get_frame_number(self):
        return self.frame_number

    def get_latency_total(self):
        return 0.012

    def get_segment_global_translation(self, subject, segment):
        pose = self.current.get(segment)
        return None if pose is None else np.array(pose[0], dtype=float)

    def get_segment_global_quaternion(self, subject, segment):
        pose = self.current.get(segment)
        return None if pose is None else np.array(pose[1], dtype=float)


def _wait(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def test_pose_in_metres_occlusion_nan_and_flag():
    q = [1.0, 0.0, 0.0, 0.0]
    client = FakeViconClient([{"link6": ([100.0, -250.0, 52.5], q), "link1": None}])
    mocap = ViconMocap(
        "vicon:801", [ViconBody("aiko", "link6"), ViconBody("aiko", "link1")], client_factory=lambda: client
    )
    with mocap:
        assert _wait(lambda: mocap.frames_received == 1)
        s = mocap.sample(time.monotonic_ns())
    np.testing.assert_allclose(s.position_m[0], [0.1, -0.25, 0.0525])
    np.testing.assert_array_equal(s.quaternion_wxyz[0], q)
    assert list(s.occluded) == [False, True]
    assert np.isnan(s.position_m[1]).all() and np.isnan(s.quaternion_wxyz[1]).all()
    assert abs(s.latency_s - 0.012) < 0.25  # capture time = receive time − SDK latency
    assert s.names == ("aiko/link6", "aiko/link1")
    assert client.stream_mode is FakeViconClient.StreamMode.ServerPush  # frames pushed at the server's rate


def test_stale_frame_reads_as_occluded():
    client = FakeViconClient([{"link6": ([1.0, 2.0, 3.0], [1, 0, 0, 0])}])
    fake_now = [0]
    mocap = ViconMocap(
        "v",
        [ViconBody("aiko", "link6")],
        stale_after_s=0.1,
        client_factory=lambda: client,
        clock_ns=lambda: fake_now[0],
    )
    with mocap:
        assert _wait(lambda: mocap.frames_received == 1)
        assert not mocap.sample(50_000_000).occluded[0]
        late = mocap.sample(150_000_001)
    assert late.occluded[0] and np.isnan(late.position_m).all()


def test_dropped_connection_reconnects_with_events():
    frame = {"link6": ([10.0, 0.0, 0.0], [1, 0, 0, 0])}
    client = FakeViconClient([frame, "drop", frame, frame])
    mocap = ViconMocap("v:801", [ViconBody("aiko", "link6")], reconnect_interval_s=0.01, client_factory=lambda: client)
    with mocap:
        assert _wait(lambda: mocap.frames_received == 3)
    kinds = [e.kind for e in mocap.pop_events()]
    assert kinds == ["mocap_connected", "mocap_connection_lost", "mocap_reconnected"]
    assert mocap.reconnects == 1 and client.connect_calls == 4  # first, two refused, then success
    assert mocap.pop_events() == []


def test_unreachable_server_fails_at_start():
    client = FakeViconClient([])
    client.refuse_connects = 10**6
    started = time.monotonic()
    with pytest.raises(HardwareError, match="cannot connect"):
        ViconMocap("nowhere:801", [ViconBody("a", "b")], client_factory=lambda: client).start()
    assert time.monotonic() - started >= 1.5  # tried for the whole window first (how much longer: the machine)
    assert client.connect_calls > 1


def test_a_server_down_for_a_moment_at_the_start_is_connected():
    """A Vicon PC restarting its stream (0.2 s down) as the run starts: the first connection is tried again."""
    client = FakeViconClient([{"link6": ([10.0, 0.0, 0.0], [1, 0, 0, 0])}])
    client.refuse_connects = 2
    mocap = ViconMocap("v:801", [ViconBody("aiko", "link6")], client_factory=lambda: client)
    with mocap:
        assert _wait(lambda: mocap.frames_received == 1)
    assert client.connect_calls == 3 and [e.kind for e in mocap.pop_events()] == ["mocap_connected"]


def test_missing_extra_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyvicon_datastream", None)
    with pytest.raises(HardwareError, match=r"pip install 'aiko-stack\[vicon\]'"):
        import_pyvicon()


def test_connection_events_reach_the_log_through_the_mocap_task():
    from aiko.core.mocap import MocapTask
    from aiko.core.recording import MemoryRecorder

    frame = {"link6": ([10.0, 0.0, 0.0], [1, 0, 0, 0])}
    client = FakeViconClient([frame, "drop", frame])
    memory = MemoryRecorder()
    mocap = ViconMocap("v:801", [ViconBody("aiko", "link6")], reconnect_interval_s=0.01, client_factory=lambda: client)
    with mocap:
        assert _wait(lambda: mocap.frames_received == 2)
        MocapTask(mocap, memory)(time.monotonic_ns())
    assert memory.event_kinds() == ["mocap_connected", "mocap_connection_lost", "mocap_reconnected"]
    assert all(fields["source"] == "vicon" and fields["host"] == "v:801" for _, _, fields in memory.events)
    assert len(memory.channels["/mocap"]) == 1


class DropsWhileReading(FakeViconClient):
    """The server restarts between get_frame and the getters: as the SDK does, every getter after the drop answers
    from no frame (a segment None, the latency total 0.0)."""

    def get_segment_global_translation(self, subject, segment):
        if self.frame_number == 2:
            self.connected = False
        if not self.connected:
            return None
        return super().get_segment_global_translation(subject, segment)

    def get_latency_total(self):
        return super().get_latency_total() if self.connected else 0.0


def test_a_frame_read_across_a_dropped_connection_is_not_stored():
    frame = {"link6": ([10.0, 0.0, 0.0], [1, 0, 0, 0])}
    client = DropsWhileReading([frame, frame, frame])
    mocap = ViconMocap("v:801", [ViconBody("aiko", "link6")], reconnect_interval_s=0.01, client_factory=lambda: client)
    with mocap:
        assert _wait(lambda: mocap.frames_received == 2)
        latest = mocap.sample(time.monotonic_ns())
    assert mocap.frames_discarded == 1  # frame 2: never an occluded pose with a zero latency
    assert not latest.occluded[0] and abs(latest.latency_s - 0.012) < 0.25
    assert "mocap_connection_lost" in [e.kind for e in mocap.pop_events()]
