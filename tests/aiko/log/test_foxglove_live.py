"""``aiko run --foxglove``: a real WebSocket client (Foxglove's protocol) subscribes and receives the live run."""

import json
import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from aiko.core.events import events_json_schema
from aiko.log.live_foxglove import FoxgloveLiveServer
from aiko.robots.aiko.description import load_robot
from aiko.robots.aiko.joints import FEEDBACK_CHANNEL
from aiko.robots.aiko.shape import body_drawing

from ._channels import COUNTER

ROOT = Path(__file__).resolve().parents[3]
SUBPROTOCOL = "foxglove.sdk.v1"


def receive(url: str, topics: set[str], want: int = 3, timeout_s: float = 60.0) -> dict[str, list[tuple[int, bytes]]]:
    """Connect, subscribe to ``topics`` as they are advertised, return {topic: [(log_time, data), ...]}."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ws = connect(url, subprotocols=[SUBPROTOCOL], open_timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    by_sub: dict[int, str] = {}
    advertised: dict[str, tuple[int, float]] = {}  # topic -> (channel id, when to (re)subscribe)
    got: dict[str, list[tuple[int, bytes]]] = {}
    with ws:
        while time.monotonic() < deadline and not (set(got) == topics and all(len(v) >= want for v in got.values())):
            now = time.monotonic()
            # subscribe a little after the advertisement (the server may not know a channel it just advertised),
            # and again while a subscribed channel stays silent
            due = [(t, c) for t, (c, when) in advertised.items() if when <= now and t not in got]
            if due:
                subs = []
                for topic, channel_id in due:
                    by_sub[len(by_sub) + 1] = topic
                    subs.append({"id": len(by_sub), "channelId": channel_id})
                    advertised[topic] = (channel_id, now + 2.0)
                ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
            try:
                frame = ws.recv(timeout=0.1)
            except TimeoutError:
                continue
            except ConnectionClosed:
                break
            if isinstance(frame, str):
                op = json.loads(frame)
                if op.get("op") == "advertise":
                    for ch in op["channels"]:
                        if ch["topic"] in topics:
                            advertised[ch["topic"]] = (ch["id"], time.monotonic() + 0.3)
            elif frame[0] == 1:  # message data: opcode, subscription id, log time, payload
                sub, log_time = struct.unpack_from("<IQ", frame, 1)
                got.setdefault(by_sub[sub], []).append((log_time, frame[13:]))
    return got


def test_a_websocket_client_subscribes_and_receives_json_and_foxglove_schema_channels():
    robot = load_robot(ROOT / "experiments/robots/aiko.toml")
    n = robot.n_joints
    with FoxgloveLiveServer(body_drawing(robot), tracked_link=6, port=0) as server:
        assert server.url.startswith("ws://127.0.0.1:")
        stop = threading.Event()

        def feed():
            k = 0
            while not stop.is_set():
                t_ns = time.monotonic_ns()
                angles = [0.2 * np.sin(0.05 * k + j) for j in range(n)]
                server.record(FEEDBACK_CHANNEL, t_ns, {"t_s": 0.01 * k, "angle_h_rad": angles,
                                                        "angle_v_rad": [0.0] * n, "rate_h_rad_s": [0.0] * n,
                                                        "rate_v_rad_s": [0.0] * n, "status": [1] * n})  # fmt: skip
                k += 1
                time.sleep(0.01)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            got = receive(server.url, {"/joint_feedback", "/foxglove/tf", "/foxglove/joint_states"})
        finally:
            stop.set()
            feeder.join()
    assert all(len(got[t]) >= 3 for t in ("/joint_feedback", "/foxglove/tf", "/foxglove/joint_states")), {
        t: len(v) for t, v in got.items()
    }
    log_time, data = got["/joint_feedback"][0]
    assert abs(log_time - time.time_ns()) < 120 * 10**9  # epoch time, as in the log
    assert len(json.loads(data)["angle_h_rad"]) == n
    assert b"link11" in got["/foxglove/tf"][0][1]
    assert server.dropped == 0


def test_recording_never_waits_for_the_server_a_full_queue_drops_and_counts():
    with FoxgloveLiveServer(None, port=0, queue_size=4) as server:
        start = time.perf_counter()
        for k in range(20_000):
            server.record(COUNTER, k, {"k": k})
        elapsed = time.perf_counter() - start
    assert server.dropped > 0
    assert server.dropped + server.sent <= 20_000
    assert elapsed < 2.0  # a put_nowait each: no waiting on encoding or the network


@pytest.mark.slow
def test_aiko_run_foxglove_serves_the_run_live(tmp_path):
    out = tmp_path / "live.mcap"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiko.cli", "run", str(ROOT / "experiments/sidewinding.toml"), "--backend",
         "kinematic", "--realtime", "--duration", "8", "--out", str(out), "--no-report", "--foxglove", "0", "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        match = re.search(r"ws://127\.0\.0\.1:(\d+)", line)
        assert match, line
        got = receive(match.group(0), {"/joint_feedback", "/references"})
        stdout, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert len(got["/joint_feedback"]) >= 3 and len(got["/references"]) >= 3
    summary = json.loads(stdout)
    assert summary["foxglove_dropped_records"] == 0 and summary["foxglove_sent_messages"] > 0


def test_a_port_in_use_is_one_line_naming_it():
    from aiko.core.errors import AikoError

    with FoxgloveLiveServer(None, port=0) as first:
        with pytest.raises(AikoError, match=f"cannot serve on 127.0.0.1:{first.port}"):
            FoxgloveLiveServer(None, port=first.port)


# -- the real client of the Foxglove WebSocket protocol, per subprotocol we serve -----------------------------
TOOLS = ROOT / "tools" / "foxglove"


def _ws_listen(url: str, subprotocol: str, seconds: float, *topics: str) -> subprocess.Popen:
    """``@foxglove/ws-protocol``'s FoxgloveClient (node), offering ``subprotocol``: subscribes to everything."""
    import shutil

    node = shutil.which("node")
    if node is None or not (TOOLS / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
        pytest.skip("needs node (Debian: apt-get install nodejs npm) and the client: cd tools/foxglove && npm ci")
    return subprocess.Popen([node, str(TOOLS / "ws_listen.mjs"), url, subprotocol, str(seconds), *topics],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=120)
    assert out.strip(), err[-2000:]
    return json.loads(out)


@pytest.mark.slow
def test_the_ws_protocol_client_gets_the_files_schemas_on_both_subprotocols(tmp_path):
    """`aiko run --foxglove 0 --foxglove-legacy 0`: Foxglove's own client connects over foxglove.sdk.v1 to the SDK
    server and over foxglove.websocket.v1 (Foxglove Studio 1.x's) to the relay; each subscribes and receives, and
    every JSON channel it is announced has the log file's schema, name and bytes (/events too); the live events are
    the file's. Offered to the SDK server, foxglove.websocket.v1 is refused (HTTP 400): why the relay exists."""
    out = tmp_path / "live.mcap"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiko.cli", "run", str(ROOT / "experiments/sidewinding.toml"), "--backend",
         "kinematic", "--set", "mocap.source=simulated", "--realtime", "--duration", "12", "--out", str(out),
         "--no-report", "--foxglove", "0", "--foxglove-legacy", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = [proc.stderr.readline() for _ in range(2)]  # both printed before the run starts
        sdk_url, legacy_url = (re.search(r"ws://127\.0\.0\.1:\d+", line) for line in lines)
        assert sdk_url and legacy_url and "websocket.v1" in lines[1], lines
        wanted = ("/joint_feedback", "/references", "/mocap", "/foxglove/tf")
        clients = {
            "sdk": _ws_listen(sdk_url.group(0), "foxglove.sdk.v1", 20, *wanted),
            "legacy": _ws_listen(legacy_url.group(0), "foxglove.websocket.v1", 20, *wanted),
            "legacy_on_sdk_port": _ws_listen(sdk_url.group(0), "foxglove.websocket.v1", 10),
        }
        live = {name: _result(client) for name, client in clients.items()}
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert live["legacy_on_sdk_port"]["errors"][0] == "handshake refused: HTTP 400"
    with open(out, "rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        file_schemas = {ch.topic: summary.schemas[ch.schema_id] for ch in summary.channels.values()}
        file_events = [json.loads(m.data) for _, _, m in reader.iter_messages(topics=["/events"])]
    for name, subprotocol in (("sdk", "foxglove.sdk.v1"), ("legacy", "foxglove.websocket.v1")):
        got = live[name]
        assert got["subprotocol"] == subprotocol and got["errors"] == [], (name, got["errors"])
        assert all(got["counts"].get(topic, 0) >= 3 for topic in wanted), (name, got["counts"])
        channels = {c["topic"]: c for c in got["channels"]}
        for topic, channel in channels.items():
            schema = file_schemas[topic]
            assert channel["schemaName"] == schema.name, (name, topic)
            if channel["encoding"] == "json":  # the same declaration, the same bytes (protobuf: base64 live)
                assert channel["schemaEncoding"] == "jsonschema" and channel["schema"] == schema.data.decode()
        assert channels["/events"]["schemaName"] == "aiko.Event"
        assert json.loads(channels["/events"]["schema"]) == events_json_schema()
        assert all(event in file_events for event in got["events"]), (name, got["events"][:3])
        position = got["first"]["/mocap"]["position_m"][0]
        assert set(position) == {"x", "y", "z"}  # a vector is an object live as in the file


def test_a_bad_legacy_port_is_one_line_and_a_taken_one_names_itself(capsys):
    from aiko.cli import main
    from aiko.core.errors import AikoError

    argv = ["run", str(ROOT / "experiments/sidewinding.toml"), "--duration", "0.1", "--foxglove-legacy", "70000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--foxglove-legacy PORT must be in 0..65535, got 70000" in err
    with FoxgloveLiveServer(None, port=0) as first:
        with pytest.raises(AikoError, match=f"--foxglove-legacy: cannot serve on 127.0.0.1:{first.port}"):
            FoxgloveLiveServer(None, port=0, legacy_port=first.port)
