"""The emulator as a separate process speaking slcan on a pty, driven through python-can's slcan interface."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import can
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiko.core.background_stream import THREAD_NAME
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


def test_a_pc_that_does_not_read_makes_the_adapter_drop_frames_not_stop_listening():
    """Nobody reads the pty (a frozen PC, a tool that left the channel open and exited): its buffer fills and the
    frames toward the PC are dropped, as an adapter's overflow drops them, while the PC's own frames are still
    handled; whoever opens the port next finds at most a buffer of stale frames, not minutes of them."""
    bus = can.Bus(interface="virtual", channel="test-slcan-overflow")
    peer = can.Bus(interface="virtual", channel="test-slcan-overflow")
    server = SlcanPtyServer(bus)
    slave = os.open(server.slave_path, os.O_RDWR | os.O_NOCTTY)
    try:
        server.start()
        os.write(slave, b"O\r")
        give_up = time.monotonic() + 30.0  # liveness only
        while not server.channel_open and time.monotonic() < give_up:
            time.sleep(0.01)
        for k in range(20_000):  # ~440 kB of feedback-like frames that nobody reads
            frame = can.Message(arbitration_id=0x201, data=k.to_bytes(8, "little"), is_extended_id=False)
            server.on_message_received(frame)
        assert server.frames_dropped_to_pc > 0 and server.frames_to_pc + server.frames_dropped_to_pc == 20_000
        os.write(slave, b"t1002AABB\r")  # the PC still reaches the bus
        received = peer.recv(timeout=30.0)
        assert received is not None and (received.arbitration_id, bytes(received.data)) == (0x100, b"\xaa\xbb")
        os.set_blocking(slave, False)
        stale = b""
        while True:
            try:
                chunk = os.read(slave, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            stale += chunk
        lines = stale.split(b"\r")[1:-1]  # after the answer to O: whole lines, none cut
        assert lines and all(line == b"z" or (line[:5] == b"t2018" and len(line) == 21) for line in lines)
        assert len(stale) < 200_000  # a pty's buffer, not the 20 000 frames
    finally:
        os.close(slave)
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
        deadline = time.monotonic() + 60.0  # liveness only: ends as soon as all three answered
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


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (the AVR simulator harness, for --firmware)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _gone(pid: int, within_s: float) -> bool:
    """True once ``pid`` has exited and been reaped (a zombie still counts as left over)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                time.sleep(0.05)
                continue
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("how", ["SIGTERM to the process", "Ctrl-C (SIGINT to its process group)"])
def test_emulator_process_ends_cleanly_when_signalled(modules, how):
    """A device emulator ends on SIGTERM or a terminal's Ctrl-C after serving a PC: exit 0, its counters printed,
    no traceback, the harness process reaped. The bound is a hang detector (60 s), not a speed claim."""
    cmd = [sys.executable, "-m", "firmware_protocol.emulator", "--nodes", "1-10"]
    cmd += ["--firmware"] if modules == "firmware" else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = proc.stdout.readline().strip()
        assert first.startswith("slcan: /dev/"), first + proc.stderr.read()
        helpers = _children(proc.pid)
        assert len(helpers) == (1 if modules == "firmware" else 0), helpers
        bus = can.Bus(interface="slcan", channel=first.split(": ", 1)[1], bitrate=1_000_000)
        try:
            heard = 0
            deadline = time.monotonic() + 30.0
            while heard < 20 and time.monotonic() < deadline:  # heartbeats and feedback: the modules are running
                heard += bus.recv(timeout=0.1) is not None
            assert heard >= 20
        finally:
            bus.shutdown()
        if how.startswith("SIGTERM"):
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the harness gets it too
        out, err = proc.communicate(timeout=60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["state"] == ["DISABLED"] * 10
    assert all(_gone(pid, within_s=10.0) for pid in helpers)


def test_emulator_process_says_so_when_the_avr_simulator_dies(modules):
    """The harness killed under a running `aiko emulate can --firmware`: one line on stderr, exit 1, no hang."""
    if modules != "firmware":
        pytest.skip("the Python model has no simulator process")
    cmd = [sys.executable, "-m", "firmware_protocol.emulator", "--nodes", "1-2", "--firmware"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline().strip()
        assert first.startswith("slcan: /dev/"), first
        (harness,) = _children(proc.pid)
        os.kill(harness, signal.SIGKILL)
        out, err = proc.communicate(timeout=60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err, err
    assert "aiko-emulator: the AVR simulator harness" in err, err
    assert _gone(harness, within_s=10.0)


def _fifo_granted() -> bool:
    try:
        fifo = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))"
        probe = subprocess.run([sys.executable, "-c", fifo])
    except OSError:
        return False
    return probe.returncode == 0 and hasattr(os, "sched_getscheduler")


@pytest.mark.skipif(not _fifo_granted(), reason="SCHED_FIFO is not granted to this user (no CAP_SYS_NICE/rtprio)")
def test_rt_priority_raises_every_thread_on_the_frame_path(modules):
    """`aiko emulate can --rt-priority P`: the slcan reader, the Notifier that writes the modules' frames to the pty and
    the modules' own thread all run at SCHED_FIFO P, not only the main thread (issue 26: they started first and
    stayed at normal priority; the PC's frames reached the modules up to 40 ms late). With --firmware the AVR
    simulator's process, which does the modules' work, runs at P as well."""
    cmd = [sys.executable, "-m", "aiko.cli", "emulate", "can", "--rt-priority", "7", "--nodes", "1-2"]
    cmd += ["--firmware"] if modules == "firmware" else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("slcan: ")
        tasks = Path(f"/proc/{proc.pid}/task")
        give_up = time.monotonic() + 60.0  # liveness only: the last thread starts right after the first line
        while len(list(tasks.iterdir())) < 5 and time.monotonic() < give_up:  # the four + stderr's writer
            time.sleep(0.05)
        helpers = _children(proc.pid)
        tasks = [t for pid in [proc.pid, *helpers] for t in Path(f"/proc/{pid}/task").iterdir()]
        policies = {
            (int(t.name), (t / "comm").read_text().strip()): (
                os.sched_getscheduler(int(t.name)),
                os.sched_getparam(int(t.name)).sched_priority,
            )
            for t in tasks
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    # stderr's writer (aiko.core.background_stream) is off the frame path by design: the real-time threads hand it
    # their log lines and never wait for it; at normal priority it cannot take a CPU from them
    writers = {key: policy for key, policy in policies.items() if key[1] == THREAD_NAME}
    assert list(writers.values()) == [(os.SCHED_OTHER, 0)], policies
    frame_path = {key: policy for key, policy in policies.items() if key[1] != THREAD_NAME}
    assert len(helpers) == (1 if modules == "firmware" else 0), helpers
    assert len(frame_path) >= 4 + len(helpers), policies  # main, slcan reader, Notifier, modules' thread (+ harness)
    assert set(frame_path.values()) == {(os.SCHED_FIFO, 7)}, policies


def test_rt_priority_out_of_range_is_one_line(capsys):
    from firmware_protocol.emulator.cli import main

    assert main(["--rt-priority", "100", "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err == "aiko-emulator: --rt-priority 100: allowed 0 (off) .. 99\n"
