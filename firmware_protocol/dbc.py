"""The DBC file is the one source of truth of the wire protocol; this module loads it, derives the ids.

Per-module messages are named ``<Kind>_<NN>`` with frame id ``base + node``; the bases are *read from the DBC*
(never restated here), so editing the DBC is the only way to change the protocol.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import cantools

DBC_PATH = Path(__file__).with_name("aiko_joint.dbc")

ESTOP_KEY = 0xA5
"""The only accepted EmergencyStop.Key: a single corrupted bit cannot fake (or suppress) an e-stop."""

_PER_NODE_NAME = re.compile(r"^(?P<kind>[A-Za-z]+)_(?P<node>\d{2})$")


class MessageKind(enum.Enum):
    """Message families of the protocol; values are the DBC message-name stems."""

    EMERGENCY_STOP = "EmergencyStop"
    COMMAND = "Command"
    REFERENCE = "JointReference"
    FEEDBACK = "JointFeedback"
    RATES = "JointRates"
    PARAMETER_REPLY = "ParameterReply"
    PARAMETER_REQUEST = "ParameterRequest"
    HEARTBEAT = "Heartbeat"


BROADCAST_KINDS = frozenset({MessageKind.EMERGENCY_STOP, MessageKind.COMMAND})


class Command(enum.IntEnum):
    """Values of Command.Command (broadcast or addressed by TargetNode, 0 = all)."""

    ENABLE = 1
    DISABLE = 2
    CLEAR_FAULTS = 3


class ModuleState(enum.IntEnum):
    """Values of Heartbeat.State."""

    BOOT = 0
    DISABLED = 1
    ENABLED = 2
    FAULT = 3
    WATCHDOG = 4
    ESTOP = 5


class Parameter(enum.IntEnum):
    """Indices of ParameterRequest/ParameterReply.Index (values are float32 in the unit the name says)."""

    KP_H = 1
    KD_H = 2
    KP_V = 3
    KD_V = 4
    LIMIT_H_DEG = 5
    LIMIT_V_DEG = 6
    WATCHDOG_PERIODS = 7
    REFERENCE_PERIOD_MS = 8
    FEEDBACK_RATE_HZ = 9
    TORQUE_LIMIT_H_NM = 10
    TORQUE_LIMIT_V_NM = 11
    FREE_PLAY_DEG = 12


class ParameterResult(enum.IntEnum):
    OK = 0
    UNKNOWN_INDEX = 1
    OUT_OF_RANGE = 2
    READ_ONLY = 3
    LOCKED = 4  # a write while the module is enabled: parameters change only while the drive is off


# Protocol rules shared by the firmware (aiko_joint.h) and the emulator; test_c_codec.py checks both agree.
SEQUENCE_WINDOW = 8  # a reference is accepted if (seq - last) mod 256 is in 1..SEQUENCE_WINDOW
WATCHDOG_TIMEOUT_MIN_MS = 10.0  # WatchdogPeriods x ReferencePeriodMs must stay inside [min, max]
WATCHDOG_TIMEOUT_MAX_MS = 2000.0


@dataclass(frozen=True)
class IdScheme:
    """Frame ids of the protocol: broadcast ids and per-node bases, as found in the DBC."""

    broadcast_ids: dict[MessageKind, int]
    node_bases: dict[MessageKind, int]
    node_ids: tuple[int, ...]
    _by_frame_id: dict[int, tuple[MessageKind, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        table = {fid: (kind, 0) for kind, fid in self.broadcast_ids.items()}
        for kind, base in self.node_bases.items():
            for node in self.node_ids:
                table[base + node] = (kind, node)
        object.__setattr__(self, "_by_frame_id", table)

    def frame_id(self, kind: MessageKind, node: int = 0) -> int:
        if kind in self.broadcast_ids:
            return self.broadcast_ids[kind]
        if node not in self.node_ids:
            raise ValueError(f"node {node!r} is not defined in {DBC_PATH.name}; allowed nodes: {self.node_ids}")
        return self.node_bases[kind] + node

    def classify(self, frame_id: int) -> tuple[MessageKind, int] | None:
        """(kind, node) of a frame id, node 0 for broadcasts; None for an id the protocol does not define."""
        return self._by_frame_id.get(frame_id)


@functools.cache
def load_database() -> cantools.database.can.Database:
    """The parsed DBC (strict: overlapping signals or bad lengths fail loudly)."""
    return cantools.database.load_file(str(DBC_PATH), strict=True)


@functools.cache
def id_scheme() -> IdScheme:
    """Derive broadcast ids and per-node bases from the DBC message names; inconsistencies raise."""
    stems = {k.value: k for k in MessageKind}
    broadcast: dict[MessageKind, int] = {}
    nodes_by_kind: dict[MessageKind, dict[int, int]] = {}
    for message in load_database().messages:
        if message.name in stems:
            broadcast[stems[message.name]] = message.frame_id
            continue
        match = _PER_NODE_NAME.match(message.name)
        if match is None or match["kind"] not in stems:
            raise ValueError(f"{DBC_PATH.name}: message {message.name!r} does not follow <Kind>_<NN> naming")
        nodes_by_kind.setdefault(stems[match["kind"]], {})[int(match["node"])] = message.frame_id
    bases: dict[MessageKind, int] = {}
    node_sets = set()
    for kind, by_node in nodes_by_kind.items():
        offsets = {fid - node for node, fid in by_node.items()}
        if len(offsets) != 1:
            raise ValueError(f"{DBC_PATH.name}: {kind.value}_NN ids are not base + node: {by_node}")
        bases[kind] = offsets.pop()
        node_sets.add(tuple(sorted(by_node)))
    if len(node_sets) != 1:
        raise ValueError(f"{DBC_PATH.name}: per-node message families define different node sets: {node_sets}")
    return IdScheme(broadcast_ids=broadcast, node_bases=bases, node_ids=node_sets.pop())


def message_name(kind: MessageKind, node: int = 0) -> str:
    return kind.value if kind in BROADCAST_KINDS else f"{kind.value}_{node:02d}"
