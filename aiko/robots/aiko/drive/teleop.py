"""Foxglove's Teleop panel as the operator input: it publishes to the run's live server (client publish).

What the panel sends (Foxglove Studio / Lichtblick, ``panels/Teleop``): it advertises its topic with schema name
``geometry_msgs/Twist`` and, while one of its four buttons is held, publishes ``{"linear": {"x", "y", "z"},
"angular": {"x", "y", "z"}}`` at its "publish rate" (default 1 Hz; 5 Hz drives better); by default up/down set
``linear.x`` = ±1 and left/right ``angular.z`` = ±1. Over the Foxglove WebSocket protocol the app publishes JSON when
the server lists ``json`` among its supported encodings, which the live server does for ``aiko drive --input
foxglove`` (``foxglove-sdk``'s ``Capability.ClientPublish``).

Mapping: ``linear.x`` is the speed factor (1 = the gait's own frequency, negative backwards), ``angular.z`` the
turn (−1 … 1, positive left). The panel sends nothing while no button is held, so it is a dead-man control: when
no message came for ``timeout_s`` the speed goes to 0 (the wave holds where it is; the turn is kept). A panel that
goes away (its channel unadvertised, the app closed) is a lost input; a teleop channel advertised again restores it.
Any client channel whose schema name ends in ``Twist`` (``geometry_msgs/Twist``, ``geometry_msgs/msg/Twist``) is
taken; set the panel's topic to e.g. ``/aiko/teleop``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

from aiko.robots.aiko.drive.session import InputDevice, Intent

log = logging.getLogger(__name__)


class FoxgloveTeleopInput(InputDevice):
    """Intents from Twist messages clients publish to the live Foxglove server (a ``ServerListener``)."""

    name = "foxglove"

    def __init__(self, timeout_s: float = 1.5) -> None:
        super().__init__()
        self.timeout_s = timeout_s
        self.channels: dict[tuple[int, int], str] = {}  # (client id, client channel id) -> topic
        self.messages = 0
        self.bad_messages = 0
        self._last_message = 0.0
        self._moving = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._ever_advertised = False

    def listener(self) -> FoxgloveTeleopInput:
        """What the live server is started with (``FoxgloveLiveServer(client_publish=...)``)."""
        return self

    def start(self) -> None:
        self._watchdog = threading.Thread(target=self._deadman, name="drive-teleop", daemon=True)
        self._watchdog.start()

    def close(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(0.5)

    def _deadman(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                if self._moving and time.monotonic() - self._last_message > self.timeout_s:
                    self._moving = False
                    self.intents.put(Intent("speed", 0.0))

    # -- foxglove.websocket.ServerListener
    def on_client_advertise(self, client: Any, channel: Any) -> None:
        if not str(channel.schema_name).endswith("Twist"):
            return
        if channel.encoding != "json":
            log.warning("teleop channel %s: encoding %s, only json is read", channel.topic, channel.encoding)
            return
        with self._lock:
            first = not self.channels
            self.channels[client.id, channel.id] = channel.topic
        log.info("teleop: client %s publishes %s (%s)", client.id, channel.topic, channel.schema_name)
        if first and self._ever_advertised:
            self.intents.put(Intent("restored"))
        self._ever_advertised = True

    def on_client_unadvertise(self, client: Any, client_channel_id: int) -> None:
        with self._lock:
            topic = self.channels.pop((client.id, client_channel_id), None)
            gone = topic is not None and not self.channels
            self._moving = False
        if gone:
            self.intents.put(Intent("lost", f"Foxglove teleop channel {topic} went away"))

    def on_message_data(self, client: Any, client_channel_id: int, data: bytes) -> None:
        if (client.id, client_channel_id) not in self.channels:
            return
        try:
            message = json.loads(bytes(data))
            linear = float(message["linear"]["x"])
            angular = float(message["angular"]["z"])
            if not (math.isfinite(linear) and math.isfinite(angular)):
                raise ValueError("not finite")
        except (ValueError, KeyError, TypeError) as exc:
            self.bad_messages += 1
            if self.bad_messages == 1:
                log.warning("teleop: a message that is not a JSON Twist was ignored (%s)", exc)
            return
        with self._lock:
            self.messages += 1
            self._last_message = time.monotonic()
            self._moving = True
        self.intents.put(Intent("speed", linear))
        self.intents.put(Intent("turn", max(-1.0, min(1.0, angular))))

    # the other callbacks of the protocol are not used
    def on_subscribe(self, client: Any, channel: Any) -> None:
        pass

    def on_unsubscribe(self, client: Any, channel: Any) -> None:
        pass
