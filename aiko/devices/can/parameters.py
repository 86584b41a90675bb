"""The joint modules' parameters (ParameterRequest / ParameterReply, docs/can_protocol.md): which ones a run sets,
writing them and reading each back, and the names a person types (``aiko can params``).

Why a run writes every parameter and reads each back before it enables: a module accepts parameter writes
whenever it is not enabled (the protocol allows it: a lab tunes gains between runs), so anything on the bus — a
script, a stray frame, the last experiment, a person at ``aiko can params`` — can leave a module with other gains,
limits or timing than the robot description says. Writing only some of them let stray gains (KdH = 500,
KpV = 5000) drive the next run (issue 26). So activation writes all nine that the robot description and the run
define, then reads each back; a module that refuses one, answers with another value, or stays silent is not
enabled, and the error names the module and the parameter. The read-back is a request of its own, not the write's
reply: a module (or an emulator) that acknowledges a write without keeping it is caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from aiko.core.errors import HardwareError
from aiko.core.polling import poll_until
from firmware_protocol.dbc import Parameter, ParameterResult

if TYPE_CHECKING:
    import can

# The names of docs/can_protocol.md (what a person reads and types), by index.
PARAMETER_NAMES: dict[Parameter, str] = {
    Parameter.KP_H: "KpH",
    Parameter.KD_H: "KdH",
    Parameter.KP_V: "KpV",
    Parameter.KD_V: "KdV",
    Parameter.LIMIT_H_DEG: "LimitHDeg",
    Parameter.LIMIT_V_DEG: "LimitVDeg",
    Parameter.WATCHDOG_PERIODS: "WatchdogPeriods",
    Parameter.REFERENCE_PERIOD_MS: "ReferencePeriodMs",
    Parameter.FEEDBACK_RATE_HZ: "FeedbackRateHz",
    Parameter.TORQUE_LIMIT_H_NM: "TorqueLimitHNm",
    Parameter.TORQUE_LIMIT_V_NM: "TorqueLimitVNm",
    Parameter.FREE_PLAY_DEG: "FreePlayDeg",
}
RESULT_NAMES = {
    ParameterResult.OK: "Ok",
    ParameterResult.UNKNOWN_INDEX: "UnknownIndex",
    ParameterResult.OUT_OF_RANGE: "OutOfRange",
    ParameterResult.READ_ONLY: "ReadOnly",
    ParameterResult.LOCKED: "Locked",
}
RELATIVE_TOLERANCE = 1e-3
"""A value read back matches the one written within 0.1 % (plus 1e-6 absolute): the wire carries float32, and a
firmware may keep a gain in fixed point; a stray value is off by far more."""


def parameter_name(parameter: Parameter) -> str:
    return PARAMETER_NAMES[parameter]


def result_name(result: int) -> str:
    try:
        return RESULT_NAMES[ParameterResult(result)]
    except ValueError:
        return str(result)


def parse_parameter(text: str) -> Parameter:
    """A parameter by its name (KdH, case-insensitive), its enum name (KD_H) or its index (2); ValueError if none."""
    key = text.strip().lower().replace("_", "")
    for parameter, name in PARAMETER_NAMES.items():
        if key in (name.lower(), parameter.name.lower().replace("_", ""), str(int(parameter))):
            return parameter
    names = ", ".join(PARAMETER_NAMES.values())
    raise ValueError(f"unknown parameter {text!r}; the modules have {names} (or their indices 1-12)")


@dataclass(frozen=True)
class ModuleParameters:
    """Every writable parameter of a module, as a run sets them (units in the names; the wire's own units)."""

    kp_h_v_per_rad: float
    kd_h_v_s_per_rad: float
    kp_v_v_per_rad: float
    kd_v_v_s_per_rad: float
    limit_h_deg: float
    limit_v_deg: float
    watchdog_periods: float
    reference_period_ms: float
    feedback_rate_hz: float

    def by_parameter(self) -> dict[Parameter, float]:
        """In the order they are written: gains, limits, then the watchdog's two factors."""
        return {
            Parameter.KP_H: self.kp_h_v_per_rad,
            Parameter.KD_H: self.kd_h_v_s_per_rad,
            Parameter.KP_V: self.kp_v_v_per_rad,
            Parameter.KD_V: self.kd_v_v_s_per_rad,
            Parameter.LIMIT_H_DEG: self.limit_h_deg,
            Parameter.LIMIT_V_DEG: self.limit_v_deg,
            Parameter.FEEDBACK_RATE_HZ: self.feedback_rate_hz,
            Parameter.WATCHDOG_PERIODS: self.watchdog_periods,
            Parameter.REFERENCE_PERIOD_MS: self.reference_period_ms,
        }


def same_value(wanted: float, read: float) -> bool:
    """Whether a value read back is the one written (see ``RELATIVE_TOLERANCE``)."""
    wanted32, read32 = float(np.float32(wanted)), float(np.float32(read))
    return math.isclose(wanted32, read32, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-6)


class ParameterLink(Protocol):
    """What the exchange needs from whoever talks to the bus (the run's driver, ``aiko can params``)."""

    def request_parameter(self, node: int, parameter: Parameter, value: float | None = None) -> None:
        """Send a read (``value`` None) or a write; forget an older reply to the same (node, parameter)."""

    def parameter_reply(self, node: int, parameter: Parameter) -> tuple[int, float] | None:
        """(result, value) of the latest reply since the request, or None."""


Request = tuple[int, Parameter, float | None]  # node, parameter, value to write (None: read)


# A request whose reply has not come within the timeout is sent again, up to this many times in all: a frame lost
# on the bus, or a reply held up on a busy PC (a pty's or USB adapter's bytes wait for a normal-priority kernel
# worker; docs/can_hil.md), is not a silent module. Requests are idempotent (a read, or the same value written).
ATTEMPTS = 3


def exchange(
    link: ParameterLink, requests: list[Request], wait: Callable[[float], None], timeout_s: float
) -> tuple[dict[tuple[int, Parameter], tuple[int, float]], list[int]]:
    """Send every request, wait up to ``timeout_s`` for every reply, send the unanswered ones again (``ATTEMPTS``
    in all); (replies by (node, parameter), nodes still silent)."""
    keys = [(node, parameter) for node, parameter, _ in requests]
    replies: dict[tuple[int, Parameter], tuple[int, float]] = {}

    def answered() -> bool:
        for key in keys:
            if key not in replies and (reply := link.parameter_reply(*key)) is not None:
                replies[key] = reply
        return len(replies) == len(keys)

    for _ in range(ATTEMPTS):
        for node, parameter, value in requests:
            if (node, parameter) not in replies:
                link.request_parameter(node, parameter, value)
        if poll_until(answered, timeout_s, wait, first_wait=True):
            break
    silent = sorted({key[0] for key in keys if key not in replies})
    return replies, silent


def refusal(node: int, parameter: Parameter, value: float, result: int) -> str:
    """One line on a refused write, with what the result means."""
    explanations: dict[int, str] = {
        ParameterResult.LOCKED: " (it is enabled: parameters change only while a module is disabled)",
        ParameterResult.OUT_OF_RANGE: " (outside the module's range, or WatchdogPeriods x ReferencePeriodMs outside "
        "10..2000 ms)",
    }
    why = explanations.get(result, "")
    return f"joint module {node} refused {parameter_name(parameter)} = {value:g}: {result_name(result)}{why}"


def write_and_verify(
    link: ParameterLink,
    nodes: Iterable[int],
    wanted: ModuleParameters,
    wait: Callable[[float], None],
    timeout_s: float,
) -> None:
    """Write ``wanted`` to every module, then read each parameter back; HardwareError (naming the module and the
    parameter) if a module is silent, refuses a write, or holds another value than written.

    WatchdogPeriods and ReferencePeriodMs are checked by the module as a pair (their product must stay in
    10..2000 ms, against the partner's *current* value): a write refused that way is written again once the partner
    has its new value."""
    nodes = list(nodes)
    values = wanted.by_parameter()
    writes: list[Request] = [(n, p, v) for n in nodes for p, v in values.items()]
    replies, silent = exchange(link, writes, wait, timeout_s)
    if silent:
        raise HardwareError(
            f"joint modules {silent} did not answer parameter requests ({ATTEMPTS} tries, {timeout_s} s each) "
            "(check power, termination, bitrate and node ids)"
        )
    pair = (Parameter.WATCHDOG_PERIODS, Parameter.REFERENCE_PERIOD_MS)
    again: list[Request] = [
        (n, p, values[p]) for n in nodes for p in pair if replies[(n, p)][0] == ParameterResult.OUT_OF_RANGE
    ]
    if again:
        retried, silent = exchange(link, again, wait, timeout_s)
        replies.update(retried)
        if silent:
            raise HardwareError(f"joint modules {silent} stopped answering parameter requests")
    for node in nodes:
        for parameter, value in values.items():
            result, _ = replies[(node, parameter)]
            if result != ParameterResult.OK:
                raise HardwareError(refusal(node, parameter, value, result) + "; nothing was enabled")
    reads: list[Request] = [(n, p, None) for n in nodes for p in values]
    readback, silent = exchange(link, reads, wait, timeout_s)
    if silent:
        raise HardwareError(f"joint modules {silent} did not answer the read-back of their parameters")
    for node in nodes:
        for parameter, value in values.items():
            result, held = readback[(node, parameter)]
            if result != ParameterResult.OK or not same_value(value, held):
                raise HardwareError(
                    f"joint module {node} holds {parameter_name(parameter)} = {held:g} after {value:g} was written "
                    f"(read back: {result_name(result)}); nothing was enabled"
                )


class BusParameterLink:
    """A ``ParameterLink`` for a tool on a python-can bus (``aiko can params``): no receive thread; replies are
    read while it waits. Frames other than the listed modules' parameter replies are ignored."""

    def __init__(self, bus: can.BusABC, nodes: Iterable[int]) -> None:
        from firmware_protocol.codec import default_codec
        from firmware_protocol.dbc import MessageKind

        self.bus = bus
        self.codec = default_codec()
        self._reply_kind = MessageKind.PARAMETER_REPLY
        self._request_kind = MessageKind.PARAMETER_REQUEST
        self._reply_ids = {self.codec.frame_id(MessageKind.PARAMETER_REPLY, n) for n in nodes}
        self._replies: dict[tuple[int, int], tuple[int, float]] = {}

    def request_parameter(self, node: int, parameter: Parameter, value: float | None = None) -> None:
        import can

        values = {"Index": int(parameter), "Write": int(value is not None), "Value": float(value or 0.0)}
        frame_id, data = self.codec.encode(self._request_kind, node, values)
        self._replies.pop((node, int(parameter)), None)
        try:
            self.bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False), timeout=0.1)
        except can.CanError as exc:
            raise HardwareError(f"cannot send a parameter request to module {node}: {exc}") from None

    def parameter_reply(self, node: int, parameter: Parameter) -> tuple[int, float] | None:
        return self._replies.get((node, int(parameter)))

    def wait(self, dt_s: float) -> None:
        """Receive for ``dt_s``, keeping every parameter reply of the listed modules."""
        import time

        from firmware_protocol.errors import ProtocolError

        end = time.monotonic() + dt_s
        while True:
            left = end - time.monotonic()
            msg = self.bus.recv(timeout=max(left, 0.0))  # what is waiting is read even when no time is left
            if msg is None:
                if left <= 0:
                    return
                continue
            if msg.is_error_frame or msg.is_remote_frame or msg.arbitration_id not in self._reply_ids:
                continue
            try:
                decoded = self.codec.decode(msg.arbitration_id, bytes(msg.data))
            except ProtocolError:
                continue
            values = decoded.values
            self._replies[(decoded.node, int(values["Index"]))] = (int(values["Result"]), float(values["Value"]))


@dataclass(frozen=True)
class ParameterOutcome:
    """What one module said to one request of ``aiko can params``."""

    node: int
    parameter: Parameter
    result: int | None  # None: no reply
    value: float | None  # the value the module holds (its reply)
    written: float | None = None  # the value asked for, on a write

    @property
    def ok(self) -> bool:
        if self.result != ParameterResult.OK or self.value is None:
            return False
        return self.written is None or same_value(self.written, self.value)

    def describe(self) -> str:
        name = parameter_name(self.parameter)
        if self.result is None:
            return f"joint module {self.node}: no reply to {name}"
        if self.written is not None and self.result != ParameterResult.OK:
            return refusal(self.node, self.parameter, self.written, self.result)
        if self.written is not None and not self.ok:
            return f"joint module {self.node} holds {name} = {self.value:g} after {self.written:g} was written"
        if self.result != ParameterResult.OK:
            return f"joint module {self.node}: {name}: {result_name(self.result)}"
        return f"joint module {self.node}: {name} = {self.value:g}"


def read_parameters(
    link: BusParameterLink, nodes: list[int], parameters: list[Parameter], timeout_s: float
) -> list[ParameterOutcome]:
    replies, _ = exchange(link, [(n, p, None) for n in nodes for p in parameters], link.wait, timeout_s)
    return [_outcome(n, p, replies.get((n, p))) for n in nodes for p in parameters]


def write_parameters(
    link: BusParameterLink, nodes: list[int], values: dict[Parameter, float], timeout_s: float
) -> list[ParameterOutcome]:
    """Write ``values`` to each module, then read the written ones back: one outcome per (module, parameter)."""
    replies, _ = exchange(link, [(n, p, v) for n in nodes for p, v in values.items()], link.wait, timeout_s)
    refused = {(n, p) for n in nodes for p in values if replies.get((n, p), (None,))[0] != ParameterResult.OK}
    held, _ = exchange(
        link, [(n, p, None) for n in nodes for p in values if (n, p) not in refused], link.wait, timeout_s
    )
    out = []
    for n in nodes:
        for p, v in values.items():
            reply = replies.get((n, p)) if (n, p) in refused else held.get((n, p))
            out.append(_outcome(n, p, reply, v))
    return out


def _outcome(
    node: int, parameter: Parameter, reply: tuple[int, float] | None, written: float | None = None
) -> ParameterOutcome:
    if reply is None:
        return ParameterOutcome(node, parameter, None, None, written)
    return ParameterOutcome(node, parameter, reply[0], reply[1], written)
