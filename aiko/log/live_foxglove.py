"""``aiko run --foxglove [PORT]``: the run served live over the Foxglove WebSocket protocol (foxglove-sdk server).

Open Foxglove, "Open connection", ``ws://127.0.0.1:8765``: every channel of the log and the Foxglove-schema views of
``aiko.log.foxglove_views`` (3D body, joint states, rod) arrive as the run goes. Each channel has the schema the log
file has, name and content (its declaration, :mod:`aiko.core.messages`; ``/events``: :mod:`aiko.core.events`), and
the same JSON bytes per message.

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
from aiko.core.events import EVENT_SCHEMA_NAME, EVENTS_TOPIC, events_json_schema
from aiko.core.messages import message_of
from aiko.log.encoding import event_bytes, message_bytes, payload_decoder, schema_bytes
from aiko.log.foxglove_views import BodyDrawing, FoxgloveUnavailable, FoxgloveViews
from aiko.log.live_relay import LegacySubprotocolRelay

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
_STOP = ("", "", 0, {})


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
        legacy_port: int | None = None,
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
        self.legacy: LegacySubprotocolRelay | None = None
        if legacy_port is not None:
            try:
                local = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # where this process reaches the SDK
                self.legacy = LegacySubprotocolRelay(f"ws://{local}:{self.port}", host, legacy_port)
            except OSError as exc:
                self._server.stop()
                raise AikoError(f"--foxglove-legacy: cannot serve on {host}:{legacy_port}: {exc}") from None
        self.log_time_offset_ns = time.time_ns() - time.monotonic_ns()
        self.dropped = 0
        self.sent = 0
        self._queue: queue.Queue[tuple[str, str, int, Any]] = queue.Queue(maxsize=queue_size)
        self._channels: dict[str, Any] = {}
        self._decoders: dict[str, Any] = {}
        self._json_channel(EVENTS_TOPIC, EVENT_SCHEMA_NAME, events_json_schema())  # announced from the start
        self._closed = False
        self._thread = threading.Thread(target=self._send_loop, name="foxglove-live", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def legacy_url(self) -> str | None:
        """Where apps that offer only ``foxglove.websocket.v1`` connect (``legacy_port``), or None."""
        return self.legacy.url if self.legacy is not None else None

    # -- Recorder protocol (the control loop's side)
    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        self._put(("record", channel, t_ns, payload))

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        self._put(("event", kind, t_ns, fields))

    def _put(self, item: tuple[str, str, int, Any]) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    # -- sender thread
    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            what, name, t_ns, payload = item
            try:
                if what == "event":
                    self._send_event(name, t_ns, payload)
                else:
                    self._send(name, t_ns, payload)
            except Exception:  # the live view is a convenience: never take the run down with it
                log.exception("Foxglove live view: sending %s failed", name)

    def _send_event(self, kind: str, t_ns: int, fields: dict[str, Any]) -> None:
        self._channels[EVENTS_TOPIC].log(event_bytes(kind, fields), log_time=t_ns + self.log_time_offset_ns)
        self.sent += 1

    def _send(self, topic: str, t_ns: int, payload: dict[str, Any]) -> None:
        """One record on its declared channel (the log's schema and bytes), then its Foxglove-schema views."""
        epoch_ns = t_ns + self.log_time_offset_ns
        message = message_of(topic)
        data = message_bytes(topic, payload)
        if str(topic) not in self._channels:
            schema = message.json_schema()
            self._json_channel(str(topic), message.name, schema)
            self._decoders[str(topic)] = payload_decoder(schema)
        self._channels[str(topic)].log(data, log_time=epoch_ns)
        self.sent += 1
        if self._views is None:
            return
        decode = self._decoders[str(topic)]
        logged = json.loads(data)
        for view_topic, message in self._views.messages(str(topic), epoch_ns, decode(logged) if decode else logged):
            schema = type(message).get_schema()
            channel = self._channel(view_topic, lambda s=schema: self._fg.Schema(
                name=s.name, encoding=s.encoding, data=bytes(s.data)), schema.encoding)  # fmt: skip
            channel.log(message.encode(), log_time=epoch_ns)
            self.sent += 1

    def _json_channel(self, topic: str, name: str, schema: dict[str, Any]) -> None:
        """A JSON channel with its declared schema: the bytes the log file holds for it (``schema_bytes``)."""
        fg_schema = self._fg.Schema(name=name, encoding="jsonschema", data=schema_bytes(schema))
        self._channels[topic] = self._fg.Channel(topic, message_encoding="json", schema=fg_schema,
                                                 context=self._context)  # fmt: skip

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
        if self.legacy is not None:
            self.legacy.close()
        self._server.stop()

    def __enter__(self) -> FoxgloveLiveServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
