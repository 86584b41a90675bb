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
