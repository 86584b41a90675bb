"""The emulated server's session logic with a protocol-level client (no SDK needed): ObjectEnums first, the three
request kinds, ping echo, dropped frames, restarts, bad impairment settings."""

import socket
import time

import pytest

from aiko.core.errors import ConfigError
from aiko.devices.vicon import protocol as p
from aiko.devices.vicon.impairments import Impairments
from aiko.devices.vicon.server import ViconServer, ViconServerError
from aiko.devices.vicon.synthetic import SyntheticSource

HOST = "127.0.0.63"


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=5.0)
        self.stream = p.PacketStream()
        self.pending = []

    def send(self, *objects):
        self.sock.sendall(p.encode_packet(objects))

    def packet(self):
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.stream.feed(data)
            self.pending.extend(self.stream.packets())
        return self.pending.pop(0)

    def frame_id(self):
        while True:
            ids = [o.frame_id for o in self.packet() if isinstance(o, p.FrameInfo)]
            if ids:
                return ids[0]


@pytest.fixture
def server():
    with ViconServer(SyntheticSource(1, 2), HOST, 0, rate_hz=200.0) as s:
        yield s


def test_object_enums_first_then_one_frame_per_pull_request(server):
    c = Client(server.port)
    (enums,) = c.packet()
    assert isinstance(enums, p.ObjectEnums) and {1, 2, 5, 9} <= enums.enums
    c.send(p.ObjectEnums(frozenset({1, 2, 5, 9})), p.RequestFrame(False))
    first = c.frame_id()
    c.send(p.RequestFrame(False))
    assert c.frame_id() > first  # never the same frame twice to one client
    c.send(p.RequestNextFrame(3))
    ids = [c.frame_id() for _ in range(3)]
    assert ids == sorted(set(ids)) and ids[0] > first


def test_server_push_streams_every_frame_and_pings_are_echoed(server):
    c = Client(server.port)
    c.packet()
    c.send(p.RequestFrame(True))
    ids = [c.frame_id() for _ in range(20)]
    assert ids == sorted(set(ids))  # each frame once, in order
    if ids != list(range(ids[0], ids[0] + 20)):  # every frame, unless the server or this reader fell behind (load)
        assert server.counters.late_ticks + server.counters.frames_skipped_slow_client > 0, ids
    c.send(p.Ping(77))
    while True:
        objects = c.packet()
        if p.Ping(77) in objects:
            break


def test_dropped_frames_skip_numbers():
    with ViconServer(SyntheticSource(), HOST, 0, rate_hz=200.0, impairments=Impairments(dropout_fraction=0.5)) as s:
        c = Client(s.port)
        c.packet()
        c.send(p.RequestFrame(True))
        ids = [c.frame_id() for _ in range(30)]
    steps = [b - a for a, b in zip(ids, ids[1:], strict=False)]
    assert min(steps) >= 1 and max(steps) > 1


def test_restart_closes_connections_and_accepts_again(server):
    c = Client(server.port)
    c.packet()
    server.restart(downtime_s=0.3)
    with pytest.raises((ConnectionError, OSError)):
        for _ in range(100):
            c.packet()
    deadline = time.monotonic() + 5.0
    while True:
        try:
            again = Client(server.port)
            break
        except OSError:
            assert time.monotonic() < deadline, "the server did not come back"
            time.sleep(0.05)
    assert isinstance(again.packet()[0], p.ObjectEnums)
    assert server.counters.restarts == 1


def test_a_port_in_use_is_a_one_line_error(server):
    with pytest.raises(ViconServerError, match=f"cannot listen on {HOST}:{server.port}"):
        ViconServer(SyntheticSource(), HOST, server.port).start()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dropout_fraction": 1.0}, "dropout fraction"),
        ({"latency_s": 6.0}, "latency"),
        ({"restart_every_s": 0.4, "restart_downtime_s": 0.5}, "longer than the downtime"),
    ],
)
def test_bad_impairments_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Impairments(**kwargs)


class FlakySource(SyntheticSource):
    """Fails on every other frame."""

    calls = 0

    def frame(self, t_s):
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("simulator hiccup")
        return super().frame(t_s)


def test_a_failing_source_loses_frames_not_the_server():
    with ViconServer(FlakySource(), HOST, 0, rate_hz=200.0) as s:
        c = Client(s.port)
        c.packet()
        c.send(p.RequestFrame(True))
        ids = [c.frame_id() for _ in range(10)]
        errors = s.counters.source_errors
    assert errors >= 10 and all(b - a == 2 for a, b in zip(ids, ids[1:], strict=False))


def test_a_server_that_falls_behind_skips_frame_numbers_and_keeps_its_timeline():
    offset = [0.0]
    with ViconServer(SyntheticSource(), HOST, 0, rate_hz=100.0, clock_s=lambda: time.monotonic() + offset[0]) as s:
        c = Client(s.port)
        c.packet()
        c.send(p.RequestFrame(True))
        before = c.frame_id()
        offset[0] += 1.0  # the process was suspended for a second
        after = [c.frame_id() for _ in range(5)]
        late = s.counters.late_ticks
    assert after[-1] - before >= 100 and late >= 90  # no burst of 100 stale frames: their numbers are skipped
    assert after == sorted(after)


def test_a_slow_client_loses_its_oldest_frames_never_the_greeting_or_a_ping_echo():
    """The SDK disconnects if the first packet lacks ObjectEnums and keeps its round trips from the Ping echoes: a
    client too slow for the frames loses frames only (counted), never those (no socket: the queue alone)."""
    from aiko.devices.vicon.server import QUEUE_FRAMES, _Connection, _Frame

    server = ViconServer(SyntheticSource(1, 2), HOST, 0)  # not started: only its encoder and counters are used
    conn = _Connection(server, None, "slow")  # type: ignore[arg-type]
    conn._send(b"greeting")
    conn.push = True
    conn.on_frame(_Frame.of(0, 0.0, [p.FrameInfo(0)]))
    conn._send(b"ping echo")
    for k in range(1, 10):
        conn.on_frame(_Frame.of(k, 0.0, [p.FrameInfo(k)]))
    queued = list(conn._queue)
    assert [packet for is_frame, packet in queued if not is_frame] == [b"greeting", b"ping echo"]
    frames = [p.decode_packet(packet) for is_frame, packet in queued if is_frame]
    assert [objects[0].frame_id for objects in frames] == list(range(10 - QUEUE_FRAMES, 10))  # the newest
    assert server.counters.frames_skipped_slow_client == 10 - QUEUE_FRAMES


def test_a_pull_request_never_sends_an_older_frame_after_a_newer_one():
    """The race a loaded machine opened: a RequestFrame reads the server's latest frame, the scheduler then releases a
    newer one and sends it on this connection, then the request is handled with the older one. It must not follow
    (frame numbers on one connection only grow); the client is owed the next frame instead."""
    from aiko.devices.vicon.server import _Connection, _Frame

    server = ViconServer(SyntheticSource(1, 2), HOST, 0)  # not started: only its encoder and counters are used
    conn = _Connection(server, None, "racing")  # type: ignore[arg-type]
    older, newer = _Frame.of(7, 0.0, [p.FrameInfo(7)]), _Frame.of(8, 0.0, [p.FrameInfo(8)])
    server._latest = older  # what the request read
    conn.wanted = 1  # a ClientPull request was waiting: the release of the newer frame serves it
    conn.on_frame(newer)
    conn._handle(p.RequestFrame(streaming=False))  # the next request, with the older frame still the server's latest
    sent = [p.decode_packet(packet)[0].frame_id for is_frame, packet in conn._queue if is_frame]
    assert sent == [8] and conn.wanted == 1
    server._latest = _Frame.of(9, 0.0, [p.FrameInfo(9)])
    conn._handle(p.RequestFrame(streaming=False))  # a newer latest is sent at once, as before
    assert [p.decode_packet(packet)[0].frame_id for is_frame, packet in conn._queue if is_frame] == [8, 9]
