"""The operator inputs: keys from a real terminal (a pty, as tmux gives), a recorded gamepad stream through the
live pad's mapping, and Foxglove's Teleop messages from the app's own client library."""

import json
import os
import pty
import queue
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiko.core.errors import AikoError
from aiko.log import LogReader
from aiko.robots.aiko.drive.gamepad import (
    ABS_RX,
    ABS_Y,
    BTN_NORTH,
    BTN_START,
    EV_ABS,
    EV_KEY,
    GamepadInput,
    GamepadMapping,
    read_stream,
)
from aiko.robots.aiko.drive.keyboard import decode_keys
from aiko.robots.aiko.drive.session import Intent

REPO = Path(__file__).resolve().parents[5]
NODE_TOOLS = REPO / "tools" / "foxglove"


def drain(q: queue.Queue) -> list[Intent]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


def test_keys_and_arrows_decode_even_when_an_escape_sequence_is_split():
    intents, rest = decode_keys(b"\x1b[A\x1b[A\x1b[D 2q\x1b[")
    assert [(i.kind, i.value) for i in intents] == [
        ("speed_step", 1.0),
        ("speed_step", 1.0),
        ("turn_step", 1.0),
        ("pause_toggle", None),
        ("gait", "sidewinding"),
        ("stop", None),
    ]
    more, rest = decode_keys(rest + b"C")
    assert [(i.kind, i.value) for i in more] == [("turn_step", -1.0)] and rest == b""


def test_aiko_drive_from_keys_typed_into_its_terminal(tmp_path):
    """The whole path a person uses: `aiko drive` in a terminal (a pty), keys typed, q to stop."""
    out = tmp_path / "keys.mcap"
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "drive", str(REPO / "experiments" / "sidewinding.toml"),
           "--backend", "kinematic", "--out", str(out), "--no-report"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
    os.close(slave)
    screen = b""

    def read_until(marker: bytes, timeout_s: float) -> None:
        nonlocal screen
        end = time.monotonic() + timeout_s
        while marker not in screen and time.monotonic() < end:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    screen += os.read(master, 4096)
                except OSError:
                    break
        assert marker in screen, screen[-2000:]

    try:
        read_until(b"| RUN", 120)  # the status line: the run is going
        for keys in (b"\x1b[A", b"\x1b[A", b"\x1b[D", b"1"):
            os.write(master, keys)
            time.sleep(0.4)
        read_until(b"gait lateral_undulation", 20)
        os.write(master, b"q")
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 0, screen[-2000:]
    assert "driven experiment:" in stdout
    commands = [(p["command"], p["value"], p["gait"]) for _, p in LogReader(out).messages("/drive/commands")]
    assert commands == [
        ("speed", 1.1, ""),
        ("speed", 1.2, ""),
        ("turn", 0.25, ""),
        ("gait", 0.0, "lateral_undulation"),
        ("stop", 0.0, ""),
    ]
    assert b"modules 10 EN" in screen


def test_drive_refuses_a_keyboard_without_a_terminal(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "aiko.cli", "drive", str(REPO / "experiments" / "sidewinding.toml"),
         "--backend", "kinematic", "--out", str(tmp_path / "x.mcap")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "needs a terminal" in done.stderr and "Traceback" not in done.stderr


def test_the_gamepad_mapping_is_dead_man_on_the_stick():
    mapping = GamepadMapping({ABS_Y: (-32768, 32767), ABS_RX: (-32768, 32767)}, max_speed=1.5)
    assert mapping(EV_ABS, ABS_Y, -32768) == [Intent("speed", 1.5)]  # full forward
    assert mapping(EV_ABS, ABS_Y, -32700) == []  # within the same 5 % step: nothing new
    assert mapping(EV_ABS, ABS_Y, 900) == [Intent("speed", 0.0)]  # released into the dead zone: hold
    assert mapping(EV_ABS, ABS_Y, 32767) == [Intent("speed", -1.0)]  # full back: backwards
    assert mapping(EV_ABS, ABS_RX, -32768) == [Intent("turn", 1.0)]  # right stick left: turn left
    assert mapping(EV_KEY, BTN_NORTH, 1) == [Intent("gait", "sidewinding")]
    assert mapping(EV_KEY, BTN_NORTH, 0) == []  # release of a button
    assert mapping(EV_KEY, BTN_START, 1) == [Intent("pause_toggle")]


def test_a_recorded_gamepad_stream_replays_through_the_same_mapping_and_ends_as_a_lost_input(tmp_path):
    stream = tmp_path / "pad.jsonl"
    lines = [
        {"absinfo": {str(ABS_Y): [0, 255], str(ABS_RX): [0, 255]}},
        {"t_s": 100.00, "type": EV_ABS, "code": ABS_Y, "value": 0},
        {"t_s": 100.10, "type": EV_ABS, "code": ABS_RX, "value": 255},
        {"t_s": 100.20, "type": EV_KEY, "code": BTN_NORTH, "value": 1},
    ]
    stream.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    recorded = tmp_path / "again.jsonl"
    pad = GamepadInput(replay=str(stream), record=str(recorded))
    pad.start()
    time.sleep(0.6)
    pad.close()
    intents = drain(pad.intents)
    assert [(i.kind, i.value) for i in intents] == [
        ("speed", 1.5),
        ("turn", -1.0),
        ("gait", "sidewinding"),
        ("lost", "end of the recorded gamepad stream"),
    ]
    events, absinfo = read_stream(recorded)  # what was replayed was recorded again, event for event
    assert absinfo == {ABS_Y: (0, 255), ABS_RX: (0, 255)} and [e[1:] for e in events] == [
        (EV_ABS, ABS_Y, 0),
        (EV_ABS, ABS_RX, 255),
        (EV_KEY, BTN_NORTH, 1),
    ]


def test_a_damaged_gamepad_stream_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t_s": 1, "type": 3}\n')
    with pytest.raises(AikoError, match="bad.jsonl:1: not a gamepad event line"):
        read_stream(bad)


@pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_TOOLS / "node_modules" / "@foxglove" / "ws-protocol").is_dir(),
    reason="needs node and the viewer tooling: cd tools/foxglove && npm ci",
)
def test_foxglove_teleop_messages_from_the_apps_client_library_steer_and_release_holds():
    from aiko.log.live_foxglove import FoxgloveLiveServer
    from aiko.robots.aiko.drive.teleop import FoxgloveTeleopInput

    teleop = FoxgloveTeleopInput(timeout_s=0.6)
    teleop.start()
    server = FoxgloveLiveServer(None, 6, host="127.0.0.1", port=0, client_publish=teleop.listener())
    try:
        # held up+left at 5 Hz for 1 s, released 1 s, held down+right 0.6 s, then the panel goes away
        script = json.dumps([[1.0, 1.2, 0.5, 5], [1.0, 0, 0, 0], [0.6, -1, -1, 5]])
        done = subprocess.run(
            ["node", str(NODE_TOOLS / "teleop_publish.mjs"), server.url, "/aiko/teleop", script, "foxglove.sdk.v1"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        time.sleep(0.3)
    finally:
        server.close()
        teleop.close()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["encoding"] == "json" and "clientPublish" in report["capabilities"]
    kinds = [(i.kind, i.value) for i in drain(teleop.intents)]
    assert kinds[:2] == [("speed", 1.2), ("turn", 0.5)]
    assert ("speed", 0.0) in kinds  # released: the dead-man holds the robot
    assert ("speed", -1.0) in kinds and ("turn", -1.0) in kinds
    assert kinds[-1][0] == "lost"  # the panel unadvertised its topic
    assert teleop.messages == report["sent"]


def test_the_event_codes_are_the_kernels_and_no_pad_is_one_clear_error(monkeypatch):
    evdev = pytest.importorskip("evdev", reason="the gamepad extra: pip install 'aiko[gamepad]'")
    from aiko.robots.aiko.drive import gamepad

    for name in ("EV_KEY", "EV_ABS", "ABS_X", "ABS_Y", "ABS_RX", "ABS_HAT0X", "ABS_HAT0Y", "BTN_SOUTH", "BTN_EAST",
                 "BTN_NORTH", "BTN_WEST", "BTN_SELECT", "BTN_START"):  # fmt: skip
        assert getattr(gamepad, name) == getattr(evdev.ecodes, name), name
    monkeypatch.setattr(evdev, "list_devices", lambda: [])
    with pytest.raises(AikoError, match="no gamepad found"):
        gamepad.open_gamepad(None)
