"""The C codec (aiko_joint.h/.c) is compiled by host gcc and gives the same bytes as Python on vectors.json;
its constants agree with the DBC; it also builds for the ATmega128 when avr-gcc is installed."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from firmware_protocol.codec import default_codec
from firmware_protocol.dbc import ESTOP_KEY, MessageKind, load_database
from firmware_protocol.errors import SignalRangeError
from firmware_protocol.vectors import VECTORS_PATH, build_vectors, load_vectors

PKG = Path(__file__).resolve().parents[2] / "firmware_protocol"
HARNESS = Path(__file__).with_name("c_harness.c")
FIELD_ORDER = {
    "EmergencyStop": [],
    "Command": ["Command", "TargetNode"],
    "JointReference": ["AngleH", "AngleV", "RateH", "RateV", "Sequence"],
    "JointFeedback": ["AngleH", "AngleV", "EffortH", "EffortV", "<status>", "RefSequence"],
    "JointRates": ["RateH", "RateV", "RejectedFrames", "AcceptedReferences"],
    "ParameterRequest": ["Index", "Write", "Value"],
    "ParameterReply": ["Index", "Result", "Value"],
    "Heartbeat": ["State", "FirmwareVersion", "Uptime"],
}
STATUS_BITS = ["Enabled", "Fault", "Watchdog", "AtLimit", "Saturated", "EStop"]


def _fields(vector) -> list:
    raw = vector["raw"]
    out = []
    for name in FIELD_ORDER[vector["message"]]:
        if name == "<status>":
            out.append(sum(int(raw[b]) << i for i, b in enumerate(STATUS_BITS)))
        else:
            out.append(raw[name])
    return out


def _fmt(x) -> str:
    return repr(float(x)) if isinstance(x, float) and not float(x).is_integer() else str(int(x))


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("host gcc is not installed; the C codec cannot be checked")
    exe = tmp_path_factory.mktemp("c") / "harness"
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2", f"-I{PKG}"]
    subprocess.run([*cmd, str(HARNESS), str(PKG / "aiko_joint.c"), "-o", str(exe)], check=True)
    return exe


def test_vectors_file_is_in_sync_with_the_dbc_and_python_codec():
    assert load_vectors() == build_vectors(), f"stale {VECTORS_PATH.name}: run python -m firmware_protocol.vectors"
    codec = default_codec()
    families = {v["message"] for v in load_vectors()}
    assert families == {k.value for k in MessageKind}
    for v in load_vectors():
        decoded = codec.decode(v["frame_id"], bytes.fromhex(v["data"]))
        assert decoded.kind.value == v["message"] and decoded.node == v["node"]
        for name, value in v["values"].items():
            assert decoded.values[name] == pytest.approx(value, abs=1e-9)


def test_c_and_python_produce_identical_bytes(harness):
    vectors = load_vectors()
    lines = [" ".join([v["message"], v["data"], *map(_fmt, _fields(v))]) for v in vectors]
    result = subprocess.run([str(harness)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    outputs = result.stdout.splitlines()
    assert len(outputs) == len(vectors)
    for v, out in zip(vectors, outputs, strict=True):
        encoded, rc, *decoded = out.split()
        assert encoded == v["data"], (v["message"], v["raw"])  # C encode == Python bytes
        assert int(rc) == 0, (v["message"], out)
        expected = _fields(v)
        assert len(decoded) == len(expected)
        for got, want in zip(decoded, expected, strict=True):
            assert float(got) == float(want), (v["message"], out)  # C decode == raw values, float32 exact


def test_c_rejects_bad_frames(harness):
    lines = [
        "JointReference 5146000000000000 0 0 0 0 0",  # AngleH raw 18001: out of range, still decoded
        "JointReference 00000000000000 0 0 0 0 0",  # 7 bytes: wrong DLC
        "EmergencyStop a4",  # wrong key
        "JointFeedback 0000000065000000 0 0 0 0 0 0",  # effort 101 %
    ]
    out = subprocess.run([str(harness)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rcs = [int(line.split()[1]) for line in out.stdout.splitlines()]
    assert rcs == [-2, -1, -3, -2]


def test_c_constants_match_the_dbc():
    header = (PKG / "aiko_joint.h").read_text()
    defines = {m[1]: int(m[2], 0) for m in re.finditer(r"#define (AIKO_\w+) \(?(0x[0-9A-Fa-f]+|\d+)u?\)?", header)}
    codec = default_codec()
    scheme = codec.scheme
    assert defines["AIKO_ID_EMERGENCY_STOP"] == scheme.broadcast_ids[MessageKind.EMERGENCY_STOP]
    assert defines["AIKO_ID_COMMAND"] == scheme.broadcast_ids[MessageKind.COMMAND]
    names = {
        MessageKind.REFERENCE: "REFERENCE",
        MessageKind.FEEDBACK: "FEEDBACK",
        MessageKind.RATES: "RATES",
        MessageKind.PARAMETER_REPLY: "PARAMETER_REPLY",
        MessageKind.PARAMETER_REQUEST: "PARAMETER_REQUEST",
        MessageKind.HEARTBEAT: "HEARTBEAT",
    }
    for kind, name in names.items():
        assert defines[f"AIKO_ID_{name}_BASE"] == scheme.node_bases[kind]
    assert (defines["AIKO_NODE_MIN"], defines["AIKO_NODE_MAX"]) == (
        min(scheme.node_ids),
        max(scheme.node_ids),
    )
    db = load_database()
    assert defines["AIKO_DLC_REFERENCE"] == db.get_message_by_name("JointReference_01").length
    assert defines["AIKO_DLC_FEEDBACK"] == db.get_message_by_name("JointFeedback_01").length
    assert defines["AIKO_DLC_HEARTBEAT"] == db.get_message_by_name("Heartbeat_01").length
    assert defines["AIKO_ESTOP_KEY"] == ESTOP_KEY
    angle = db.get_message_by_name("JointReference_01").get_signal_by_name("AngleH")
    assert defines["AIKO_ANGLE_CDEG_MAX"] == round(angle.maximum / angle.scale)
    feedback = db.get_message_by_name("JointFeedback_01")
    for i, bit in enumerate(STATUS_BITS):
        assert feedback.get_signal_by_name(bit).start == 48 + i


def test_builds_for_atmega128(tmp_path):
    """CI installs Debian's gcc-avr/avr-libc; the size is printed for the report (-s shows it)."""
    if shutil.which("avr-gcc") is None:
        pytest.skip("avr-gcc not installed (apt-get install gcc-avr avr-libc); ATmega128 build not checked")
    obj = tmp_path / "aiko_joint.o"
    cmd = ["avr-gcc", "-mmcu=atmega128", "-Os", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c"]
    subprocess.run([*cmd, str(PKG / "aiko_joint.c"), "-o", str(obj)], check=True)
    size = subprocess.run(["avr-size", str(obj)], capture_output=True, text=True, check=True).stdout
    text_bytes, data_bytes, bss_bytes = (int(x) for x in size.splitlines()[1].split()[:3])
    print(f"ATmega128 codec size: text={text_bytes} data={data_bytes} bss={bss_bytes} bytes")
    assert data_bytes == 0 and bss_bytes == 0  # no RAM tables: the codec is pure code
    assert text_bytes < 4096  # 3 % of the 128 KiB flash


def test_c_and_emulator_agree_on_sequence_and_parameter_write_rules(harness):
    import random

    import numpy as np

    from firmware_protocol.dbc import (
        SEQUENCE_WINDOW,
        WATCHDOG_TIMEOUT_MAX_MS,
        WATCHDOG_TIMEOUT_MIN_MS,
        ModuleState,
        ParameterResult,
    )
    from firmware_protocol.emulator.rules import parameter_write_result, sequence_verdict

    header = (PKG / "aiko_joint.h").read_text()
    defines = {m[1]: int(m[2], 0) for m in re.finditer(r"#define (AIKO_\w+) \(?(0x[0-9A-Fa-f]+|\d+)u?\)?", header)}
    assert defines["AIKO_SEQUENCE_WINDOW"] == SEQUENCE_WINDOW
    assert defines["AIKO_WATCHDOG_TIMEOUT_MIN_MS"] == WATCHDOG_TIMEOUT_MIN_MS
    assert defines["AIKO_WATCHDOG_TIMEOUT_MAX_MS"] == WATCHDOG_TIMEOUT_MAX_MS
    assert defines["AIKO_RESULT_LOCKED"] == ParameterResult.LOCKED
    assert defines["AIKO_STATE_ENABLED"] == ModuleState.ENABLED
    db = load_database()
    reply = db.get_message_by_name("ParameterReply_01").get_signal_by_name("Result")
    assert {int(k): str(v) for k, v in reply.choices.items()}[4] == "Locked"

    rng = random.Random(14)
    seq_cases = [(s, last) for s in range(256) for last in (0, 5, 250)]
    param_cases = []
    specials = [0.0, 1.0, 3.0, 9.9, 10.0, 100.0, 1000.0, 1e6, -1.0, float("nan"), float("inf"), 2000.0, 20.0]
    for _ in range(3000):
        value = rng.choice(specials) if rng.random() < 0.4 else rng.uniform(-10, 3000)
        value = float(np.float32(value))
        wd = float(np.float32(rng.choice([1.0, 3.0, 20.0, 100.0, rng.uniform(1, 100)])))
        ref = float(np.float32(rng.choice([1.0, 5.0, 10.0, 100.0, 1000.0, rng.uniform(1, 1000)])))
        param_cases.append((rng.randrange(6), rng.randrange(16), value, wd, ref))
    lines = [f"Sequence {s} {last}" for s, last in seq_cases]
    lines += [f"ParameterWrite {st} {ix} {v!r} {wd!r} {ref!r}" for st, ix, v, wd, ref in param_cases]
    out = subprocess.run([str(harness)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    results = out.stdout.split()
    assert len(results) == len(lines)
    for (s, last), got in zip(seq_cases, results[: len(seq_cases)], strict=True):
        assert int(got) == (sequence_verdict(s, last) is None), (s, last)
    for case, got in zip(param_cases, results[len(seq_cases) :], strict=True):
        assert int(got) == parameter_write_result(*case), case


def test_c_rejects_parameter_requests_with_reserved_bits_set_or_a_value_outside_the_dbc_range(harness):
    """Checked in the Python codec's order: the Value's DBC range (NaN, infinite: AIKO_ERR_RANGE = -2) before the
    bits the DBC leaves undefined (AIKO_ERR_RESERVED = -4)."""
    lines = ["ParameterRequest 0701000000004040 7 1 3", "ParameterRequest 0703000000004040 7 1 3"]
    lines += ["ParameterRequest 0701000100004040 7 1 3", "ParameterRequest 070100000000C07F 7 1 3"]
    lines += ["ParameterRequest 070300000000807F 7 1 3", "ParameterRequest 070100009EC97F7F 7 1 3"]
    lines += ["ParameterRequest 070100009FC97F7F 7 1 3"]
    out = subprocess.run([str(harness)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    assert [int(line.split()[1]) for line in out.stdout.splitlines()] == [0, -4, -4, -2, -2, 0, -2]
    codec = default_codec()
    for line, rc in zip(lines, [0, -4, -4, -2, -2, 0, -2], strict=True):  # the Python codec's verdict on the Value
        data = bytes.fromhex(line.split()[1])
        in_range = True
        try:
            codec.decode(0x601, data)
        except SignalRangeError:
            in_range = False
        assert in_range == (rc != -2), line
