"""``aiko can scan``: which joint modules answer on the bus, what they report, and which are missing or doubled.

Everything comes from the existing protocol (docs/can_protocol.md), nothing is written and nothing is enabled:

1. **Listen** for ``listen_s`` (default 2.5 s: at least two of every module's 1 Hz heartbeats): ``Heartbeat``
   (state, firmware version, uptime), ``JointFeedback`` (status bits), ``JointRates`` (rejected-frame and
   accepted-reference counters).
2. **Ask** every node id of the protocol for every parameter (``ParameterRequest`` reads, which a module answers
   in any state, enabled or not) and collect the ``ParameterReply`` frames.

**A duplicated node** (two modules set to the same id) cannot be seen in one frame: CAN has no source address, and
two transmitters that start the same frame in the same bit time merge into one on the wire. Over a scan they give
themselves away, and the scan names a node duplicated on any of:

- **two replies to one parameter read** (each module answers its own id: the strongest sign, and immediate);
- **uptimes that do not follow one clock**: a module's heartbeat uptime (whole seconds since power-up) grows by
  the time between its heartbeats; two modules interleave two clocks, so the uptime goes backwards, or jumps by
  more than the time elapsed (by more than a second of slack);
- **heartbeats that disagree** (different firmware versions or states within a fraction of a second; receive times
  are the scan's own, so two beats of one module read late together are not a disagreement);
- **about twice the feedback rate** of the other modules (at least 1.7×).

A missing node is an expected one (``nodes``: the robot's ``joints.can_node_ids``, default 1-10) from which no frame
came; an unexpected node is one that answered but is not expected.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import can

from aiko.core.errors import HardwareError
from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import MessageKind, Parameter, ParameterResult, id_scheme
from firmware_protocol.errors import ProtocolError

log = logging.getLogger(__name__)

STATES = {0: "Boot", 1: "Disabled", 2: "Enabled", 3: "Fault", 4: "Watchdog", 5: "EStop"}
HEARTBEAT_PERIOD_S = 1.0  # the firmware's heartbeat rate (EmulatorConfig.heartbeat_rate_hz)
DOUBLE_RATE = 1.7


@dataclass
class ModuleReport:
    node: int
    heartbeats: list[tuple[float, int, int, int]] = field(default_factory=list)  # (t, state, firmware, uptime)
    feedback_frames: int = 0
    rates_frames: int = 0
    rejected_frames: int | None = None
    accepted_references: int | None = None
    parameters: dict[str, float] = field(default_factory=dict)
    parameter_errors: dict[str, str] = field(default_factory=dict)
    replies_per_read: dict[str, int] = field(default_factory=dict)
    duplicate_reasons: list[str] = field(default_factory=list)

    @property
    def heard(self) -> bool:
        return bool(self.heartbeats or self.feedback_frames or self.rates_frames or self.replies_per_read)

    @property
    def state(self) -> str | None:
        return STATES.get(self.heartbeats[-1][1], str(self.heartbeats[-1][1])) if self.heartbeats else None

    @property
    def firmware_version(self) -> int | None:
        return self.heartbeats[-1][2] if self.heartbeats else None

    @property
    def uptime_s(self) -> int | None:
        return self.heartbeats[-1][3] if self.heartbeats else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "state": self.state,
            "firmware_version": self.firmware_version,
            "uptime_s": self.uptime_s,
            "heartbeats": len(self.heartbeats),
            "feedback_frames": self.feedback_frames,
            "rejected_frames": self.rejected_frames,
            "accepted_references": self.accepted_references,
            "parameters": self.parameters,
            "parameter_errors": self.parameter_errors,
            "duplicate": bool(self.duplicate_reasons),
            "duplicate_reasons": self.duplicate_reasons,
        }


@dataclass
class ScanResult:
    modules: dict[int, ModuleReport]
    expected: tuple[int, ...]
    listen_s: float
    undecodable_frames: int = 0

    @property
    def found(self) -> list[int]:
        return sorted(n for n, m in self.modules.items() if m.heard)

    @property
    def missing(self) -> list[int]:
        return [n for n in self.expected if not self.modules[n].heard]

    @property
    def duplicated(self) -> list[int]:
        return sorted(n for n, m in self.modules.items() if m.duplicate_reasons)

    @property
    def unexpected(self) -> list[int]:
        return [n for n in self.found if n not in self.expected]

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "expected": list(self.expected),
            "found": self.found,
            "missing": self.missing,
            "duplicated": self.duplicated,
            "unexpected": self.unexpected,
            "listen_s": self.listen_s,
            "undecodable_frames": self.undecodable_frames,
            "modules": [self.modules[n].as_dict() for n in self.found],
        }


def open_scan_bus(interface: str, channel: str, bitrate: int) -> can.BusABC:
    try:
        if interface == "slcan":  # the buffered reader (python-can's slcan reads one byte per call)
            from aiko.devices.can.slcan_bus import BufferedSlcanBus

            return BufferedSlcanBus(channel=channel, bitrate=bitrate)
        return can.Bus(interface=interface, channel=channel, bitrate=bitrate)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        raise HardwareError(f"cannot open CAN bus interface={interface!r} channel={channel!r}: {exc}") from None


def scan_bus(
    bus: can.BusABC,
    expected: tuple[int, ...] = (),
    *,
    listen_s: float = 2.5,
    read_parameters: bool = True,
    reply_timeout_s: float = 3.0,
) -> ScanResult:
    """Listen, then read every parameter of every node id; see the module docstring."""
    codec = default_codec()
    nodes = tuple(id_scheme().node_ids)
    result = ScanResult({n: ModuleReport(n) for n in nodes}, tuple(expected or nodes), listen_s)
    replies: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
    feedback_times: dict[int, list[float]] = defaultdict(list)

    def take(msg: can.Message | None) -> None:
        if msg is None or msg.is_error_frame or msg.is_remote_frame:
            return
        try:
            frame = codec.decode(msg.arbitration_id, bytes(msg.data), check_range=False)
        except ProtocolError:
            result.undecodable_frames += 1
            return
        module = result.modules.get(frame.node)
        if module is None:
            return
        now, v = time.monotonic(), frame.values
        if frame.kind is MessageKind.HEARTBEAT:
            module.heartbeats.append((now, int(v["State"]), int(v["FirmwareVersion"]), int(v["Uptime"])))
        elif frame.kind is MessageKind.FEEDBACK:
            module.feedback_frames += 1
            feedback_times[frame.node].append(now)
        elif frame.kind is MessageKind.RATES:
            module.rates_frames += 1
            module.rejected_frames = int(v["RejectedFrames"])
            module.accepted_references = int(v["AcceptedReferences"])
        elif frame.kind is MessageKind.PARAMETER_REPLY:
            replies[frame.node, int(v["Index"])].append((int(v["Result"]), float(v["Value"])))

    deadline = time.monotonic() + listen_s
    while (left := deadline - time.monotonic()) > 0:
        take(bus.recv(timeout=min(left, 0.05)))
    if read_parameters:
        # one read per (node, parameter), ten at a time; replies are counted when all had time to come, so a late
        # reply on a loaded line is neither lost nor taken for a second module
        for parameter in Parameter:
            for node in nodes:
                frame_id, data = codec.encode(
                    MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": 0, "Value": 0.0}
                )
                try:
                    bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
                except can.CanError as exc:
                    raise HardwareError(f"cannot send a parameter read on the bus: {exc}") from None
            pause_until = time.monotonic() + 0.02
            while (left := pause_until - time.monotonic()) > 0:
                take(bus.recv(timeout=left))
        # wait until every module heard so far has answered every read (then a little longer, for a second module
        # on the same id), at most reply_timeout_s: a loaded line or a busy module answers late, not never
        wait_until = time.monotonic() + reply_timeout_s
        settled_at: float | None = None
        n_parameters = len(Parameter)
        while (left := wait_until - time.monotonic()) > 0:
            take(bus.recv(timeout=min(left, 0.05)))
            heard = [n for n, m in result.modules.items() if m.heard or any(k[0] == n for k in replies)]
            complete = all(sum(1 for k in replies if k[0] == n) == n_parameters for n in heard)
            if complete and settled_at is None:
                settled_at = time.monotonic()
                wait_until = min(wait_until, settled_at + 0.3)
        for (node, index), got in replies.items():
            module, parameter = result.modules[node], Parameter(index)
            module.replies_per_read[parameter.name] = len(got)
            status, value = got[0]
            if status == ParameterResult.OK:
                module.parameters[parameter.name] = round(value, 6)
            else:
                module.parameter_errors[parameter.name] = ParameterResult(status).name
    for module in result.modules.values():
        module.duplicate_reasons = duplicate_reasons(module, feedback_times, result.modules)
    return result


def duplicate_reasons(
    module: ModuleReport, feedback_times: dict[int, list[float]], modules: dict[int, ModuleReport]
) -> list[str]:
    """Why ``module``'s node id looks like two modules (see the module docstring); empty if it does not."""
    reasons: list[str] = []
    doubled = sorted(name for name, count in module.replies_per_read.items() if count > 1)
    if doubled:
        counts = sorted({module.replies_per_read[name] for name in doubled})
        reasons.append(f"{'/'.join(map(str, counts))} replies to one parameter read ({len(doubled)} parameters)")
    beats = module.heartbeats
    for (t0, s0, f0, u0), (t1, s1, f1, u1) in zip(beats, beats[1:], strict=False):
        elapsed = t1 - t0
        if u1 < u0 and u0 - u1 < 0x8000:  # 16-bit uptime: a wrap is a huge step back, not a small one
            reasons.append(f"heartbeat uptime went back from {u0} s to {u1} s")
            break
        if u1 - u0 > elapsed + 1.5:
            reasons.append(f"heartbeat uptime jumped {u1 - u0} s in {elapsed:.2f} s")
            break
        # Receive times are the reader's, not the modules': a scan process that a loaded PC runs late reads one
        # module's consecutive heartbeats (uptime u, u + 1) a few ms apart. That is one clock read late, which the
        # jump test above already bounds; only a different firmware or state within one period is a second module.
        if elapsed < 0.5 * HEARTBEAT_PERIOD_S and (f0 != f1 or s0 != s1):
            reasons.append(f"two heartbeats {elapsed * 1e3:.0f} ms apart disagree (uptime {u0}/{u1}, state {s0}/{s1})")
            break
    others = [len(feedback_times.get(n, [])) for n, m in modules.items() if n != module.node and m.feedback_frames]
    mine = len(feedback_times.get(module.node, []))
    if others and mine >= DOUBLE_RATE * sorted(others)[len(others) // 2] and mine > 10:
        reasons.append(f"{mine} feedback frames, {mine / sorted(others)[len(others) // 2]:.1f}× the other modules'")
    return reasons


def format_scan(result: ScanResult) -> str:
    """The table a person reads at the robot."""
    lines = [
        f"{'node':>4}  {'state':<9} {'fw':>3} {'uptime':>7} {'rejected':>8} {'accepted':>8}  parameters",
    ]
    for node in result.found:
        m = result.modules[node]
        params = " ".join(f"{_short(k)}={v:g}" for k, v in m.parameters.items())
        if m.parameter_errors:
            params += " " + " ".join(f"{_short(k)}:{v}" for k, v in m.parameter_errors.items())
        flag = "  DUPLICATE: " + "; ".join(m.duplicate_reasons) if m.duplicate_reasons else ""
        lines.append(
            f"{node:>4}  {m.state or '-':<9} {_n(m.firmware_version):>3} {_n(m.uptime_s, ' s'):>7} "
            f"{_n(m.rejected_frames):>8} {_n(m.accepted_references):>8}  {params}{flag}"
        )
    summary = f"{len(result.found)} node id(s) answered of {len(result.expected)} expected"
    if result.missing:
        summary += f"; MISSING {result.missing}"
    if result.duplicated:
        summary += f"; DUPLICATED {result.duplicated}"
    if result.unexpected:
        summary += f"; UNEXPECTED {result.unexpected}"
    lines.append(summary)
    return "\n".join(lines)


def _n(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def _short(name: str) -> str:
    return {
        "KP_H": "KpH",
        "KD_H": "KdH",
        "KP_V": "KpV",
        "KD_V": "KdV",
        "LIMIT_H_DEG": "limH",
        "LIMIT_V_DEG": "limV",
        "WATCHDOG_PERIODS": "wd",
        "REFERENCE_PERIOD_MS": "refms",
        "FEEDBACK_RATE_HZ": "fbHz",
        "TORQUE_LIMIT_H_NM": "tqH",
        "TORQUE_LIMIT_V_NM": "tqV",
        "FREE_PLAY_DEG": "play",
    }.get(name, name)
