"""CAN driver for the Aiko joint modules over any python-can bus (socketcan, slcan, pcan, virtual, ...).

Sending happens in the caller's thread, right when `write` is called: the control loop calls it on absolute
deadlines (k / rate from the run start), so the stream cannot drift. Receiving runs in a python-can `Notifier`
thread that decodes feedback into a table guarded by a lock; in a lockstep HIL run the driver instead polls the
bus synchronously (`pump`) so that a simulated-clock run is deterministic.
"""

from __future__ import annotations

import collections
import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import can
import numpy as np

from aiko.devices.can.frame_log import LockedFrameLog
from aiko.devices.can.health import HealthMonitor
from aiko.devices.can.parameters import ModuleParameters, write_and_verify
from aiko.devices.can.shaping import ReferenceShaper
from firmware_protocol.codec import AikoCodec, default_codec
from firmware_protocol.dbc import ESTOP_KEY, Command, MessageKind, Parameter
from firmware_protocol.errors import ProtocolError
from firmware_protocol.status import feedback_status_bits

log = logging.getLogger(__name__)

_MAX_RATE_DEG_S = 511.75  # JointReference.RateH/RateV range in the DBC


@dataclass(frozen=True)
class CanDriverSettings:
    nodes: tuple[int, ...]
    limit_h_rad: float
    limit_v_rad: float
    reference_rate_hz: float = 10.0
    slew_limit_rad_s: float = math.radians(180.0)
    stale_after_s: float = 0.5
    enable_timeout_s: float = 1.0
    watchdog_periods: float = 3.0
    # the modules' controller as the robot description tunes it (ParameterRequest 1-4) and their feedback rate (9)
    gains_v: tuple[float, float, float, float] = (400.0, 6.0, 400.0, 6.0)  # KpH V/rad, KdH V s/rad, KpV, KdV
    module_feedback_rate_hz: float = 100.0


class _FeedbackTable:
    """Latest decoded feedback per module (rows in node order)."""

    def __init__(self, n: int) -> None:
        self.angle_rad = np.zeros((n, 2))
        self.rate_rad_s = np.zeros((n, 2))
        self.effort = np.zeros((n, 2))
        self.status = np.zeros(n, np.uint8)
        self.ref_sequence = np.full(n, -1)
        self.rejected_frames = np.zeros(n, np.int64)
        self.accepted_references = np.zeros(n, np.int64)
        self.heartbeat_state = np.full(n, -1)
        self.have_feedback = np.zeros(n, bool)


class CanJointDriver(can.Listener):
    """Streams JointReference frames and turns feedback frames into arrays; see module docstring."""

    def __init__(
        self,
        bus: can.BusABC,
        settings: CanDriverSettings,
        now_s: Callable[[], float],
        *,
        use_notifier: bool = True,
        frame_log: LockedFrameLog | None = None,
        timestamp_offset_s: float | None = None,
        on_event: Callable[[str, dict], None] | None = None,
    ) -> None:
        self.bus = bus
        self.settings = settings
        self.now_s = now_s
        self.codec: AikoCodec = default_codec()
        for node in settings.nodes:
            self.codec.frame_id(MessageKind.REFERENCE, node)  # raises for nodes the DBC does not define
        self.rows = {node: i for i, node in enumerate(settings.nodes)}
        self.use_notifier = use_notifier
        self.frame_log = frame_log
        self.timestamp_offset_s = time.time() - now_s() if timestamp_offset_s is None else timestamp_offset_s
        self.on_event = on_event
        self.health = HealthMonitor(settings.nodes, settings.stale_after_s, self._health_event)
        self.shaper = ReferenceShaper(settings.limit_h_rad, settings.limit_v_rad, settings.slew_limit_rad_s)
        self._table = _FeedbackTable(len(settings.nodes))
        self._lock = threading.Lock()
        self._notifier: can.Notifier | None = None
        self._sequence = 1  # feedback carries RefSequence 0 before any reference: never a false latency match
        self._parameter_replies: dict[tuple[int, int], tuple[int, float]] = {}
        self._pending_latency: dict[tuple[int, int], float] = {}
        self.latencies_s: collections.deque[float] = collections.deque(maxlen=100_000)
        self.send_times_ns: list[int] = []  # monotonic ns of each write's first frame (benchmarks)
        self.frames_sent = 0
        self.frames_received = 0
        self.send_errors = 0
        self.receive_errors = 0
        self.bad_frames = 0
        self.foreign_frames = 0
        self.clamped_samples = 0
        self.slew_limited_samples = 0
        self._warned: set[str] = set()
        self.enabled = False
        self.closed = False

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self.use_notifier and self._notifier is None:
            # The GIL is handed between threads every 5 ms by default: a busy receive thread would then delay
            # the stream by up to 5 ms. 0.5 ms keeps the sender within the 1 ms jitter budget (process-wide;
            # restored on close).
            self._previous_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._previous_switch_interval, 0.0005))
            self._notifier = can.Notifier(self.bus, [self], timeout=0.05)

    def pump(self) -> int:
        """Lockstep: decode every frame waiting on the bus now (no thread)."""
        n = 0
        while (msg := self.bus.recv(timeout=0)) is not None:
            self.on_message_received(msg)
            n += 1
        return n

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._notifier is not None:
            self._notifier.stop(timeout=1.0)
            self._notifier = None
            sys.setswitchinterval(self._previous_switch_interval)
        if self.frame_log is not None:
            self.frame_log.stop()

    # ------------------------------------------------------------------ sending
    def _message(self, frame_id: int, data: bytes) -> can.Message:
        return can.Message(
            arbitration_id=frame_id,
            data=data,
            is_extended_id=False,
            is_rx=False,  # sent by this PC: frame logs mark it Tx
            timestamp=self.timestamp_offset_s + self.now_s(),
        )

    def _send(self, frame_id: int, data: bytes) -> bool:
        return self._send_all([self._message(frame_id, data)])

    def _send_all(self, messages: list[can.Message]) -> bool:
        """Send frames that belong together (one reference to every module). A bus that can write them at once
        (``send_batch``: slcan, one write to the port) does, so that a PC frozen between two of them (SIGSTOP, a
        preempted process) never leaves some modules on the new reference and the rest on the old one."""
        send_batch = getattr(self.bus, "send_batch", None)
        try:
            if send_batch is not None and len(messages) > 1:
                send_batch(messages)
            else:
                for msg in messages:
                    self.bus.send(msg, timeout=0.01)
        except can.CanError as exc:
            self.send_errors += 1
            self._warn_once(f"send:{type(exc).__name__}", f"CAN send failed ({exc}); the stream continues")
            return False
        self.frames_sent += len(messages)
        if self.frame_log is not None:
            for msg in messages:
                self.frame_log.on_message_received(msg)
        return True

    def send_command(self, command: Command, target_node: int = 0) -> None:
        frame_id, data = self.codec.encode(MessageKind.COMMAND, 0, {"Command": int(command), "TargetNode": target_node})
        self._send(frame_id, data)

    def enable(self) -> None:
        self.send_command(Command.CLEAR_FAULTS)
        self.send_command(Command.ENABLE)
        self.enabled = True

    def disable(self) -> None:
        """Broadcast DISABLE; safe to call on every exit path and more than once."""
        if self.closed:
            return
        self.send_command(Command.DISABLE)
        self.enabled = False

    def emergency_stop(self) -> None:
        """The highest-priority frame on the bus: every module cuts its drive on reception."""
        frame_id, data = self.codec.encode(MessageKind.EMERGENCY_STOP, 0, {"Key": ESTOP_KEY})
        self._send(frame_id, data)
        self.enabled = False
        log.warning("emergency stop sent")

    def request_parameter(self, node: int, parameter: Parameter, value: float | None = None) -> None:
        write = value is not None
        values = {"Index": int(parameter), "Write": int(write), "Value": float(value or 0.0)}
        frame_id, data = self.codec.encode(MessageKind.PARAMETER_REQUEST, node, values)
        with self._lock:
            self._parameter_replies.pop((node, int(parameter)), None)
        self._send(frame_id, data)

    def parameter_reply(self, node: int, parameter: Parameter) -> tuple[int, float] | None:
        with self._lock:
            return self._parameter_replies.get((node, int(parameter)))

    def module_parameters(self) -> ModuleParameters:
        """Every writable parameter of the modules, as this run needs them (all written and read back before Enable)."""
        s = self.settings
        kp_h, kd_h, kp_v, kd_v = s.gains_v
        return ModuleParameters(
            kp_h_v_per_rad=kp_h,
            kd_h_v_s_per_rad=kd_h,
            kp_v_v_per_rad=kp_v,
            kd_v_v_s_per_rad=kd_v,
            limit_h_deg=math.degrees(s.limit_h_rad),
            limit_v_deg=max(math.degrees(s.limit_v_rad), 1.0),  # a yaw-only robot: the unused axis at its minimum
            watchdog_periods=s.watchdog_periods,
            reference_period_ms=1000.0 / s.reference_rate_hz,
            feedback_rate_hz=s.module_feedback_rate_hz,
        )

    def write_module_parameters(self, wait: Callable[[float], None], timeout_s: float) -> None:
        """Write every parameter of the run to every module and read each back (``aiko.devices.can.parameters``);
        HardwareError naming the module and the parameter if one is silent, refuses, or holds another value.

        The modules accept parameter writes only while disabled (an enabled one answers Locked), so a Disable
        goes out first: a module left enabled by a crashed PC (until its watchdog) is configured all the same."""
        self.send_command(Command.DISABLE)
        write_and_verify(self, self.settings.nodes, self.module_parameters(), wait, timeout_s)

    def write(self, t_s: float, angle_rad: np.ndarray, rate_rad_s: np.ndarray) -> None:
        """Shape (clamp, slew-limit) and send one JointReference per module; arrays (n, 2), columns h, v.

        The slew limit counts the clock's time of sending (wall time on hardware), not the nominal deadline
        ``t_s``: two references sent close together (after a stall) may differ by only what the limit allows in
        the time that really passed between them."""
        shaped = self.shaper.shape(max(self.now_s(), 0.0), angle_rad, rate_rad_s)
        self.clamped_samples += int(shaped.clamped.any())
        self.slew_limited_samples += int(shaped.slew_limited.any())
        angle_deg = np.degrees(shaped.angle_rad)
        rate_deg = np.clip(np.degrees(shaped.rate_rad_s), -_MAX_RATE_DEG_S, _MAX_RATE_DEG_S)
        sequence = self._sequence
        self._sequence = (self._sequence + 1) % 256
        messages = []
        for node, row in self.rows.items():
            values = {
                "AngleH": float(angle_deg[row, 0]),
                "AngleV": float(angle_deg[row, 1]),
                "RateH": float(rate_deg[row, 0]),
                "RateV": float(rate_deg[row, 1]),
                "Sequence": sequence,
            }
            messages.append(self._message(*self.codec.encode(MessageKind.REFERENCE, node, values)))
        self.send_times_ns.append(time.monotonic_ns())
        send_s = time.perf_counter()
        with self._lock:
            for node in self.rows:
                self._pending_latency[(node, sequence)] = send_s
        self._send_all(messages)
        self.health.check(self.now_s())

    # ---------------------------------------------------------------- receiving
    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self._warn_once("error-frame", "CAN error frame received (check wiring, termination and bitrate)")
            return
        if self.frame_log is not None:
            self.frame_log.on_message_received(msg)
        self.frames_received += 1
        received_s = time.perf_counter()
        try:
            if msg.is_extended_id or msg.is_remote_frame:
                raise ProtocolError(f"frame 0x{msg.arbitration_id:X} is not a standard data frame")
            decoded = self.codec.decode(msg.arbitration_id, bytes(msg.data))
        except ProtocolError as exc:
            self.bad_frames += 1
            self._warn_once(f"bad:{msg.arbitration_id}", f"ignoring bad frame: {exc}")
            return
        row = self.rows.get(decoded.node)
        if row is None:
            self.foreign_frames += 1  # broadcast/commands of another sender, or modules we do not drive
            return
        v = decoded.values
        kind = decoded.kind
        now = self.now_s()
        with self._lock:
            t = self._table
            if kind is MessageKind.FEEDBACK:
                t.angle_rad[row] = math.radians(v["AngleH"]), math.radians(v["AngleV"])
                t.effort[row] = v["EffortH"], v["EffortV"]
                t.status[row] = feedback_status_bits(v)
                t.ref_sequence[row] = int(v["RefSequence"])
                t.have_feedback[row] = True
                sent = self._pending_latency.pop((decoded.node, int(v["RefSequence"])), None)
                if sent is not None:
                    self.latencies_s.append(received_s - sent)
            elif kind is MessageKind.RATES:
                t.rate_rad_s[row] = math.radians(v["RateH"]), math.radians(v["RateV"])
                t.rejected_frames[row] = int(v["RejectedFrames"])
                t.accepted_references[row] = int(v["AcceptedReferences"])
            elif kind is MessageKind.HEARTBEAT:
                t.heartbeat_state[row] = int(v["State"])
            elif kind is MessageKind.PARAMETER_REPLY:
                self._parameter_replies[(decoded.node, int(v["Index"]))] = (int(v["Result"]), float(v["Value"]))
        if kind is MessageKind.FEEDBACK:
            self.health.on_feedback(decoded.node, now, v)

    def on_error(self, exc: Exception) -> None:
        """python-can's ``Notifier`` calls this for an exception in its receive thread. Handled here (counted, logged
        once, an event): the thread goes on receiving, because a transient bus error must never end reception (a
        run that stops hearing its modules misses their ESTOP). A bus that fails for good stays silent, and the
        feedback timeout stops the run; the short sleep keeps such a bus from spinning the thread."""
        self.receive_errors += 1
        self._warn_once(
            f"receive:{type(exc).__name__}",
            f"CAN receive failed ({type(exc).__name__}: {exc}); reception continues",
        )
        time.sleep(0.001)

    def feedback_arrays(self) -> dict[str, np.ndarray]:
        """A consistent copy of the latest feedback of every module."""
        with self._lock:
            t = self._table
            return {
                "angle_rad": t.angle_rad.copy(),
                "rate_rad_s": t.rate_rad_s.copy(),
                "effort": t.effort.copy(),
                "status": t.status.copy(),
                "have_feedback": t.have_feedback.copy(),
                "rejected_frames": t.rejected_frames.copy(),
                "accepted_references": t.accepted_references.copy(),
            }

    # ------------------------------------------------------------------ helpers
    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
            if self.on_event is not None:
                self.on_event("can_warning", {"message": message})

    def _health_event(self, kind: str, node: int, fields: dict) -> None:
        if self.on_event is not None:
            self.on_event(kind, {"node": node, **fields})

    def statistics(self) -> dict:
        latencies = np.array(self.latencies_s) * 1e3
        stats = {
            "can_frames_sent": self.frames_sent,
            "can_frames_received": self.frames_received,
            "can_send_errors": self.send_errors,
            # reads that failed and were retried (a port shared with another process, a bus error): never fatal
            "can_receive_errors": self.receive_errors + int(getattr(self.bus, "read_errors", 0)),
            "can_bad_frames": self.bad_frames,
            "reference_samples_clamped": self.clamped_samples,
            "reference_samples_slew_limited": self.slew_limited_samples,
            "module_health_transitions": self.health.transitions,
        }
        if hasattr(self.bus, "garbage_lines"):  # slcan: half lines another reader of the port took
            stats["slcan_garbage_lines"] = int(self.bus.garbage_lines)
        if latencies.size:
            stats["ref_to_feedback_latency_p50_ms"] = float(np.percentile(latencies, 50))
            stats["ref_to_feedback_latency_p99_ms"] = float(np.percentile(latencies, 99))
        return stats
