"""``aiko run --foxglove [PORT]``: the run served live over the Foxglove WebSocket protocol (foxglove-sdk server).

Open Foxglove, "Open connection", ``ws://127.0.0.1:8765``: every channel of the log (JSON, as recorded) and the
Foxglove-schema views of ``aiko.log.foxglove_views`` (3D body, joint states, rod) arrive as the run goes.

The control loop only pays a ``put_nowait`` per record: a bounded queue hands records to a sender thread that
encodes them and gives them to the SDK's server (which keeps its own bounded per-client backlog). A full queue
drops the record for the live view and counts it (``dropped``); the log file is written separately and misses
nothing. The server binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any

from aiko.core.errors import AikoError
from aiko.log.encoding import encode, infer_schema
from aiko.log.foxglove_views import BodyDrawing, FoxgloveUnavailable, FoxgloveViews

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
_STOP = ("", 0, {})


class FoxgloveLiveServer:
    """A Recorder that serves what it is given on a Foxglove WebSocket server; use as a context manager.

    ``record``/``event`` never block. ``port=0`` picks a free port (``self.port`` tells which).
    """

    def __init__(
        self,
        body: BodyDrawing | None = None,
        tracked_link: int = 6,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        queue_size: int = 4096,
        name: str = "aiko",
        body_from_joints: bool = True,
        client_publish: Any | None = None,
    ) -> None:
        try:
            import foxglove
        except ImportError:
            raise AikoError("--foxglove needs the foxglove-sdk package: pip install foxglove-sdk") from None
        try:
            self._views: FoxgloveViews | None = FoxgloveViews(body, tracked_link, body_from_joints=body_from_joints)
        except FoxgloveUnavailable as exc:
            raise AikoError(str(exc)) from None
        self._fg = foxglove
        self._context = foxglove.Context()
        try:
            # client_publish: a ServerListener that takes what clients publish (aiko drive: the Teleop panel);
            # Studio publishes JSON when the server lists it among its supported encodings
            publish = {} if client_publish is None else {
                "capabilities": [foxglove.Capability.ClientPublish],
                "supported_encodings": ["json"],
                "server_listener": client_publish,
            }  # fmt: skip
            self._server = foxglove.start_server(name=name, host=host, port=port, context=self._context, **publish)
        except Exception as exc:  # port in use, bad address: the SDK raises its own types
            raise AikoError(f"--foxglove: cannot serve on {host}:{port}: {exc}") from None
        self.host = host
        self.port = int(self._server.port)
        self.log_time_offset_ns = time.time_ns() - time.monotonic_ns()
        self.dropped = 0
        self.sent = 0
        self._queue: queue.Queue[tuple[str, int, dict[str, Any]]] = queue.Queue(maxsize=queue_size)
        self._channels: dict[str, Any] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._send_loop, name="foxglove-live", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    # -- Recorder protocol (the control loop's side)
    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait((channel, t_ns, payload))
        except queue.Full:
            self.dropped += 1

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        self.record("/events", t_ns, {"kind": kind, **fields})

    # -- sender thread
    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            channel, t_ns, payload = item
            try:
                self._send(channel, t_ns, payload)
            except Exception:  # the live view is a convenience: never take the run down with it
                log.exception("Foxglove live view: sending %s failed", channel)

    def _send(self, topic: str, t_ns: int, payload: dict[str, Any]) -> None:
        epoch_ns = t_ns + self.log_time_offset_ns
        data = encode(payload)
        json_schema = lambda: self._fg.Schema(
            name="aiko" + topic.replace("/", "."),
            encoding="jsonschema",
            data=json.dumps(infer_schema(payload)).encode(),
        )
        self._channel(topic, json_schema, "json").log(data, log_time=epoch_ns)
        self.sent += 1
        if self._views is None:
            return
        for view_topic, message in self._views.messages(topic, epoch_ns, json.loads(data)):
            schema = type(message).get_schema()
            channel = self._channel(view_topic, lambda s=schema: self._fg.Schema(
                name=s.name, encoding=s.encoding, data=bytes(s.data)), schema.encoding)  # fmt: skip
            channel.log(message.encode(), log_time=epoch_ns)
            self.sent += 1

    def _channel(self, topic: str, schema: Any, encoding: str) -> Any:
        channel = self._channels.get(topic)
        if channel is None:
            channel = self._fg.Channel(topic, message_encoding=encoding, schema=schema(), context=self._context)
            self._channels[topic] = channel
        return channel

    def close(self, drain_timeout_s: float = 5.0) -> None:
        """Send what is queued (up to ``drain_timeout_s``), then stop the server. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + drain_timeout_s
        while True:
            try:
                self._queue.put(_STOP, timeout=0.1)
                break
            except queue.Full:
                if time.monotonic() > deadline:
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()) + 0.5)
        self._server.stop()

    def __enter__(self) -> FoxgloveLiveServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
