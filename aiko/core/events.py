"""Every kind of event a run writes to ``/events``, declared in one table with its fields.

An event is ``recorder.event(kind, t_ns, **fields)``. The log's ``/events`` channel has one schema,
``aiko.Event``, built from this table, identical in every log and on the live Foxglove server: ``kind`` (one of
the kinds below) and the union of all kinds' fields, each with one type; and, per kind, which fields it carries
(``allOf`` / ``if kind == …`` / ``then``, standard JSON Schema that Foxglove's parser leaves alone). The recorders
refuse a kind that is not declared here, a field the kind does not declare and a value of the wrong type.

A new event kind is one :func:`declare_event` line below (a field name used by several kinds keeps one type).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiko.core.messages import (
    JSON_SCHEMA_DRAFT,
    NAN_NOTE,
    Field,
    SchemaError,
    integer,
    integers,
    number,
    numbers,
    string,
    strings,
    vectors,
)

EVENTS_TOPIC = "/events"
EVENT_SCHEMA_NAME = "aiko.Event"


@dataclass(frozen=True)
class EventKind:
    kind: str
    doc: str
    fields: Mapping[str, Field]


EVENT_KINDS: dict[str, EventKind] = {}
_FIELDS: dict[str, Field] = {}  # every field name of every kind: one type per name


def declare_event(kind: str, doc: str, **fields: Field) -> EventKind:
    """Declare an event kind and its fields (all required unless declared ``optional=True``)."""
    if kind in EVENT_KINDS:
        raise ValueError(f"event kind {kind!r} is declared twice")
    if "kind" in fields:
        raise ValueError("'kind' is the event kind itself, not a field")
    for name, spec in fields.items():
        known = _FIELDS.get(name, spec)
        if (known.kind, known.unit, known.axes) != (spec.kind, spec.unit, spec.axes):
            raise ValueError(
                f"event field {name!r} of {kind!r} is a {spec.kind} [{spec.unit}], but another kind declares it a "
                f"{known.kind} [{known.unit}]: one field name, one type (the viewers see one /events schema)"
            )
    for name, spec in fields.items():
        _FIELDS.setdefault(name, spec)
    declared = EventKind(kind, doc, dict(fields))
    EVENT_KINDS[kind] = declared
    return declared


def encode_event(kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ``/events`` payload ``{"kind": kind, **fields}`` as logged, checked against the kind's declaration."""
    declared = EVENT_KINDS.get(kind)
    if declared is None:
        raise SchemaError(f"event kind {kind!r} is not declared: add it to aiko/core/events.py (declare_event)")
    out: dict[str, Any] = {"kind": kind}
    for name, value in fields.items():
        spec = declared.fields.get(name)
        if spec is None:
            allowed = ", ".join(declared.fields) or "none"
            raise SchemaError(f"event {kind!r}: field {name!r} is not declared (its fields: {allowed})")
        out[name] = spec.encode(value, f"event {kind}.{name}")
    missing = [name for name, spec in declared.fields.items() if not spec.optional and name not in fields]
    if missing:
        raise SchemaError(f"event {kind!r}: missing field(s) {', '.join(missing)}")
    return out


def events_json_schema() -> dict[str, Any]:
    """The one ``/events`` schema (``aiko.Event``), written to every log and announced live."""
    kinds = sorted(EVENT_KINDS)
    properties: dict[str, Any] = {
        "kind": {"type": "string", "enum": kinds, "description": "what happened; the fields each kind carries are "
                 "listed under allOf"},
    }  # fmt: skip
    for name in sorted(_FIELDS):
        properties[name] = _FIELDS[name].json_schema()
        properties[name]["description"] = _union_doc(name)
    per_kind = []
    for kind in kinds:
        declared = EVENT_KINDS[kind]
        per_kind.append({
            "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
            "then": {
                "description": f"{kind}: {declared.doc}",
                "properties": {"kind": {"const": kind}, **{n: f.json_schema() for n, f in declared.fields.items()}},
                "required": ["kind", *[n for n, f in declared.fields.items() if not f.optional]],
                "additionalProperties": False,
            },
        })  # fmt: skip
    return {
        "$schema": JSON_SCHEMA_DRAFT,
        "title": EVENT_SCHEMA_NAME,
        "description": f"What happened during the run, one message per event: its kind and that kind's fields. "
        f"{NAN_NOTE}",
        "type": "object",
        "properties": properties,
        "required": ["kind"],
        "additionalProperties": False,
        "allOf": per_kind,
    }


def _union_doc(name: str) -> str:
    users = [k for k, d in sorted(EVENT_KINDS.items()) if name in d.fields]
    docs = {EVENT_KINDS[k].fields[name].doc for k in users}
    unit = _FIELDS[name].unit
    text = "; ".join(sorted(docs))
    return f"{text}{f' [{unit}]' if unit else ''} (in {', '.join(users)})"


# -- the table ----------------------------------------------------------------------------------------------------
# the task loop (aiko.core.loop): every robot's run
declare_event("start", "the run started: drives enabled, first deadline", duration_s=number("planned run time", "s"))
declare_event("stop", "the run ended and the backend was deactivated (every exit path)")
declare_event("interrupted", "Ctrl-C: the run was ended early and the backend deactivated")
declare_event("error", "the run failed with an unexpected error", message=string("the error"))
declare_event(
    "deadline_missed",
    "a late wake-up: the task ran once, late, with its newest passed deadline; the older ones were superseded "
    "(never run, never replayed in a burst)",
    task=string("the periodic task"),
    count=integer("deadlines superseded"),
    gap_s=number("the silence the task's receivers saw: from its previous run to this one", "s"),
    late_s=number("how late the oldest superseded deadline was", "s"),
    run_t_s=number("run time of the deadline run now, late", "s"),
    resume_t_s=number("run time of the next deadline the task runs", "s"),
    slept_s=number(
        "how long the loop's last sleep lasted; gap_s minus that went in the loop's own calls before it",
        "s",
        optional=True,
    ),
    process_cpu_s=number(
        "CPU time the whole process used from the loop's previous wake-up (its tasks, then the sleep) to this one",
        "s",
        optional=True,
    ),
    voluntary_switches=integer("times the loop's thread blocked meanwhile (-1: not known here)", optional=True),
    involuntary_switches=integer("times it was preempted meanwhile (-1: not known here)", optional=True),
    major_faults=integer("page faults of the process that waited for the disk meanwhile", optional=True),
    thread_cpu_s=number(
        "CPU time of the loop's thread meanwhile (-1: no scheduler statistics here)", "s", optional=True
    ),
    runqueue_wait_s=number(
        "time the loop's thread was runnable but waited for a CPU meanwhile: outranked or the CPUs all taken "
        "(-1: no scheduler statistics here)",
        "s",
        optional=True,
    ),
)
declare_event(
    "run_stopped",
    "a safety rule stopped the run (a joint module in fault, stale or disabled; a protective stop)",
    message=string("why, in words"),
    modules=integers("the joint modules concerned, 1-based", optional=True),
    reasons=strings("estop_or_fault, watchdog, feedback_stale or disabled", optional=True),
    t_s=number("run time of the reading that stopped the run", "s", optional=True),
    safety_mode=integer("the UR controller's safety mode (3: protective stop)", optional=True),
    force_n=number("the flange force that exceeded the limit", "N", optional=True),
    force_max_n=number("the flange force limit", "N", optional=True),
)
# the log itself (aiko.log)
declare_event("log_closed_on_error", "the recorder was closed by an error", error=string("the error"))
# the CAN bus (aiko.devices.can, aiko.log.can_frames)
declare_event("can_error", "python-can reported an error on the bus", error=string("the error"))
declare_event("can_warning", "a CAN bus condition worth knowing, reported once", message=string("the warning"))
for _name, _doc in (
    ("module_fault", "a joint module reported FAULT"),
    ("module_watchdog", "a joint module's watchdog tripped (it stopped hearing references)"),
    ("module_estop", "a joint module reported an emergency stop"),
    ("module_disabled", "a joint module was disabled by something other than this run"),
    ("module_feedback_recovered", "a joint module whose feedback had gone stale reports again"),
):
    declare_event(_name, _doc, node=integer("the joint module's node id"))
declare_event(
    "module_feedback_stale",
    "a joint module sent no feedback for longer than the stale limit",
    node=integer("the joint module's node id"),
    age_s=number("age of its last feedback", "s"),
)
# the simulators (aiko.robots.aiko.backends)
declare_event(
    "planar_snake_obstacles",
    "the obstacles of a planar_snake run (after overlapping ones were removed)",
    centres_m=vectors("obstacle centres in the plane", ("x", "y"), "m"),
    radii_m=numbers("obstacle radii", "m"),
)
declare_event("sim_error", "the simulator failed", message=string("the error"))
declare_event(
    "sim_diverged",
    "the 3D simulator's state diverged",
    message=string("the error"),
    links=integers("the links that diverged, 1-based"),
)
# rod runs (aiko.robots.rod_bench.run)
declare_event("run_started", "a rod simulation started", experiment=string("the rod experiment's name"))
declare_event("run_finished", "a rod simulation reached its end")
declare_event("run_failed", "a rod simulation stopped early", error=string("the error"))
# motion capture (aiko.core.mocap sources: aiko.devices.vicon, aiko.devices.camera)
_SOURCE = string("the motion-capture source (vicon, opencv, simulated)")
_HOST = string("the Vicon DataStream server's address")
declare_event("mocap_connected", "the motion-capture client connected", source=_SOURCE, host=_HOST)
declare_event(
    "mocap_reconnected", "the motion-capture client connected again", source=_SOURCE, host=_HOST,
    reconnects=integer("reconnections so far"),
)  # fmt: skip
declare_event(
    "mocap_connection_lost", "the motion-capture client lost its server", source=_SOURCE, host=_HOST,
    result=integer("the DataStream SDK's result code"),
)  # fmt: skip
declare_event(
    "mocap_reader_exited", "the Vicon SDK client process ended", source=_SOURCE, host=_HOST,
    returncode=integer("its exit status"),
)  # fmt: skip
declare_event(
    "mocap_video_ended", "a video file used as motion capture ran out", source=_SOURCE,
    frames=integer("frames read"),
)  # fmt: skip
declare_event(
    "mocap_camera_lost", "the camera used as motion capture stopped delivering frames", source=_SOURCE,
    device=string("the camera device"),
)  # fmt: skip
declare_event(
    "mocap_camera_recovered", "the camera used as motion capture delivers frames again", source=_SOURCE,
    failed_reads=integer("reads that failed meanwhile"),
)  # fmt: skip
# a driven run (aiko.robots.aiko.drive.session)
_AT = number("run time of the drive tick", "s")
declare_event("inputs_ignored", "inputs that came while the run could not take them", t_s=_AT,
              count=integer("how many"))  # fmt: skip
declare_event("operator_stop", "the operator stopped the run (the robot is brought to rest first)", t_s=_AT)
declare_event(
    "input_lost", "the operator's input device went away: the gait pauses", t_s=_AT,
    device=string("the input device (keyboard, gamepad, foxglove)"), reason=string("why, as the device said"),
)  # fmt: skip
declare_event("input_restored", "the input device is back", t_s=_AT, device=string("the input device"))
declare_event(
    "references_stopped", "the input stayed lost: the PC stopped sending references (the modules' watchdog stops)",
    t_s=_AT, reason=string("why (input_lost)"), held_s=number("how long the robot was held first", "s"),
)  # fmt: skip
