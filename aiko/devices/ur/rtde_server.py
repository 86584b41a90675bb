"""The emulated controller's RTDE server (TCP 30004): one thread per client connection, recipes, data packages.

Protocol facts: :mod:`aiko.devices.ur.rtde_protocol`. What the controller does with a client's inputs and what it
publishes is the controller's business (:class:`aiko.devices.ur.emulator.UR3Emulator`, reached through the
:class:`RtdeController` protocol); this module only speaks RTDE and keeps each connection's recipes and inputs.

A dead session's inputs are released: when its socket reports end of file or an error, and when the client stops
reading (no byte of a data package accepted for ``STALLED_AFTER_S``), the connection is shut down and every input
it held is free for the next client, as the controller frees them for a client that has gone. Data packages are
written without blocking (a client that is behind loses whole packages, never the framing), so one stuck client
never stalls the controller's tick for the others; control replies are written by the connection's own thread.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from aiko.devices.ur import rtde_protocol as rp

log = logging.getLogger(__name__)

RTDE_PORT = 30004
STALLED_AFTER_S = 2.0
SEND_BUFFER_BYTES = 64 * 1024


class RtdeController(Protocol):
    """What the RTDE server needs from the controller."""

    lock: threading.RLock
    rate_hz: float
    version: tuple[int, int, int, int]

    def inputs_received(self, values: dict[str, object]) -> bool: ...
    def publish_now(self) -> None: ...


@dataclass
class RtdeConnection:
    sock: socket.socket
    conn_id: int
    protocol_version: int = 1
    output: rp.Recipe | None = None
    output_divisor: int = 1
    inputs: dict[int, rp.Recipe] = field(default_factory=dict)
    started: bool = False
    dead: bool = False
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    pending: bytes = b""  # the unsent rest of a data package the client's socket did not take whole
    last_progress_s: float = field(default_factory=time.monotonic)
    dropped: int = 0
    last_state: int = -1  # the build number of the newest state package sent (see `send_data`)
    stale_dropped: int = 0

    def reply(self, data: bytes) -> bool:
        """A control reply (from this connection's own thread): after any pending bytes, blocking."""
        with self.send_lock:
            try:
                self.sock.sendall(self.pending + data)
                self.pending = b""
                self.last_progress_s = time.monotonic()
                return True
            except OSError:
                self._kill()
                return False

    def send_data(self, data: bytes, state: int | None = None) -> bool:
        """A data package or text message, from the tick: never blocks. A client that is behind loses it (the
        partial one before it is completed first); one that takes nothing for STALLED_AFTER_S is cut off.

        ``state``: the build number of a state package (the controller numbers them under its lock, in the order
        it builds them). Two threads send them, the tick and an input's ``publish_now``, each after releasing the
        controller's lock, so one built earlier can reach the socket after one built later; it is then dropped,
        not sent: a client must never see an older state after a newer one. (Else ur_rtde can take a stale
        DONE_WITH_CMD of the last move, arriving after the READY it sent its next moveJ on, as the new move's and
        return True at once: the likely cause of a 0 s move seen once in `make test` on a busy machine.)"""
        if not self.send_lock.acquire(blocking=False):
            self.dropped += 1
            return False
        try:
            if self.dead or not self.started:
                return False
            if state is not None:
                if state <= self.last_state:
                    self.stale_dropped += 1
                    return False
                self.last_state = state
            now = time.monotonic()
            if self.pending:
                self.pending = self.pending[self._send_some(self.pending) :]
                if self.pending:
                    self.dropped += 1
                    self._check_stalled(now)
                    return False
            sent = self._send_some(data)
            if sent < len(data):
                self.pending = data[sent:]
                self._check_stalled(now)
            return sent > 0
        finally:
            self.send_lock.release()

    def _send_some(self, data: bytes) -> int:
        try:
            n = self.sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0
        except OSError:
            self._kill()
            return len(data)
        if n > 0:
            self.last_progress_s = time.monotonic()
        return n

    def _check_stalled(self, now: float) -> None:
        if now - self.last_progress_s > STALLED_AFTER_S:
            log.warning("RTDE client %d has read nothing for %.1f s: disconnected", self.conn_id, STALLED_AFTER_S)
            self._kill()

    def _kill(self) -> None:
        """Shut the socket down: the connection's thread sees it and releases the inputs it held."""
        self.dead = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class RtdeServer:
    """The RTDE connections of one controller: input ownership (``IN_USE``), recipes, data in and out."""

    def __init__(self, controller: RtdeController) -> None:
        self.controller = controller
        self.connections: dict[int, RtdeConnection] = {}
        self.input_owner: dict[str, int] = {}
        self._next_conn = 1
        self.data_in = 0

    def serve(self, sock: socket.socket) -> None:
        """One client connection, until it closes (runs in its own thread)."""
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        # A fixed send buffer (no autotuning up to megabytes): a client that stops reading fills it in seconds,
        # and is then cut off (STALLED_AFTER_S) instead of holding its inputs for minutes.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        with self.controller.lock:
            conn = RtdeConnection(sock, self._next_conn)
            self._next_conn += 1
            self.connections[conn.conn_id] = conn
        buffer = bytearray()
        try:
            while not conn.dead:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                # Acknowledge at once: a client with nothing coming back (rtde_io has no output recipe) and Nagle's
                # algorithm on would otherwise hold its next small packet for our delayed ACK (40 ms).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                buffer.extend(chunk)
                for kind, payload in rp.split_packets(buffer):
                    self._packet(conn, kind, payload)
        except (OSError, rp.ProtocolError):
            pass
        finally:
            conn.dead = True
            with self.controller.lock:
                self.connections.pop(conn.conn_id, None)
                released = [n for n, owner in self.input_owner.items() if owner == conn.conn_id]
                for name in released:
                    del self.input_owner[name]
            if released:
                log.info("RTDE client %d gone: %d inputs released", conn.conn_id, len(released))
            sock.close()

    def close_all(self) -> None:
        with self.controller.lock:
            conns = list(self.connections.values())
        for c in conns:
            c._kill()

    def due(self, tick: int) -> list[RtdeConnection]:
        """The started connections whose output recipe is due at controller tick ``tick`` (lock held)."""
        return [
            c
            for c in self.connections.values()
            if c.started and not c.dead and c.output is not None and tick % c.output_divisor == 0
        ]

    def broadcast_text(self, message: str) -> None:
        with self.controller.lock:
            conns = [c for c in self.connections.values() if c.started and c.protocol_version >= 2]
        for c in conns:
            c.send_data(rp.text_message(message))

    def _packet(self, conn: RtdeConnection, kind: int, payload: bytes) -> None:
        if kind == rp.DATA_PACKAGE:
            self._data_in(conn, payload)
        elif kind == rp.REQUEST_PROTOCOL_VERSION:
            version = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 0
            ok = version in (1, 2)
            if ok:
                conn.protocol_version = version
            conn.reply(rp.accepted_reply(kind, ok))
        elif kind == rp.GET_URCONTROL_VERSION:
            conn.reply(rp.controller_version_reply(*self.controller.version))
        elif kind == rp.CONTROL_PACKAGE_SETUP_OUTPUTS:
            frequency, names = rp.parse_setup_outputs(payload, conn.protocol_version)
            types = tuple(rp.OUTPUT_TYPES.get(n, "NOT_FOUND") for n in names)
            recipe = rp.Recipe(1, tuple(names), types)
            rate = self.controller.rate_hz
            if recipe.valid and frequency > 0:
                conn.output = recipe
                conn.output_divisor = max(1, round(rate / min(frequency, rate)))
            conn.reply(rp.setup_reply(kind, 1 if recipe.valid else 0, types))
        elif kind == rp.CONTROL_PACKAGE_SETUP_INPUTS:
            conn.reply(self._setup_inputs(conn, rp.parse_setup_inputs(payload)))
        elif kind == rp.CONTROL_PACKAGE_START:
            ok = conn.output is not None or bool(conn.inputs)
            with conn.send_lock:
                try:
                    conn.sock.sendall(conn.pending + rp.accepted_reply(kind, ok))
                    conn.pending = b""
                except OSError:
                    conn._kill()
                    return
                conn.started = ok
        elif kind == rp.CONTROL_PACKAGE_PAUSE:
            with conn.send_lock:
                conn.started = False  # no data package may follow the pause reply
                try:
                    conn.sock.sendall(conn.pending + rp.accepted_reply(kind, True))
                    conn.pending = b""
                except OSError:
                    conn._kill()
        else:
            conn.reply(rp.text_message(f"unknown RTDE package type {kind}", level=rp.MESSAGE_ERROR))

    def _setup_inputs(self, conn: RtdeConnection, names: list[str]) -> bytes:
        with self.controller.lock:
            types = []
            for n in names:
                owner = self.input_owner.get(n)
                if n not in rp.INPUT_TYPES:
                    types.append("NOT_FOUND")
                elif owner is not None and owner != conn.conn_id:
                    types.append("IN_USE")
                else:
                    types.append(rp.INPUT_TYPES[n])
            recipe_id = len(conn.inputs) + 1
            recipe = rp.Recipe(recipe_id, tuple(names), tuple(types))
            if recipe.valid:
                conn.inputs[recipe_id] = recipe
                for n in names:
                    self.input_owner[n] = conn.conn_id
            else:
                recipe_id = 0
        return rp.setup_reply(rp.CONTROL_PACKAGE_SETUP_INPUTS, recipe_id, types)

    def _data_in(self, conn: RtdeConnection, payload: bytes) -> None:
        if not payload:
            return
        recipe = conn.inputs.get(payload[0])
        if recipe is None:
            return
        values = recipe.unpack(payload)
        with self.controller.lock:
            self.data_in += 1
            publish = self.controller.inputs_received(values)
        if publish:
            self.controller.publish_now()
