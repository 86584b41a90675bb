"""The SDK's multicast through the unmodified client (pyvicon-datastream) against ``aiko emulate vicon`` in another
process: ``start_server_multicast`` makes the server send the controlling client's frames to the group, the frames
parse in the real client, ``stop_server_multicast`` stops them, and a request the emulator cannot serve is logged.

The SDK's receiving side cannot be used as is: in SDK 1.11.0 (pyvicon-datastream 0.2.4) ``ConnectToMulticast``
builds a client with no connection route, so ``VCGClient::ReceiveMulticastData`` loops over nothing and the call
returns ClientConnectionFailed whatever the server does (``CGClient.cpp``; asserted below). The SDK parses a
multicast datagram with the same ``ReadObjects`` as a TCP packet (``CGStreamReaderWriter::Fill`` reads one datagram
as one packet), so the datagrams are handed to the real client over TCP, byte for byte, by a relay that adds only
the ObjectEnums greeting a TCP session starts with.
"""

import json
import socket
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from aiko.devices.vicon import protocol as p
from aiko.devices.vicon.synthetic import synthetic_pose

from .processes import free_port, probe, start_vicon, stop_vicon

pv = pytest.importorskip("pyvicon_datastream")
pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.65"
GROUP = "239.255.65.1"  # administratively scoped; sent from a loopback address, it stays on this machine
RATE_HZ = 100.0


def _loopback_multicast_works() -> bool:
    """Plain sockets: does this kernel deliver a multicast datagram sent from HOST to a member joined on HOST?"""
    port = _free_udp_port()
    rx = _join(port)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.bind((HOST, 0))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(HOST))
            tx.sendto(b"probe", (GROUP, port))
        rx.settimeout(5.0)
        return rx.recv(16) == b"probe"
    except OSError:
        return False
    finally:
        rx.close()


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _join(port: int) -> socket.socket:
    """A member of GROUP:port on HOST, as the SDK's ReceiveMulticastData makes one (bind to the group, join)."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # never full while this test reads: no loss
    rx.bind((GROUP, port))
    rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP) + socket.inet_aton(HOST))
    return rx


@dataclass
class Member:
    """Receives the group on a thread; records each datagram's frame id and relays the datagrams, unchanged, to a
    TCP client of :attr:`relay_port` (after the ObjectEnums greeting the SDK waits for)."""

    port: int
    ids: list[int] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rx = _join(self.port)
        self.rx.settimeout(0.2)
        self.listener = socket.create_server((HOST, 0))
        self.relay_port = self.listener.getsockname()[1]
        self.got = threading.Condition()
        self._client: socket.socket | None = None
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._receive, self._accept)]
        for t in self._threads:
            t.start()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        types = {1, 2, 5, 6, 8, 9, 23, 26, 37}
        conn.sendall(p.encode_packet([p.ObjectEnums(frozenset(types))]))
        self._client = conn
        while conn.recv(65536):  # the client's ObjectEnums, RequestFrame and pings: read and ignored
            pass

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.rx.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                ids = [o.frame_id for o in p.decode_packet(data) if isinstance(o, p.FrameInfo)]
            except p.ViconProtocolError as exc:
                self.bad.append(str(exc))
                continue
            with self.got:
                self.ids += ids
                self.got.notify_all()
            if self._client is not None:
                try:
                    self._client.sendall(data)
                except OSError:
                    self._client = None

    def wait_for(self, count: int, timeout_s: float = 30.0) -> None:
        """Until ``count`` datagrams came (the timeout only ends a broken run; the verdict never rests on it)."""
        with self.got:
            assert self.got.wait_for(lambda: len(self.ids) >= count, timeout_s), f"{len(self.ids)} datagrams"

    def drain_and_close(self) -> None:
        """Read what is still queued (the sender has exited), then stop."""
        self._stop.set()
        self._threads[0].join()
        self.rx.settimeout(0.0)
        while True:
            try:
                data = self.rx.recv(65536)
            except OSError:
                break
            self.ids += [o.frame_id for o in p.decode_packet(data) if isinstance(o, p.FrameInfo)]
        self.rx.close()
        self.listener.close()
        if self._client is not None:
            self._client.close()


@pytest.fixture(scope="module")
def loopback_multicast():
    if not _loopback_multicast_works():
        pytest.skip("this kernel does not deliver multicast sent from a loopback address (plain-socket probe)")


def test_start_server_multicast_sends_the_controllers_frames_to_the_group_and_stop_ends_them(loopback_multicast):
    port = free_port(HOST)
    proc, _ = start_vicon(HOST, port, "--synthetic", "1", "--rate-hz", str(RATE_HZ))
    group_port = _free_udp_port()
    member = Member(group_port)
    controller = pv.PyViconDatastream()
    try:
        # the receiving side of SDK 1.11 fails before it opens a socket (see the module docstring)
        receiver = pv.PyViconDatastream()
        assert receiver.connect_multicast(HOST, f"{GROUP}:{group_port}") == pv.Result.ClientConnectionFailed

        assert controller.connect(f"{HOST}:{port}") == pv.Result.Success
        controller.enable_segment_data()  # the multicast frames hold what this client asked for
        controller.set_stream_mode(pv.StreamMode.ClientPull)  # one frame per request: none in flight unasked
        for _ in range(2):  # the SDK sends its changed ObjectEnums after reading a frame
            assert controller.get_frame() == pv.Result.Success
        assert controller.start_server_multicast(HOST, f"{GROUP}:{group_port}") == pv.Result.Success
        member.wait_for(20)  # every frame goes to the group, whether or not the controller pulls

        # the real client parses the datagrams: names, rate, and every pose equals the source's at its frame number
        seen = probe(f"{HOST}:{member.relay_port}", "ServerPush", 3.0, bodies=("subject1/seg1", "subject1/seg3"))
        assert seen["connected"] and len(seen["frames"]) >= 5, seen
        assert seen["frame_rate_hz"] == pytest.approx(RATE_HZ)
        assert seen["names"]["subject1"]["segments"] == ["seg1", "seg2", "seg3"]
        for frame in seen["frames"]:
            t_s = (frame["number"] - 1) / RATE_HZ
            for body, segment in (("subject1/seg1", 0), ("subject1/seg3", 2)):
                x, r = synthetic_pose(0, segment, t_s)
                np.testing.assert_allclose(frame[body]["translation_mm"], x, atol=1e-6)
                np.testing.assert_allclose(np.reshape(frame[body]["rotation"], (3, 3)), r, atol=1e-12)

        assert controller.stop_server_multicast() == pv.Result.Success
        # The server handles one connection's requests in order and answers each pull with a frame newer than the
        # last it sent that client; the SDK keeps one unread frame. So from the third pull after the stop on, the
        # frame was released after the stop was handled: had multicast gone on, that frame would be in the group.
        for _ in range(5):
            assert controller.get_frame() == pv.Result.Success
        released_after_stop = controller.get_frame_number() - 1  # its FrameInfo id
    finally:
        controller.disconnect()
        counters = stop_vicon(proc)
        member.drain_and_close()
    ids = member.ids
    assert not member.bad
    assert ids == sorted(set(ids)), "each frame once, in order"
    assert max(ids) < released_after_stop, "a frame released after stop_server_multicast was multicast"
    assert counters["multicast_started"] == 1 and counters["multicast_packets_sent"] == len(ids)


def test_a_multicast_the_emulator_cannot_send_is_logged_and_the_session_goes_on(loopback_multicast):
    """10.255.255.1 is no address of this machine: the server cannot send from it. The SDK returns Success for any
    StartMulticastSender (it waits for no answer), so the refusal is the emulator's warning and counter."""
    port = free_port(HOST)
    proc, _ = start_vicon(HOST, port, "--synthetic", "1", "--rate-hz", str(RATE_HZ))
    client = pv.PyViconDatastream()
    try:
        assert client.connect(f"{HOST}:{port}") == pv.Result.Success
        client.enable_segment_data()
        client.set_stream_mode(pv.StreamMode.ClientPull)
        assert client.start_server_multicast("10.255.255.1", f"{GROUP}:{_free_udp_port()}") == pv.Result.Success
        for _ in range(3):
            assert client.get_frame() == pv.Result.Success
        assert client.get_segment_global_translation("subject1", "seg1") is not None
    finally:
        client.disconnect()
        proc.send_signal(15)
        out, err = proc.communicate(timeout=30)
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["multicast_refused"] == 1 and counters["multicast_started"] == 0
    assert "asked for multicast to" in err and "refused (cannot send from 10.255.255.1" in err
