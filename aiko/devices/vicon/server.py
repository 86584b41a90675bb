"""An emulated Vicon DataStream server (Tracker / Nexus's TCP port 801) for the real SDK client.

Threads, not asyncio: the work per frame is small and blocking sockets keep each connection's code linear. One
scheduler thread captures a frame from the :class:`~aiko.devices.vicon.model.FrameSource` every period, applies
the impairments and releases it ``latency_s`` later; one accept thread (re)opens the listening socket; each
client has a reader thread (its requests) and a writer thread (its frames), so a slow client never holds up the
scheduler (its queue keeps only the newest frames, as a tracker drops frames for a slow client).

The session, from ``ViconCGStreamClient.cpp`` (SDK 1.11.0; see :mod:`aiko.devices.vicon.protocol`): on accept the
server sends ObjectEnums (the types it serves; ``ReadObjectEnums`` disconnects without it); the client answers with
the subset it wants, then asks for frames by stream mode —

- ClientPull: RequestFrame{streaming = false} per ``GetFrame``; we answer with the newest frame this client has
  not had yet, or the next one;
- ClientPullPreFetch: RequestNextFrame{count}: the next ``count`` frames as they are released;
- ServerPush: RequestFrame{streaming = true} once: every frame from then on.

The client sends Ping{id} now and then; echoing it gives the client its round-trip time (``CGStreamClient``
keeps the last 20).

Each frame holds only the object types the client asked for: the SDK writes ObjectEnums, the intersection of the
server's list and the types its ``Enable…Data`` calls switched on (``ViconCGStreamClient.cpp``, ``WriteObjects``;
a fresh connection asks for the static objects, FrameInfo, Timecode and LatencyInfo only, ``CoreClient.cpp``,
``Connect``), and its getters do not check those switches themselves: they read what came. So without
``EnableSegmentData`` a client gets no segment poses, and ``DisableMarkerData`` stops the markers, as on a Tracker.
(The SDK's thread writes a changed ObjectEnums after it has read the next packet, so the first frame after an
``Enable…`` call may still lack the new types, against a Tracker too.) Until a connection's ObjectEnums arrives
(the SDK sends it right after the server's, but a ``GetFrame`` from the caller's thread can overtake it) it gets
the types a fresh SDK connection asks for (:data:`DEFAULT_TYPES`), never data nobody enabled.
StartMulticastSender / StopMulticastSender: :mod:`aiko.devices.vicon.multicast`.
"""

from __future__ import annotations

import collections
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiko.core.errors import AikoError
from aiko.devices.vicon import protocol as p
from aiko.devices.vicon.frames import FrameEncoder
from aiko.devices.vicon.impairments import Impairments
from aiko.devices.vicon.model import FrameSource
from aiko.devices.vicon.multicast import MulticastRefused, MulticastSender, MulticastTarget

log = logging.getLogger(__name__)

DEFAULT_PORT = 801
QUEUE_FRAMES = 4  # frames kept per slow client before the oldest is dropped
# The types ``VClient::Connect`` (CoreClient.cpp) switches on before any Enable… call; those this server has.
DEFAULT_TYPES = frozenset(
    int(t)
    for t in (
        p.ObjectType.CONTENTS,
        p.ObjectType.STREAM_INFO,
        p.ObjectType.SUBJECT_INFO,
        p.ObjectType.FRAME_INFO,
        p.ObjectType.TIMECODE,
        p.ObjectType.LATENCY_INFO,
        p.ObjectType.APPLICATION_INFO,
    )
)  # (and SubjectHealth, ObjectQuality, FrameRateInfo, which the emulator does not serve)


class ViconServerError(AikoError):
    """The emulated server could not start (address in use, not a loopback address, ...)."""


@dataclass(frozen=True)
class _Frame:
    """One frame, its objects encoded once; ``packet(types)`` is what a client that asked for ``types`` gets."""

    frame_id: int
    capture_mono_s: float
    blocks: tuple[tuple[int, bytes], ...]  # (object type, the object's encoded block)

    @classmethod
    def of(cls, frame_id: int, capture_mono_s: float, objects: list[p.VObject]) -> _Frame:
        return cls(frame_id, capture_mono_s, tuple((int(o.TYPE), o.encode()) for o in objects))

    def packet(self, types: frozenset[int]) -> bytes:
        body = b"".join(block for kind, block in self.blocks if kind in types)
        return p.HEADER.pack(p.PACKET_TYPE, len(body)) + body


@dataclass
class ServerCounters:
    frames_captured: int = 0
    frames_dropped: int = 0
    frames_released: int = 0
    packets_sent: int = 0
    connections: int = 0
    restarts: int = 0
    pings: int = 0
    multicast_started: int = 0
    multicast_refused: int = 0  # StartMulticastSender requests the server could not serve (logged: the SDK hides it)
    multicast_packets_sent: int = 0
    frames_skipped_slow_client: int = 0  # frames a client too slow to take them never got (oldest dropped first)
    late_ticks: int = 0  # frames never captured because the server fell more than 5 periods behind
    source_errors: int = 0
    requests: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))

    def as_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "requests"}, "requests": dict(self.requests)}


class ViconServer:
    """Serve ``source`` at ``rate_hz`` on ``host:port``; ``start()`` returns once the port is open."""

    def __init__(
        self,
        source: FrameSource,
        host: str,
        port: int = DEFAULT_PORT,
        *,
        rate_hz: float = 100.0,
        impairments: Impairments | None = None,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1.0 <= rate_hz <= 2000.0:
            raise ViconServerError(f"frame rate must be in 1..2000 Hz, got {rate_hz:g}")
        if not 0 <= port <= 65535:
            raise ViconServerError(f"port must be in 0..65535, got {port}")
        self.source = source
        self.host = host
        self.port = port
        self.rate_hz = float(rate_hz)
        self.period_s = 1.0 / self.rate_hz
        self.impairments = impairments or Impairments()
        self.encoder = FrameEncoder(source.subjects(), self.rate_hz)
        self.counters = ServerCounters()
        self._clock = clock_s
        self._rng = random.Random(self.impairments.seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._down_until = 0.0
        self._connections: set[_Connection] = set()
        self._latest: _Frame | None = None
        self._threads: list[threading.Thread] = []
        self.t0_mono_s = 0.0
        self.t0_unix_s = 0.0

    # -- lifecycle
    def start(self) -> None:
        self._open_listener()
        self.t0_mono_s = self._clock()
        self.t0_unix_s = time.time()
        for name, target in (("vicon-accept", self._accept_loop), ("vicon-frames", self._frame_loop)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.impairments.restart_every_s:
            thread = threading.Thread(target=self._restart_loop, name="vicon-restarts", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._close_all()
        for thread in self._threads:
            thread.join(timeout=3.0)
        self._threads.clear()
        self._close_all()  # a listener the accept thread reopened while stopping

    def __enter__(self) -> ViconServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def restart(self, downtime_s: float | None = None) -> None:
        """Close the listening socket and every connection; accept again after ``downtime_s``."""
        downtime = self.impairments.restart_downtime_s if downtime_s is None else downtime_s
        with self._lock:
            self._down_until = self._clock() + downtime
            self.counters.restarts += 1
        log.info("vicon: restart (down for %.2f s)", downtime)
        self._close_all()

    # -- sockets
    def _open_listener(self) -> None:
        try:
            listener = socket.create_server((self.host, self.port), family=socket.AF_INET, reuse_port=False)
        except OSError as exc:
            raise ViconServerError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from None
        listener.settimeout(0.1)
        if self.port == 0:
            self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener

    def _close_all(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            connections = list(self._connections)
            self._connections.clear()
        if listener is not None:
            # shutdown first: a thread blocked in accept() keeps a closed socket listening until accept returns,
            # and a client that connects in that window would be accepted by the kernel, then reset
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for conn in connections:
            conn.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                listener, down_until = self._listener, self._down_until
            if listener is None:
                wait = down_until - self._clock()
                if wait > 0:
                    self._stop.wait(wait)
                    continue
                try:
                    self._open_listener()
                except ViconServerError as exc:  # the port is briefly busy after a restart: try again
                    log.warning("%s; retrying", exc)
                    self._stop.wait(0.1)
                continue
            try:
                sock, addr = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by restart() or stop()
                continue
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, sock, f"{addr[0]}:{addr[1]}")
            with self._lock:
                if self._listener is not listener:  # a restart began meanwhile
                    sock.close()
                    continue
                self._connections.add(conn)
                self.counters.connections += 1
            conn.start()

    def _count(self, name: str, key: str | None = None) -> None:
        """Counters touched by the connection threads (the frame thread's own are only its own)."""
        with self._lock:
            if key is None:
                setattr(self.counters, name, getattr(self.counters, name) + 1)
            else:
                self.counters.requests[key] += 1

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _restart_loop(self) -> None:
        every = float(self.impairments.restart_every_s or 0.0)
        while not self._stop.wait(every):
            self.restart()

    # -- frames
    def _frame_loop(self) -> None:
        pending: collections.deque[_Frame] = collections.deque()
        frame_id = 0
        next_tick = self.t0_mono_s
        latency = self.impairments.latency_s
        while not self._stop.is_set():
            now = self._clock()
            if now >= next_tick:
                # frame k is captured at k periods after the start, computed from k: summing periods onto a
                # monotonic clock of ~1e4 s drifted by ~1e-10 s per thousand frames (machine uptime decides)
                t_s = frame_id / self.rate_hz
                if self._rng.random() < self.impairments.dropout_fraction:
                    self.counters.frames_dropped += 1
                else:
                    try:
                        pending.append(_Frame.of(frame_id, next_tick, self._capture(frame_id, t_s)))
                        self.counters.frames_captured += 1
                    except Exception:  # a broken source must not end the server: that frame is lost, say why once
                        self.counters.source_errors += 1
                        if self.counters.source_errors == 1:
                            log.exception("vicon: the frame source failed at t = %.3f s; skipping the frame", t_s)
                frame_id += 1
                next_tick = self.t0_mono_s + frame_id / self.rate_hz
                if now - next_tick > 5 * self.period_s:  # far behind (suspended, overloaded): skip, do not burst
                    skipped = int((now - next_tick) / self.period_s)
                    self.counters.late_ticks += skipped
                    frame_id += skipped  # frame k stays captured at t0 + k periods; the skipped numbers are gaps
                    next_tick = self.t0_mono_s + frame_id / self.rate_hz
            while pending and pending[0].capture_mono_s + latency <= now:
                self._release(pending.popleft())
            wake = min(next_tick, pending[0].capture_mono_s + latency) if pending else next_tick
            delay = wake - self._clock()
            if delay > 0:
                self._stop.wait(delay)

    def _capture(self, frame_id: int, t_s: float) -> list[p.VObject]:
        data = self.source.frame(t_s)
        hidden = {s.name: self.impairments.hidden(s.name, t_s) for s in self.encoder.subjects}
        return self.encoder.objects(frame_id, t_s, data, hidden, self.impairments.latency_s)

    def _release(self, frame: _Frame) -> None:
        with self._lock:
            self._latest = frame
            self.counters.frames_released += 1
            connections = list(self._connections)
        for conn in connections:
            conn.on_frame(frame)

    def latest(self) -> _Frame | None:
        with self._lock:
            return self._latest


class _Connection:
    """One client: requests in on the reader thread, frames out on the writer thread."""

    def __init__(self, server: ViconServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self._cv = threading.Condition()
        self._queue: collections.deque[tuple[bool, bytes]] = collections.deque()  # (is a frame, packet)
        self._closed = False
        self.push = False
        self.wanted = 0  # frames owed: ClientPull waiting for a new one, ClientPullPreFetch's count
        self.last_sent_id = -1
        self.types = DEFAULT_TYPES & server.encoder.object_types  # then the client's ObjectEnums
        self._multicast: MulticastSender | None = None

    def start(self) -> None:
        self._send(p.encode_packet([p.ObjectEnums(self.server.encoder.object_types)]))
        for target in (self._read_loop, self._write_loop):
            threading.Thread(target=target, name=f"vicon-{self.peer}", daemon=True).start()

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
            multicast, self._multicast = self._multicast, None
        if multicast is not None:
            self._end_multicast(multicast, "its connection closed")
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.server._forget(self)

    # -- frames in, packets out
    def on_frame(self, frame: _Frame) -> None:
        skipped = 0
        with self._cv:
            if self.push or self.wanted > 0:
                self.wanted = max(self.wanted - 1, 0) if not self.push else 0
                skipped = self._enqueue(frame)
            multicast, types = self._multicast, self.types
        if skipped:
            self.server._count("frames_skipped_slow_client")
        if multicast is not None:  # every frame while it lasts, whatever this client's own stream mode
            if multicast.send(frame.packet(types)):
                self.server._count("multicast_packets_sent")

    def _enqueue(self, frame: _Frame) -> int:  # holds self._cv
        """Queue ``frame``; if the client is more than QUEUE_FRAMES frames behind, drop its oldest queued frame
        (never a ping echo or the ObjectEnums: the SDK disconnects without the latter). Returns frames dropped."""
        self.last_sent_id = frame.frame_id
        self._queue.append((True, frame.packet(self.types)))
        frames = [i for i, (is_frame, _) in enumerate(self._queue) if is_frame]
        for i in reversed(frames[: max(len(frames) - QUEUE_FRAMES, 0)]):
            del self._queue[i]
        self._cv.notify_all()
        return max(len(frames) - QUEUE_FRAMES, 0)

    def _send(self, packet: bytes) -> None:
        with self._cv:
            self._queue.append((False, packet))
            self._cv.notify_all()

    def _write_loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                _, packet = self._queue.popleft()
            try:
                self.sock.sendall(packet)
                self.server._count("packets_sent")
            except OSError:
                self.close()
                return

    def _read_loop(self) -> None:
        stream = p.PacketStream()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                stream.feed(data)
                for objects in stream.packets():
                    for obj in objects:
                        self._handle(obj)
        except (OSError, p.ViconProtocolError) as exc:
            if not self._closed:
                log.info("vicon: client %s: %s", self.peer, exc)
        finally:
            self.close()

    def _handle(self, obj: p.AnyObject) -> None:
        self.server._count("requests", type(obj).__name__)
        if isinstance(obj, p.RequestFrame):
            latest = self.server.latest()
            with self._cv:
                self.push = obj.streaming
                if obj.streaming:
                    return
                # ">" and not "!=": the scheduler may release a newer frame (and send it here, to a client in push
                # mode or owed one) between the read above and this lock; that older `latest` must then not follow
                # it. Frame ids grow in release order, so "newer than the last sent" is the test (a frame sent
                # twice or out of order on one connection was seen once beside a suite at load ~5)
                if latest is not None and latest.frame_id > self.last_sent_id:
                    self._enqueue(latest)
                else:
                    self.wanted = max(self.wanted, 1)
        elif isinstance(obj, p.RequestNextFrame):
            with self._cv:
                self.push = False
                self.wanted += max(int(obj.count), 1)
        elif isinstance(obj, p.Ping):
            self.server._count("pings")
            self._send(p.encode_packet([obj]))
        elif isinstance(obj, p.ObjectEnums):
            with self._cv:
                self.types = obj.enums & self.server.encoder.object_types
        elif isinstance(obj, p.StartMulticastSender):
            self._start_multicast(MulticastTarget.from_request(obj))
        elif isinstance(obj, p.StopMulticastSender):
            with self._cv:
                multicast, self._multicast = self._multicast, None
            if multicast is not None:
                self._end_multicast(multicast, "the client stopped it")
        # KeepAlive: nothing to do. Filter (subject filters; pyvicon-datastream has no call that sends one) and any
        # other type: skipped by length, as the SDK skips what it does not know.

    def _start_multicast(self, target: MulticastTarget) -> None:
        try:
            sender = MulticastSender(target)
        except MulticastRefused as exc:
            self.server._count("multicast_refused")
            log.warning("vicon: client %s asked for multicast to %s: refused (%s)", self.peer, target, exc)
            return
        with self._cv:
            previous, self._multicast = self._multicast, sender
            closed = self._closed
        if previous is not None:
            self._end_multicast(previous, "the client asked for another")
        if closed:  # the connection closed meanwhile: nobody can stop this one
            with self._cv:
                self._multicast = None
            sender.close()
            return
        self.server._count("multicast_started")
        log.info("vicon: client %s: multicast to %s", self.peer, target)

    def _end_multicast(self, sender: MulticastSender, why: str) -> None:
        sender.close()
        log.info("vicon: client %s: multicast to %s ended (%s; %d sent)", self.peer, sender.target, why, sender.sent)
