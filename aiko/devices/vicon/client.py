"""Vicon motion capture through ``pyvicon-datastream`` (the ``vicon`` extra), read on its own thread.

``get_frame()`` blocks until the next frame, up to 1 s when none comes, **holding the GIL** (pyvicon-datastream
does not release it; see docs/vicon.md): in the control loop's process it would stall every other thread. So the
real SDK client runs in a child process (:mod:`aiko.devices.vicon.client_child`, ServerPush mode) that writes each frame
as a line on a pipe; a reader thread here (a blocking pipe read releases the GIL) keeps the newest frame, stamped
with the run's clock on arrival, and ``sample`` only copies it. Stand-in clients (tests) run on that thread
in-process instead. A segment the
SDK cannot see reads as NaN with ``occluded`` set; a frame older than ``stale_after_s`` reads as occluded too
(the loop never reuses an old pose as if it were new). A dropped connection is retried every
``reconnect_interval_s`` and both the loss and the reconnection are reported as log events.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import ConfigError, HardwareError
from aiko.core.mocap import MocapEvent, MocapSample, MotionCapture, occluded_sample

log = logging.getLogger(__name__)

RESULT_SUCCESS = 2  # pyvicon_datastream.Result.Success
RESULT_NOT_CONNECTED = 9
CONNECT_TIMEOUT_S = 10.0  # the child process's first connection (imports included)
# The first connection is tried again for this long before a run is refused: a Vicon PC restarting its stream (the
# emulator's --restart-every-s does, with 0.2 s down) is back within it; a wrong host still fails in about a second.
FIRST_CONNECT_WINDOW_S = 1.5
FIRST_CONNECT_RETRY_S = 0.1


def import_pyvicon() -> Any:
    try:
        import pyvicon_datastream
    except ImportError as exc:
        raise HardwareError(
            "Vicon motion capture needs the 'vicon' extra: pip install 'aiko-stack[vicon]' "
            "or scripts/install_vicon_client.sh (builds Vicon's DataStream SDK against the system Boost; docs/vicon.md)"
        ) from exc
    return pyvicon_datastream


def _code(result: Any) -> int:
    """The number of an SDK result: pyvicon_datastream returns a plain ``Enum`` (``int()`` rejects it)."""
    return int(getattr(result, "value", result))


def server_push_mode(client: Any) -> Any:
    """The ServerPush stream mode for `client`: its own ``StreamMode`` if it has one (a stand-in client, or
    another binding of the SDK), else pyvicon-datastream's. Why: a client that is not the SDK's must not need the SDK
    installed (the suite's stand-in ran only where the Vicon client had been built)."""
    modes = getattr(client, "StreamMode", None)
    return (modes if modes is not None else import_pyvicon().StreamMode).ServerPush


def default_client_factory() -> Any:
    return import_pyvicon().PyViconDatastream()


@dataclass(frozen=True)
class ViconBody:
    subject: str
    segment: str

    @property
    def name(self) -> str:
        return f"{self.subject}/{self.segment}"


@dataclass
class _Frame:
    received_ns: int
    frame_number: int
    latency_s: float
    position_m: np.ndarray
    quaternion_wxyz: np.ndarray
    occluded: np.ndarray


class ViconMocap(MotionCapture):
    def __init__(
        self,
        host: str,
        bodies: Sequence[ViconBody],
        *,
        rate_hz: float = 20.0,
        stale_after_s: float = 0.25,
        reconnect_interval_s: float = 1.0,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        client_factory: Callable[[], Any] = default_client_factory,
        own_process: bool | None = None,
    ) -> None:
        if not host:
            raise ConfigError("mocap.host must be 'hostname[:port]' of the Vicon PC (port 801 by default)")
        if not bodies:
            raise ConfigError("mocap: name at least one subject/segment to track")
        self.host = host
        self.bodies = tuple(bodies)
        self.names = tuple(b.name for b in self.bodies)
        self.rate_hz = float(rate_hz)
        self.stale_after_ns = int(stale_after_s * 1e9)
        self.reconnect_interval_s = float(reconnect_interval_s)
        self._clock_ns = clock_ns
        self._client_factory = client_factory
        self._client: Any = None
        self._latest: _Frame | None = None
        self._lock = threading.Lock()
        self._events: list[MocapEvent] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connected = False
        self.frames_received = 0
        self.frames_discarded = 0  # read across a dropped connection: not stored
        self.reconnects = 0
        self._latency_warned = False
        # the real SDK in a child process; a stand-in client (tests) on the reader thread
        self.own_process = client_factory is default_client_factory if own_process is None else own_process
        self._child: subprocess.Popen[str] | None = None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "host": self.host,
            "stale_after_s": self.stale_after_ns * 1e-9,
            "sdk_in_child_process": self.own_process,
        }

    # -- lifecycle
    def start(self) -> None:
        if self._thread is not None:
            return
        if self.own_process:
            self._start_child()
            return
        self._client = self._client_factory()
        if not self.connect_first():
            raise HardwareError(f"cannot connect to the Vicon DataStream server at {self.host}")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vicon-reader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._child is not None:
            self._stop_child()
        if self._thread is not None:
            self._thread.join(timeout=3.0)
            self._thread = None
        if self._client is not None:
            try:
                self._client.disconnect()
            except Exception:  # already gone
                log.debug("vicon disconnect failed", exc_info=True)
            self._client = None

    # -- loop side
    def sample(self, t_ns: int) -> MocapSample:
        with self._lock:
            frame = self._latest
        if frame is None or t_ns - frame.received_ns > self.stale_after_ns:
            number = frame.frame_number if frame else -1
            return replace(  # the same fields as a fresh frame, so the /mocap channel keeps one layout
                occluded_sample(t_ns, self.names, number, "vicon"),
                received_t_ns=frame.received_ns if frame else -1,
                reported_latency_s=frame.latency_s if frame else float("nan"),
            )
        capture = frame.received_ns - int(frame.latency_s * 1e9)
        return MocapSample(
            t_ns=int(t_ns),
            capture_t_ns=capture,
            names=self.names,
            position_m=frame.position_m.copy(),
            quaternion_wxyz=frame.quaternion_wxyz.copy(),
            occluded=frame.occluded.copy(),
            frame=frame.frame_number,
            source="vicon",
            received_t_ns=frame.received_ns,
            reported_latency_s=frame.latency_s,
        )

    def pop_events(self) -> list[MocapEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events

    # -- reader thread
    def _emit(self, kind: str, **fields: Any) -> None:
        with self._lock:
            self._events.append(MocapEvent(kind, self._clock_ns(), {"host": self.host, **fields}))

    def connect_first(self) -> bool:
        """The run's first connection, tried again within :data:`FIRST_CONNECT_WINDOW_S` (see there)."""
        deadline = time.monotonic() + FIRST_CONNECT_WINDOW_S
        while not self._connect(first=True):
            if time.monotonic() >= deadline:
                return False
            time.sleep(FIRST_CONNECT_RETRY_S)
        return True

    def _connect(self, first: bool = False) -> bool:
        client = self._client
        try:
            result = client.connect(self.host)
        except Exception as exc:  # the SDK raises on name resolution errors
            log.debug("vicon connect raised %s", exc)
            return False
        if _code(result) != RESULT_SUCCESS and not client.is_connected():
            return False
        client.enable_segment_data()
        set_mode = getattr(client, "set_stream_mode", None)  # a stand-in client may have no stream modes at all
        if set_mode is not None:  # ServerPush keeps get_frame short (the server pushes at its frame rate)
            set_mode(server_push_mode(client))
        self._connected = True
        if not first:
            self.reconnects += 1
            self._emit("mocap_reconnected", reconnects=self.reconnects)
        else:
            self._emit("mocap_connected")
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self._step()

    def _step(self) -> None:
        """One attempt: reconnect, or read one frame (blocks until it comes, ≤ 1 s in the SDK)."""
        if not self._connected:
            if not self._connect():
                self._stop.wait(self.reconnect_interval_s)
            return
        try:
            result = _code(self._client.get_frame())
        except Exception as exc:
            log.warning("vicon get_frame failed: %s", exc)
            result = RESULT_NOT_CONNECTED
        if result == RESULT_SUCCESS:
            self._store_frame()
        elif result == RESULT_NOT_CONNECTED or not self._client.is_connected():
            self._connected = False
            self._emit("mocap_connection_lost", result=result)
            log.warning(
                "lost the Vicon stream from %s; reconnecting every %.1f s", self.host, self.reconnect_interval_s
            )
        else:
            self._stop.wait(0.001)  # NoFrame etc.: try again

    def _store_frame(self) -> None:
        client = self._client
        received = self._clock_ns()
        k = len(self.bodies)
        position = np.full((k, 3), np.nan)
        quaternion = np.full((k, 4), np.nan)
        occluded = np.ones(k, dtype=bool)
        for i, body in enumerate(self.bodies):
            translation_mm = client.get_segment_global_translation(body.subject, body.segment)
            if translation_mm is None:
                continue  # occluded: stays NaN and flagged, never zeros
            translation_mm = np.asarray(translation_mm, dtype=np.float64)
            if translation_mm.shape != (3,) or not np.all(np.isfinite(translation_mm)):
                continue
            position[i] = translation_mm * 1e-3
            q = client.get_segment_global_quaternion(body.subject, body.segment)
            if q is not None:
                quaternion[i] = np.asarray(q, dtype=np.float64)  # SDK order w, x, y, z
            occluded[i] = False
        try:
            latency_s = float(client.get_latency_total() or 0.0)
        except Exception as exc:  # noqa: BLE001 - SDK versions differ; the stamp falls back to the receive time
            latency_s = 0.0
            if not self._latency_warned:  # once, not at 100 Hz: capture times are now late by the real latency
                self._latency_warned = True
                log.warning("Vicon latency unavailable (%s); capture_t_ns = receive time", exc)
        frame_number = int(client.get_frame_number() or -1)
        if not client.is_connected():
            # the stream dropped while this frame was read (a server restart): the getters after the drop answered
            # from no frame (a segment None, the latency 0.0, seen once on CI), so the frame is not stored; the
            # next get_frame reports the loss and the reconnect follows
            self.frames_discarded += 1
            return
        frame = _Frame(received, frame_number, latency_s, position, quaternion, occluded)
        with self._lock:
            self._latest = frame
            self.frames_received += 1

    # -- the SDK in a child process
    def _start_child(self) -> None:
        cmd = [sys.executable, "-m", f"{__package__}.client_child", "--host", self.host]  # moves with the package
        cmd += ["--reconnect-interval-s", repr(self.reconnect_interval_s)]
        for body in self.bodies:
            cmd += ["--body", body.name]
        # the child imports this very copy of the package (a checkout run from elsewhere, not another install)
        root = str(Path(__file__).resolve().parents[len(__package__.split("."))])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        self._child = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, bufsize=1, env=env
        )
        first = ""  # the child's first connect (the SDK's connect may hang on a firewalled host: bounded here)
        if self._child.stdout is not None and select.select([self._child.stdout], [], [], CONNECT_TIMEOUT_S)[0]:
            first = self._child.stdout.readline()
        try:
            hello = json.loads(first)
        except ValueError:
            hello = {}
        if not hello.get("connected"):
            child = self._child
            self._stop_child()
            child.stdout.close() if child and child.stdout else None
            if hello.get("error"):
                raise HardwareError(str(hello["error"]))
            raise HardwareError(f"cannot connect to the Vicon DataStream server at {self.host}")
        self._connected = True
        self._emit("mocap_connected")
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_child, name="vicon-pipe", daemon=True)
        self._thread.start()

    def _read_child(self) -> None:
        child = self._child
        assert child is not None and child.stdout is not None
        with child.stdout:
            self._read_lines(child.stdout)
        if not self._stop.is_set():  # the child died: frames go stale (occluded); say so once
            code = child.poll()
            log.error("the Vicon reader process exited (code %s); motion capture reads as occluded", code)
            self._emit("mocap_reader_exited", returncode=code)

    def _read_lines(self, lines: Any) -> None:
        for line in lines:
            received = self._clock_ns()
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("vicon reader: unreadable line %r", line[:80])
                continue
            if "event" in message:
                kind = str(message["event"])
                if kind == "mocap_reconnected":
                    self.reconnects += 1
                self._connected = kind != "mocap_connection_lost"
                self._emit(kind, **dict(message.get("fields") or {}))
                continue
            frame = _Frame(
                received,
                int(message["frame"]),
                float(message["latency_s"]),
                np.asarray(message["position_m"], dtype=np.float64).reshape(-1, 3),
                np.asarray(message["quaternion_wxyz"], dtype=np.float64).reshape(-1, 4),
                np.asarray(message["occluded"], dtype=bool),
            )
            with self._lock:
                self._latest = frame
                self.frames_received += 1

    def _stop_child(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.terminate()  # the SDK may hold the child's GIL for 1 s: give it longer than that
            try:
                child.wait(timeout=3.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=3.0)
