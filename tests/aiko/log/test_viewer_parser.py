"""Our logs through the viewer's own code: Foxglove Studio 1.48's MCAP reader, run unmodified with node.

``tools/foxglove/studio_read.mjs`` runs Studio's ``McapIterableSourceWorker`` bundle (``@foxglove/studio-base`` 1.48
on npm, the open-source Studio that Lichtblick forked; its ``parseChannel`` / ``parseJsonSchema`` are not published
on their own) over a log: every channel's schema goes through Studio's JSON-schema and protobuf parsers, every
message through the channel's deserializer. A channel Studio rejects is a "problem" (the "Unsupported type" the
issue saw); a message it cannot decode is one too.

The logs are the ones users make, made here by the commands users type: ``make run``'s HIL run and its replay, a 3D
simulation, a planar run among obstacles, a rod run and a bench HIL run (shortened), plus one log holding every
channel and event kind declared anywhere in the stack. Needs node and ``cd tools/foxglove && npm ci`` (``.ci/run``
does both); without them these tests skip, saying so.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader

import aiko
from aiko.core.events import EVENT_KINDS, encode_event
from aiko.core.messages import Field, Message, declared_channels
from aiko.log import McapRecorder

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools" / "foxglove"
OLD_LOGS = Path(__file__).with_name("logs_before_declared_schemas")
BENCH_HOST = "127.0.0.114"


def studio_read(*paths: Path, keep: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """What Foxglove Studio 1.48 made of each log: {path: {topics, problems, datatypes, counts, first, kept, ...}}
    (``kept``: every message of the ``keep`` topics, as Studio decoded them)."""
    node = shutil.which("node")
    bundle = TOOLS / "node_modules" / "@foxglove" / "studio-base" / "assets"
    if node is None or not bundle.is_dir():
        pytest.skip(
            "needs node (Debian: apt-get install nodejs npm) and Foxglove Studio's bundle: cd tools/foxglove && npm ci"
        )
    args = [arg for topic in keep for arg in ("--keep", topic)]
    proc = subprocess.run(
        [node, str(TOOLS / "studio_read.mjs"), *args, *map(str, paths)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return {r["path"]: r for r in results}


def file_counts(path: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Messages per topic and schema name per topic, from the file's own summary (the mcap library)."""
    with open(path, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None and summary.statistics is not None
    counts = {ch.topic: summary.statistics.channel_message_counts.get(cid, 0) for cid, ch in summary.channels.items()}
    names = {ch.topic: summary.schemas[ch.schema_id].name for ch in summary.channels.values()}
    return counts, names


def assert_studio_loads_everything(path: Path, seen: dict[str, Any]) -> None:
    """Every channel parsed (no problem at all), every message deserialized, each JSON message's fields in the
    datatypes Studio derived from its schema."""
    counts, names = file_counts(path)
    assert seen["problems"] == [], seen["problems"]
    assert seen["messageProblems"] == [], seen["messageProblems"][:3]
    assert {t["name"]: t["schemaName"] for t in seen["topics"]} == names
    assert seen["counts"] == {topic: n for topic, n in counts.items() if n}
    datatypes = seen["datatypes"]
    for topic, message in seen["first"].items():
        fields = {f["name"] for f in datatypes[names[topic]]}
        assert set(message) <= fields, (topic, set(message) - fields)


# -- the logs users make ---------------------------------------------------------------------------------------
def _aiko(*args: str, cwd: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "aiko.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"aiko {' '.join(args)}: {proc.stderr[-2000:]}"


@pytest.fixture(scope="module")
def user_logs(tmp_path_factory) -> dict[str, Path]:
    """One log of each kind, by the commands of README (shortened): from fresh processes, as a user runs them."""
    out = tmp_path_factory.mktemp("viewer_logs")
    e = ROOT / "experiments"
    hil = ("run", str(e / "sidewinding_hil.toml"), "--out", "hil.mcap", "--replay", "sim", "--no-report")
    _aiko(*hil, "--duration", "1", cwd=out)  # make run's command, shorter
    _aiko("run", str(e / "sidewinding.toml"), "--backend", "sim", "--duration", "1", "--out", "sim.mcap",
          "--no-report", cwd=out)  # fmt: skip
    _aiko("run", str(e / "obstacle_aided_structured.toml"), "--duration", "1", "--out", "planar.mcap", "--no-report",
          cwd=out)  # fmt: skip
    _aiko("rod", "run", str(e / "rod" / "rod_on_plane.toml"), "--duration", "0.1", "--out", "rod.mcap", cwd=out)
    _aiko("bench", "run", str(e / "rod" / "bench_stick.toml"), "--backend", "hil", "--duration", "0.2", "--host",
          BENCH_HOST, "--out", "bench_hil.mcap", cwd=out)  # fmt: skip
    return {p.stem: p for p in sorted(out.glob("*.mcap"))}


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the fixture runs six commands (minutes on a loaded 2-core machine)
def test_studio_loads_every_channel_of_every_kind_of_log(user_logs):
    assert set(user_logs) == {"hil", "hil-replay", "sim", "planar", "rod", "bench_hil"}
    seen = studio_read(*user_logs.values())
    for path in user_logs.values():
        assert_studio_loads_everything(path, seen[str(path)])
    # the channels the issue saw rejected, and the protobuf views, are all among them
    topics = {t["name"] for r in seen.values() for t in r["topics"]}
    for topic in ("/joint_feedback", "/references", "/mocap", "/mocap/tracked_point", "/sim/link_poses",
                  "/sim/contacts", "/sim/solver", "/sim/rod/contacts", "/bench/markers", "/bench/observation",
                  "/foxglove/tf", "/foxglove/body", "/foxglove/joint_states", "/foxglove/rod", "/events"):  # fmt: skip
        assert topic in topics, topic
    # a vector is an object in the viewer: /sim/link_poses.position_m[5].z is link 6's height
    sim = seen[str(user_logs["sim"])]
    link6 = sim["first"]["/sim/link_poses"]["position_m"][5]
    assert set(link6) == {"x", "y", "z"} and link6["z"] > 0
    fields = {f["name"]: f for f in sim["datatypes"]["aiko.snake3d.LinkPoses.position_m"]}
    assert fields["z"]["type"] == "float64"


# -- every declared channel and event kind -------------------------------------------------------------------
def _import_the_stack() -> None:
    """Every module of aiko, so that every channel declared anywhere is declared here too."""
    for module in pkgutil.walk_packages(aiko.__path__, "aiko."):
        importlib.import_module(module.name)


def _example(spec: Field) -> Any:
    """A value for a declared field, with a NaN (logged as null) where the field holds floats."""
    kind = spec.kind
    if kind == "number":
        return 0.5
    if kind == "integer":
        return 3
    if kind == "string":
        return "text"
    if kind == "boolean":
        return True
    if kind == "numbers":
        return [0.5, math.nan]
    if kind == "integers":
        return [1, 2]
    if kind == "strings":
        return ["a", "b"]
    if kind == "booleans":
        return [True, False]
    if kind == "vectors":
        return [[0.25] * len(spec.axes), [math.nan] * len(spec.axes)]
    if kind == "record":
        return {name: _example(f) for name, f in spec.fields.items()}
    if kind == "records":
        return [{name: _example(f) for name, f in spec.fields.items()}]
    raise AssertionError(kind)


def _payload(message: Message) -> dict[str, Any]:
    return {name: _example(spec) for name, spec in message.fields.items()}


def test_studio_parses_every_declared_channel_and_event_kind(tmp_path):
    """Every channel declared anywhere in the stack (also those no run above writes: /can/frames, the Vicon fields,
    the arm state), each with every optional field and a NaN, and one event of every kind: a channel someone
    declares later is checked here the day it is declared."""
    _import_the_stack()
    # the stack's own: other tests in this process declare test.* channels (one on /events, to see it refused)
    channels = [c for c in declared_channels() if not c.message.name.startswith("test.")]
    assert len(channels) >= 19  # the stack's own; new ones only add
    logs = []
    for channel in channels:  # one file per channel: two message types may share a topic (the simulators')
        path = tmp_path / f"{channel.message.name}.mcap"
        with McapRecorder(path) as rec:
            rec.record(channel, 1_000, _payload(channel.message))
        logs.append(path)
    events = tmp_path / "events.mcap"
    written = []
    with McapRecorder(events) as rec:
        for k, (kind, declared) in enumerate(sorted(EVENT_KINDS.items())):
            fields = {name: _example(f) for name, f in declared.fields.items()}
            rec.event(kind, 1_000 + k, **fields)
            written.append(encode_event(kind, fields))
    logs.append(events)
    seen = studio_read(*logs, keep=("/events",))
    for path in logs:
        assert_studio_loads_everything(path, seen[str(path)])
    # every event kind, as Studio decoded it, is what was written (NaN as null), with its own fields only
    assert seen[str(events)]["kept"]["/events"] == written
    studio_fields = {f["name"] for f in seen[str(events)]["datatypes"]["aiko.Event"]}
    assert {"kind", "task", "count", "gap_s", "resume_t_s"} <= studio_fields  # deadline_missed's fields


def test_the_check_fails_on_what_studio_rejects():
    """The logs written before declared schemas: Studio rejects their JSON channels (``["number","null"]``, arrays of
    arrays), so the assertion above would fail on them — the check can fail."""
    logs = sorted(OLD_LOGS.glob("*.mcap"))
    seen = studio_read(*logs)
    messages = [p["message"] for r in seen.values() for p in r["problems"]]
    assert any('Unsupported type ["number","null"] for t_s' in m for m in messages), messages
    assert any('Unsupported type "array" for array item force_n' in m for m in messages), messages
    with pytest.raises(AssertionError):
        assert_studio_loads_everything(OLD_LOGS / "sim.mcap", seen[str(OLD_LOGS / "sim.mcap")])
