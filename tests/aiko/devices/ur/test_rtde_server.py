"""The emulator's RTDE server through raw sockets (no ur_rtde): handshake, recipes, IN_USE, rates, text messages."""

import socket
import struct

import pytest

from aiko.devices.ur import rtde_protocol as rp

from .ur3_emulator_process import running

pytestmark = pytest.mark.timeout(60)


class Raw:
    def __init__(self, host):
        self.sock = socket.create_connection((host, 30004), timeout=5)
        self.buf = bytearray()

    def send(self, kind, payload=b""):
        self.sock.sendall(rp.packet(kind, payload))

    def recv(self):
        while True:
            packets = rp.split_packets(self.buf)
            if packets:
                kind, payload = packets[0]
                # put back whatever followed (split_packets consumed all complete ones)
                for k, p in reversed(packets[1:]):
                    self.buf[:0] = rp.packet(k, p)
                return kind, payload
            self.buf.extend(self.sock.recv(65536))

    def request(self, kind, payload=b""):
        self.send(kind, payload)
        return self.recv()


def test_handshake_recipes_in_use_and_output_rate():
    host = "127.0.0.70"
    with running(host, "--rate-hz", "500"):
        a, b = Raw(host), Raw(host)
        assert a.request(rp.REQUEST_PROTOCOL_VERSION, struct.pack(">H", 2)) == (rp.REQUEST_PROTOCOL_VERSION, b"\x01")
        assert a.request(rp.REQUEST_PROTOCOL_VERSION, struct.pack(">H", 9))[1] == b"\x00"
        kind, payload = a.request(rp.GET_URCONTROL_VERSION)
        assert kind == rp.GET_URCONTROL_VERSION and struct.unpack(">IIII", payload)[:2] == (3, 15)

        kind, payload = a.request(rp.CONTROL_PACKAGE_SETUP_OUTPUTS, struct.pack(">d", 125.0) + b"timestamp,nonsense")
        assert payload == b"\x00DOUBLE,NOT_FOUND"
        kind, payload = a.request(rp.CONTROL_PACKAGE_SETUP_OUTPUTS, struct.pack(">d", 125.0) + b"timestamp,actual_q")
        assert payload == b"\x01DOUBLE,VECTOR6D"

        assert a.request(rp.CONTROL_PACKAGE_SETUP_INPUTS, b"input_int_register_5")[1] == b"\x01INT32"
        assert b.request(rp.REQUEST_PROTOCOL_VERSION, struct.pack(">H", 2))[1] == b"\x01"
        assert b.request(rp.CONTROL_PACKAGE_SETUP_INPUTS, b"input_int_register_5,input_double_register_5")[1] == (
            b"\x00IN_USE,DOUBLE"
        )

        assert a.request(rp.CONTROL_PACKAGE_START) == (rp.CONTROL_PACKAGE_START, b"\x01")
        recipe = rp.Recipe(1, ("timestamp", "actual_q"), ("DOUBLE", "VECTOR6D"))
        stamps = []
        while len(stamps) < 20:
            kind, payload = a.recv()
            if kind == rp.DATA_PACKAGE:
                stamps.append(recipe.unpack(payload)["timestamp"])
        steps = {round(t1 - t0, 6) for t0, t1 in zip(stamps, stamps[1:], strict=False)}
        assert steps == {0.008}  # 125 Hz from a 500 Hz controller: every 4th tick

        a.send(rp.DATA_PACKAGE, rp.Recipe(1, ("input_int_register_5",), ("INT32",)).pack({"input_int_register_5": 7}))
        a.send(rp.CONTROL_PACKAGE_PAUSE)
        while True:  # data packages already in flight may precede the pause reply
            kind, payload = a.recv()
            if kind == rp.CONTROL_PACKAGE_PAUSE:
                break
        assert payload == b"\x01"

        # the register written above is visible as an output field to another client
        c = Raw(host)
        assert c.request(rp.REQUEST_PROTOCOL_VERSION, struct.pack(">H", 2))[1] == b"\x01"
        c.request(rp.CONTROL_PACKAGE_SETUP_OUTPUTS, struct.pack(">d", 500.0) + b"input_int_register_5")
        assert c.request(rp.CONTROL_PACKAGE_START)[1] == b"\x01"
        kind, payload = c.recv()
        while kind != rp.DATA_PACKAGE:
            kind, payload = c.recv()
        assert rp.Recipe(1, ("input_int_register_5",), ("INT32",)).unpack(payload) == {"input_int_register_5": 7}


def test_a_state_built_before_one_already_sent_is_dropped_not_sent_after_it():
    """The tick and an input's `publish_now` each send their state packages after releasing the controller's
    lock, so the one built first can reach a socket second; a client must never see the older state after the
    newer (ur_rtde took a stale DONE_WITH_CMD of the last move as the next moveJ's and returned at once). Text
    messages are not states: they always go."""
    from aiko.devices.ur.rtde_server import RtdeConnection

    ours, client = socket.socketpair()
    try:
        conn = RtdeConnection(ours, conn_id=1, started=True)
        newer, older = rp.packet(rp.DATA_PACKAGE, b"\x01new"), rp.packet(rp.DATA_PACKAGE, b"\x01old")
        assert conn.send_data(newer, state=2)
        assert not conn.send_data(older, state=1)
        assert not conn.send_data(newer, state=2)  # the same state twice is stale too
        assert conn.send_data(rp.text_message("a message"))
        assert conn.send_data(older, state=3)
        assert conn.stale_dropped == 2
        client.settimeout(5)
        got = bytearray()
        expected = newer + rp.text_message("a message") + older
        while len(got) < len(expected):
            got.extend(client.recv(65536))
        assert bytes(got) == expected
    finally:
        ours.close()
        client.close()


def test_the_controller_numbers_its_state_packages_in_the_order_it_builds_them():
    """The tick's packages and `publish_now`'s (an input between ticks) carry one build number sequence, so a
    connection can tell the older of two that reach it out of order."""
    from aiko.devices.ur.emulator import UR3Emulator

    class Output:
        def pack(self, values):
            return b""

    class Connection:
        started, dead, output, output_divisor = True, False, Output(), 1

        def __init__(self):
            self.states = []

        def send_data(self, data, state=None):
            self.states.append(state)
            return True

    emulator = UR3Emulator("127.0.0.163", rate_hz=125.0)  # not started: no port bound, no thread
    conn = Connection()
    emulator.rtde.connections = {1: conn}
    packets, first = emulator._tick()
    assert [c for c, _ in packets] == [conn]
    emulator.publish_now()
    _, third = emulator._tick()
    assert conn.states == [2] and 0 < first < 2 < third
