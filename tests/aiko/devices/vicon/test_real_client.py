"""The unmodified Vicon SDK client (pyvicon-datastream) reads the emulated server, each in its own process:
names, frame rate, poses against the source, latency, occlusion, dropped frames and a server restart."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from aiko.devices.vicon.synthetic import MARKER_OFFSET_MM, synthetic_pose

from .processes import free_port, probe, start_vicon, stop_vicon

pytest.importorskip("pyvicon_datastream")

HOST = "127.0.0.61"
BODIES = ("subject1/seg1", "subject1/seg2", "subject1/seg3", "subject2/seg2")
LATENCY_S = 0.03


@pytest.fixture(scope="module")
def server():
    """Two synthetic subjects at 100 Hz, subject1's seg2 occluded, 30 ms of latency."""
    port = free_port(HOST)
    proc, hello = start_vicon(
        HOST, port, "--synthetic", "2", "--rate-hz", "100", "--occlude", "subject1/seg2", "--latency-ms", "30"
    )
    yield f"{HOST}:{port}", hello
    counters = stop_vicon(proc)
    assert counters["frames_dropped"] == 0 and counters["connections"] >= 3


def _served(frames, has_data):
    """The frames that hold the data the client enabled, after checking that those that do not lead a connection.

    The SDK sends the client's ``Enable…Data`` request (its ObjectEnums) from its reader thread, and only after the
    next packet has come in (``ViconCGStreamClient.cpp``, ``ClientThread``: ``WriteObjects``, then ``ReadObjects``);
    a ClientPull ``GetFrame`` is written from the caller's thread and can even reach the server before the client's
    first ObjectEnums. So the first frame(s) of a connection may lack segments and markers, from a Tracker as from
    the emulator, and the SDK reads them as occluded. After that, every frame has them: a gap later is a bug.
    """
    served = []
    for connection in sorted({f["connection"] for f in frames}):
        on_it = [f for f in frames if f["connection"] == connection]
        flags = [has_data(f) for f in on_it]
        first = flags.index(True) if True in flags else len(flags)
        assert all(flags[first:]), f"connection {connection}: frames without the enabled data after frames with it"
        assert first <= max(2, len(flags) // 2), f"connection {connection}: {first} of {len(flags)} frames lack data"
        served += on_it[first:]
    return served


def _check_poses(frames, rate_hz):
    for frame in frames:
        t_s = (frame["number"] - 1) / rate_hz  # FrameInfo id k is captured at k periods after the start
        for body, subject, segment in (("subject1/seg1", 0, 0), ("subject1/seg3", 0, 2), ("subject2/seg2", 1, 1)):
            x, r = synthetic_pose(subject, segment, t_s)
            got = frame[body]
            np.testing.assert_allclose(got["translation_mm"], x, atol=1e-6)
            np.testing.assert_allclose(np.reshape(got["rotation"], (3, 3)), r, atol=1e-12)
            q = Rotation.from_matrix(r).as_quat(scalar_first=True)
            qg = np.asarray(got["quaternion_wxyz"])
            assert min(np.abs(qg - q).max(), np.abs(qg + q).max()) < 1e-9
        x1, r1 = synthetic_pose(0, 0, t_s)
        np.testing.assert_allclose(frame["subject1/seg1_m"], x1 + r1 @ MARKER_OFFSET_MM, atol=1e-6)


@pytest.mark.parametrize("mode", ["ServerPush", "ClientPull", "ClientPullPreFetch"])
def test_every_stream_mode_reads_names_poses_latency_and_occlusion(server, mode):
    address, hello = server
    seen = probe(address, mode, 1.5, bodies=BODIES, markers=("subject1/seg1_m", "subject1/seg2_m", "subject2/seg2_m"))
    assert seen["connected"]
    # subject2's seg2 and its marker are never occluded: without them, the frame was sent before the request
    frames = _served(seen["frames"], lambda f: f["subject2/seg2"]["translation_mm"] is not None)
    frames = _served(frames, lambda f: f["subject2/seg2_m"] is not None)
    assert len(frames) >= 20  # 150 at 100 Hz; a loaded CI machine gets fewer, never none
    assert seen["frame_rate_hz"] == pytest.approx(100.0)
    assert seen["names"] == {
        "subject1": {"root": "seg1", "segments": ["seg1", "seg2", "seg3"], "markers": ["seg1_m", "seg2_m", "seg3_m"]},
        "subject2": {"root": "seg1", "segments": ["seg1", "seg2", "seg3"], "markers": ["seg1_m", "seg2_m", "seg3_m"]},
    }
    numbers = [f["number"] for f in frames]
    assert numbers == sorted(set(numbers))  # each frame once, in order
    _check_poses(frames, 100.0)
    for frame in frames:
        # subject1's seg2 is occluded: no pose, no local pose for its child, no marker; subject2's is seen
        assert frame["subject1/seg2"]["translation_mm"] is None and frame["subject1/seg2"]["rotation"] is None
        assert frame["subject1/seg3"]["local_translation_mm"] is None
        assert frame["subject1/seg2_m"] is None
        assert frame["subject2/seg2"]["translation_mm"] is not None and frame["subject2/seg2_m"] is not None
        # LatencyInfo carries the injected delay; the SDK adds half its ping round trip (ms on a loaded machine)
        assert LATENCY_S <= frame["latency_total_s"] < LATENCY_S + 0.05
        # a frame is sent no earlier than its capture time + the latency (same machine, same wall clock)
        capture_unix_s = hello["t0_unix_s"] + (frame["number"] - 1) / 100.0
        assert frame["received_unix_s"] - capture_unix_s >= LATENCY_S - 0.002


def test_dropped_frames_are_skipped_numbers_and_a_restart_is_reconnected():
    port = free_port(HOST)
    proc, _ = start_vicon(
        HOST,
        port,
        "--synthetic",
        "1",
        "--rate-hz",
        "50",
        "--dropout-fraction",
        "0.3",
        "--restart-every-s",
        "1.5",
        "--restart-downtime-s",
        "0.2",
    )
    try:
        seen = probe(f"{HOST}:{port}", "ServerPush", 4.0, bodies=("subject1/seg1",))
    finally:
        counters = stop_vicon(proc)
    assert seen["connected"] and counters["restarts"] >= 2 and counters["frames_dropped"] > 0
    assert len(seen["reconnects"]) >= 1
    numbers = np.array([f["number"] for f in seen["frames"]])
    connections = np.array([f["connection"] for f in seen["frames"]])
    steps = np.diff(numbers)
    assert (steps > 1).any()  # dropouts: frame numbers skipped
    # Never older, on one connection or across a reconnect. The server sends each frame once, in order, on a
    # connection (test_server.py holds it, the pull request's race included); what the SDK hands back may repeat a
    # frame: the new connection's first frame may be the one the last connection ended with (the server's latest,
    # when its frame thread captured nothing new during the downtime), and once beside a suite at load ~5
    # (2026-11-29) a number came back twice on one connection, with the server not sending anything twice. A repeat
    # is harmless to our client (it samples the latest frame); going back is not.
    pairs = list(zip(numbers[:-1].tolist(), numbers[1:].tolist(), connections[1:].tolist(), strict=True))
    backwards = [pairs[i] for i in np.flatnonzero(steps < 0)]
    assert not backwards, f"frame numbers went back (before, after, connection): {backwards}"
    repeats = [pairs[i] for i in np.flatnonzero(steps == 0)]
    assert len(repeats) <= len(seen["reconnects"]) + len(steps) // 10, f"repeated numbers: {repeats}"
    first_reconnect = seen["reconnects"][0]["connected_unix_s"]
    assert any(f["received_unix_s"] > first_reconnect for f in seen["frames"])  # frames flow again
    _check_seg1(_served(seen["frames"], lambda f: f["subject1/seg1"]["translation_mm"] is not None), 50.0)


def _check_seg1(frames, rate_hz):
    for frame in frames:
        x, _ = synthetic_pose(0, 0, (frame["number"] - 1) / rate_hz)
        np.testing.assert_allclose(frame["subject1/seg1"]["translation_mm"], x, atol=1e-6)


def _next_frame(client, attempts=200):
    """One ClientPull frame. The SDK answers NoFrame when the server's frame did not come within its wait, as it
    can when the server is starved on a busy machine; a client asks again (as `aiko.devices.vicon.client` does), so
    NoFrame is a retry here, and anything else, or no frame in ``attempts`` asks, fails the test."""
    pv = pytest.importorskip("pyvicon_datastream")
    for _ in range(attempts):
        result = client.get_frame()
        if result != pv.Result.NoFrame:
            return result
    return pv.Result.NoFrame


def _pull_until(client, seen, limit=20):
    """ClientPull frames until ``seen(client)``; how many it took (None if ``limit`` frames never showed it)."""
    pv = pytest.importorskip("pyvicon_datastream")
    for k in range(1, limit + 1):
        assert _next_frame(client) == pv.Result.Success
        if seen(client):
            return k
    return None


def test_a_frame_holds_only_the_object_types_the_client_asked_for(server):
    """Segments and markers come only once enabled, and stop once disabled (the SDK's ObjectEnums); the SDK sends
    a change after the next packet (``ClientThread``), so it takes effect a frame or two later, not never."""
    pv = pytest.importorskip("pyvicon_datastream")
    address, _ = server
    client = pv.PyViconDatastream()
    assert client.connect(address) == pv.Result.Success
    try:
        client.set_stream_mode(pv.StreamMode.ClientPull)
        for _ in range(10):  # never asked for: every segment and marker reads as occluded (None)
            assert _next_frame(client) == pv.Result.Success
            assert client.get_segment_global_translation("subject2", "seg2") is None
            assert client.get_marker_global_translation("subject2", "seg2_m") is None
        assert client.get_subject_count() == 2  # the static objects a fresh connection asks for do come

        def segments(c):
            return c.get_segment_global_translation("subject2", "seg2") is not None

        def markers(c):
            return c.get_marker_global_translation("subject2", "seg2_m") is not None

        client.enable_segment_data()
        assert _pull_until(client, segments) is not None
        for _ in range(5):
            assert _next_frame(client) == pv.Result.Success and segments(client) and not markers(client)
        client.enable_marker_data()
        assert _pull_until(client, markers) is not None
        client.disable_marker_data()
        assert _pull_until(client, lambda c: not markers(c)) is not None
        for _ in range(5):
            assert _next_frame(client) == pv.Result.Success and segments(client) and not markers(client)
    finally:
        client.disconnect()
