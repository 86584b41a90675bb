"""Experiment-log write cost: time per record() for Aiko's channels (10 joints), with flushes, and the file size.

Prints one JSON object. Usage: python benchmarks/log_write.py [--seconds-simulated 60]
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np

from aiko.log import LogReader, McapRecorder


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
                rec.record(topic, t, payload)
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
                rec.record(topic, start_ns + t, payload)
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
