"""Experiment-log write cost: time per record() for Aiko's channels (10 joints), with flushes, and the file size.

Each record is encoded by its channel's declaration (aiko.core.messages: checked field by field, NaN to null,
vectors to objects) and written as JSON. For the JSON-vs-protobuf choice (docs/experiments.md) the same messages
are also written as protobuf would put them on the wire (packed repeated doubles and varints, hand-encoded here:
the format is simple, and size is all this measures) into an MCAP file with the same chunks and zstd:
``protobuf_file_bytes``.

Prints one JSON object. Usage: python benchmarks/log_write.py [--seconds-simulated 60]
"""

import argparse
import json
import os
import struct
import tempfile
import time

import numpy as np
from mcap.writer import CompressionType, Writer

from aiko.core.messages import Message
from aiko.core.mocap import MOCAP_CHANNEL
from aiko.log import LogReader, McapRecorder
from aiko.log.encoding import message_bytes, to_jsonable
from aiko.robots.aiko.joints import FEEDBACK_CHANNEL, REFERENCES_CHANNEL

CHANNELS = {"/joint_feedback": FEEDBACK_CHANNEL, "/references": REFERENCES_CHANNEL, "/mocap": MOCAP_CHANNEL}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def protobuf_wire(message: Message, payload: dict) -> bytes:
    """The payload as protobuf would encode it (field numbers in declaration order; vectors as repeated
    submessages of doubles; strings as bytes)."""
    out = bytearray()
    for number, (name, spec) in enumerate(message.fields.items(), start=1):
        if name not in payload:
            continue
        value = payload[name]
        if spec.kind == "number":
            out += _varint(number << 3 | 1) + struct.pack("<d", float(value))
        elif spec.kind in ("integer", "boolean"):
            out += _varint(number << 3) + _varint(int(value))
        elif spec.kind == "string":
            data = str(value).encode()
            out += _varint(number << 3 | 2) + _varint(len(data)) + data
        elif spec.kind == "numbers":
            data = np.asarray(value, dtype="<f8").tobytes()
            out += _varint(number << 3 | 2) + _varint(len(data)) + data
        elif spec.kind in ("integers", "booleans"):
            data = b"".join(_varint(int(v)) for v in np.asarray(value).ravel())
            out += _varint(number << 3 | 2) + _varint(len(data)) + data
        elif spec.kind == "strings":
            for item in value:
                data = str(item).encode()
                out += _varint(number << 3 | 2) + _varint(len(data)) + data
        elif spec.kind == "vectors":
            for row in np.asarray(value, dtype=float).reshape(-1, len(spec.axes)):
                data = b"".join(_varint(k << 3 | 1) + struct.pack("<d", v) for k, v in enumerate(row, start=1))
                out += _varint(number << 3 | 2) + _varint(len(data)) + data
        else:
            raise ValueError(f"{name}: {spec.kind} not in this benchmark's channels")
    return bytes(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds-simulated", type=float, default=60.0)
    parser.add_argument("--seconds-paced", type=float, default=5.0, help="real-time run at Aiko's rates")
    args = parser.parse_args()
    n = 10
    rng = np.random.default_rng(0)
    rates = {"/joint_feedback": 100, "/references": 10, "/mocap": 20}
    events = sorted(
        (round(k * 1e9 / rate), topic)
        for topic, rate in rates.items()
        for k in range(int(args.seconds_simulated * rate))
    )
    payloads = {
        "/joint_feedback": lambda: {
            "t_s": 0.0,
            "angle_h_rad": rng.normal(size=n),
            "angle_v_rad": rng.normal(size=n),
            "rate_h_rad_s": rng.normal(size=n),
            "rate_v_rad_s": rng.normal(size=n),
            "status": [1] * n,
        },
        "/references": lambda: {
            "t_s": 0.0,
            "angle_h_rad": rng.normal(size=n),
            "angle_v_rad": rng.normal(size=n),
            "rate_h_rad_s": rng.normal(size=n),
            "rate_v_rad_s": rng.normal(size=n),
        },
        "/mocap": lambda: {
            "capture_t_ns": 0,
            "latency_s": 0.01,
            "frame": 1,
            "source": "vicon",
            "names": ["link6"],
            "position_m": rng.normal(size=(1, 3)),
            "quaternion_wxyz": rng.normal(size=(1, 4)),
            "occluded": [False],
        },
    }
    prepared = [(t, topic, payloads[topic]()) for t, topic in events]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.mcap")
        # flush_interval_s tiny so flushing happens as often as in a real-time run (every 0.5 s of wall time)
        per_call = []
        with McapRecorder(path, flush_interval_s=1.0) as rec:
            start = time.perf_counter()
            for t, topic, payload in prepared:
                t0 = time.perf_counter_ns()
                rec.record(CHANNELS[topic], t, payload)
                per_call.append(time.perf_counter_ns() - t0)
            elapsed = time.perf_counter() - start
            t0 = time.perf_counter_ns()
            rec.flush()
            flush_ns = time.perf_counter_ns() - t0
        size = os.path.getsize(path)
        t0 = time.perf_counter()
        reader = LogReader(path)
        reader.channel("/joint_feedback")
        read_s = time.perf_counter() - t0
    per_call_us = np.array(per_call) / 1e3
    # the caller's encoding cost alone, CPU time, interleaved in rounds: by the declaration (checked, vectors to
    # objects) against what the recorder did before declared schemas (to_jsonable + json.dumps, unchecked)
    declared_s, untyped_s = 0.0, 0.0
    for _ in range(5):
        t0 = time.process_time()
        for _, topic, payload in prepared:
            message_bytes(CHANNELS[topic], payload)
        declared_s += time.process_time() - t0
        t0 = time.process_time()
        for _, _topic, payload in prepared:
            json.dumps(to_jsonable(payload), separators=(",", ":"), allow_nan=False).encode()
        untyped_s += time.process_time() - t0
    encode_declared_us = 1e6 * declared_s / (5 * len(prepared))
    encode_untyped_us = 1e6 * untyped_s / (5 * len(prepared))
    with tempfile.TemporaryDirectory() as tmp:  # the same messages as protobuf: same chunk size, same zstd
        path = os.path.join(tmp, "protobuf.mcap")
        with open(path, "wb") as fh:
            writer = Writer(fh, chunk_size=1024 * 1024, compression=CompressionType.ZSTD)
            writer.start()
            ids = {}
            for topic, channel in CHANNELS.items():
                schema = writer.register_schema(name=channel.message.name, encoding="protobuf", data=b"")
                ids[topic] = writer.register_channel(topic=topic, message_encoding="protobuf", schema_id=schema)
            for t, topic, payload in prepared:
                data = protobuf_wire(CHANNELS[topic].message, payload)
                writer.add_message(channel_id=ids[topic], log_time=t, publish_time=t, data=data)
            writer.finish()
        protobuf_size = os.path.getsize(path)
    # Paced: the same channels at their real rates on the wall clock, as the control loop records them; here the
    # writer thread's compression and flushes overlap the records, as in a run.
    paced = []
    with tempfile.TemporaryDirectory() as tmp:
        with McapRecorder(os.path.join(tmp, "paced.mcap"), flush_interval_s=1.0) as rec:
            start_ns = time.monotonic_ns()
            for t, topic, payload in prepared:
                if t > args.seconds_paced * 1e9:
                    break
                while time.monotonic_ns() - start_ns < t:
                    time.sleep(0.0002)
                t0 = time.perf_counter_ns()
                rec.record(CHANNELS[topic], start_ns + t, payload)
                paced.append(time.perf_counter_ns() - t0)
    paced_us = np.array(paced) / 1e3
    print(
        json.dumps(
            {
                "benchmark": "log_write",
                "messages": len(prepared),
                "simulated_seconds": args.seconds_simulated,
                "record_us_median": float(np.median(per_call_us)),
                "record_us_p99": float(np.percentile(per_call_us, 99)),
                "record_us_max": float(per_call_us.max()),
                "messages_per_s": len(prepared) / elapsed,
                "flush_ms": flush_ns / 1e6,
                "file_bytes": size,
                "bytes_per_message": size / len(prepared),
                "encode_cpu_us_declared": encode_declared_us,
                "encode_cpu_us_untyped": encode_untyped_us,
                "encode_declared_over_untyped": encode_declared_us / encode_untyped_us,
                "protobuf_file_bytes": protobuf_size,
                "json_over_protobuf_size": size / protobuf_size,
                "read_and_decode_s": read_s,
                "paced_messages": len(paced),
                "paced_record_us_median": float(np.median(paced_us)),
                "paced_record_us_p99": float(np.percentile(paced_us, 99)),
                "paced_record_us_max": float(paced_us.max()),
            }
        )
    )


if __name__ == "__main__":
    main()
