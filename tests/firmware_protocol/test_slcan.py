"""The emulator as a separate process speaking slcan on a pty, driven through python-can's slcan interface."""

import json
import signal
import subprocess
import sys
import time

import can
import pytest
from hypothesis import given
from hypothesis import strategies as st

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import Command, MessageKind
from firmware_protocol.emulator.slcan_server import ERROR, OK, SlcanPtyServer, format_frame, parse_frame

CODEC = default_codec()


@given(
    st.booleans(),
    st.integers(0, 0x1FFFFFFF),
    st.binary(max_size=8),
)
def test_lawicel_frames_round_trip(extended, frame_id, data):
    frame_id = frame_id if extended else frame_id & 0x7FF
    msg = can.Message(arbitration_id=frame_id, is_extended_id=extended, data=data)
    line = format_frame(msg)
    assert line.endswith(b"\r")
    back = parse_frame(line[:-1])
    assert (back.arbitration_id, back.is_extended_id, bytes(back.data)) == (frame_id, extended, data)


def test_server_answers_lawicel_commands_and_counts_garbage():
    bus = can.Bus(interface="virtual", channel="test-slcan-lines")
    peer = can.Bus(interface="virtual", channel="test-slcan-lines")
    garbage = []
    server = SlcanPtyServer(bus, on_garbage=garbage.append)
    try:
        assert server.handle_line(b"t1002AABB") == ERROR  # channel not open yet
        assert server.handle_line(b"S8") == OK and server.bitrate == 1_000_000
        assert server.handle_line(b"O") == OK
        assert server.handle_line(b"V").startswith(b"V")
        assert server.handle_line(b"t1002AABB") == b"z\r"
        received = peer.recv(timeout=1.0)
        assert (received.arbitration_id, bytes(received.data)) == (0x100, b"\xaa\xbb")
        for bad in (b"t1008AABB", b"t8002AABB", b"tXYZ0", b"hello", b"\x01\x02", b"t10092"):
            assert server.handle_line(bad) == ERROR
        assert server.garbage_lines == 6 and len(garbage) == 6
        assert peer.recv(timeout=0.05) is None  # nothing malformed reached the bus
    finally:
        server.shutdown()
        bus.shutdown()
        peer.shutdown()


@pytest.fixture
def emulator_process(modules):
    cmd = [sys.executable, "-m", "firmware_protocol.emulator", "--nodes", "1-3", "--feedback-rate", "50"]
    cmd += ["--watchdog-periods", "20"]  # about the slcan path, not the watchdog: robust on a loaded machine
    cmd += ["--firmware"] if modules == "firmware" else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_pc_drives_the_emulator_process_through_python_can_slcan(emulator_process):
    first = emulator_process.stdout.readline().strip()
    assert first.startswith("slcan: /dev/"), first
    bus = can.Bus(interface="slcan", channel=first.split(": ", 1)[1], bitrate=1_000_000)
    try:
        frame_id, data = CODEC.encode(MessageKind.COMMAND, 0, {"Command": int(Command.ENABLE), "TargetNode": 0})
        bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
        for k in range(8):
            for node in (1, 2, 3):
                values = dict(AngleH=5.0, AngleV=-2.0, RateH=0.0, RateV=0.0, Sequence=k)
                frame_id, data = CODEC.encode(MessageKind.REFERENCE, node, values)
                bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
            time.sleep(0.05)
        bus.serialPortOrig.write(b"garbage line\r\x00\x01\x02\rt1238AABB\r")  # noise on the serial line
        bus.serialPortOrig.flush()
        feedback = {}
        deadline = time.monotonic() + 10.0  # a failure guard on a loaded machine, not a speed claim
        while time.monotonic() < deadline and len(feedback) < 3:
            msg = bus.recv(timeout=0.1)
            if msg is not None and (CODEC.scheme.classify(msg.arbitration_id) or (None,))[0] is MessageKind.FEEDBACK:
                decoded = CODEC.decode(msg.arbitration_id, msg.data)
                if decoded.values["RefSequence"] == 7:
                    feedback[decoded.node] = decoded.values
        assert sorted(feedback) == [1, 2, 3]
        assert all(v["Enabled"] == 1 for v in feedback.values())
    finally:
        bus.shutdown()
    emulator_process.send_signal(signal.SIGTERM)
    out, _ = emulator_process.communicate(timeout=10)
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["accepted_references"] == [8, 8, 8]
    assert counters["serial_garbage_lines"] == 3
    assert counters["rejected_total"] == 0
    assert counters["slcan_frames_from_pc"] == 25


def test_emulator_cli_bad_link_is_one_line(tmp_path, capsys):
    from firmware_protocol.emulator.cli import main

    assert main(["--link", str(tmp_path / "no" / "such" / "dir" / "tty"), "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("aiko-emulator: cannot create --link"), err
