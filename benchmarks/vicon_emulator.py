"""The emulated Vicon read by the real SDK client (pyvicon-datastream), each in its own process; prints JSON.

    python benchmarks/vicon_emulator.py [--source experiment|synthetic] [--duration-s 10] [--host 127.0.0.70]

- ``frame_rate``: frames the client received per second in ServerPush at 100 Hz, frame-number gaps;
- ``latency``: receive time − capture time per frame (same machine, one wall clock; capture = the server's start
  + frame id / rate) with no injected delay, and with 20 ms injected (also the client's ``get_latency_total``);
- ``in_run``: ``aiko run --realtime`` (kinematic backend, ``mocap.rate_hz = 100``) reading the emulator through
  the SDK in its child process: arrival in the run (``received_t_ns``, CLOCK_MONOTONIC like the emulator's
  clock) − capture, and the loop's sample time − capture;
- ``restart``: the server restarts every 3 s with 0.2 s downtime: from the last frame before the loss to the
  first frame after reconnecting, as the client sees it (the SDK's ``get_frame`` first waits out its 1 s timeout).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.aiko.devices.vicon.processes import free_port, probe, start_vicon, stop_vicon  # noqa: E402


def _source_args(source: str) -> list[str]:
    if source == "experiment":
        return ["--experiment", "experiments/sidewinding_hil.toml", "--backend", "kinematic"]
    return ["--synthetic", "1"]


def _percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}
    pick = lambda q: values[min(int(q * len(values)), len(values) - 1)]  # noqa: E731
    return {
        "p50_ms": pick(0.5) * 1e3,
        "p95_ms": pick(0.95) * 1e3,
        "p99_ms": pick(0.99) * 1e3,
        "max_ms": values[-1] * 1e3,
        "over_50ms_fraction": sum(v > 0.05 for v in values) / len(values),
    }


def measure_stream(host: str, source: str, duration_s: float, latency_ms: float) -> dict:
    port = free_port(host)
    proc, hello = start_vicon(host, port, *_source_args(source), "--rate-hz", "100", "--latency-ms", str(latency_ms))
    try:
        body = "aiko/link6" if source == "experiment" else "subject1/seg1"
        seen = probe(f"{host}:{port}", "ServerPush", duration_s, bodies=(body,))
    finally:
        counters = stop_vicon(proc)
    frames = seen["frames"]
    numbers = [f["number"] for f in frames]
    span_s = frames[-1]["received_unix_s"] - frames[0]["received_unix_s"] if len(frames) > 1 else 0.0
    latency = [f["received_unix_s"] - (hello["t0_unix_s"] + (f["number"] - 1) / 100.0) for f in frames]
    return {
        "injected_latency_ms": latency_ms,
        "frames": len(frames),
        "achieved_rate_hz": (len(frames) - 1) / span_s if span_s else 0.0,
        "frame_number_gaps": sum(1 for a, b in zip(numbers, numbers[1:], strict=False) if b - a != 1),
        "client_observed_latency": _percentiles(latency),
        "sdk_latency_total_ms": statistics.median(f["latency_total_s"] for f in frames) * 1e3 if frames else None,
        "server": {k: counters[k] for k in ("frames_captured", "frames_released", "late_ticks")},
    }


def measure_run(host: str, duration_s: float, tmp: Path) -> dict:
    import subprocess

    from aiko.log import LogReader
    from tests.aiko.devices.vicon.processes import ENV, REPO

    port = free_port(host)
    proc, hello = start_vicon(host, port, *_source_args("experiment"), "--rate-hz", "100")
    out = tmp / "vicon-run.mcap"
    try:
        cmd = [sys.executable, "-m", "aiko.cli", "run", "experiments/sidewinding_hil.toml", "--backend", "kinematic"]
        cmd += ["--realtime", "--duration", str(duration_s), "--out", str(out), "--no-report"]
        cmd += ["--set", "mocap.source=vicon", "--set", f"mocap.host={host}:{port}", "--set", "mocap.rate_hz=100"]
        subprocess.run(cmd, check=True, capture_output=True, env=ENV, cwd=REPO, timeout=duration_s + 120)
    finally:
        stop_vicon(proc)
    samples = [(t, s) for t, s in LogReader(out).messages("/mocap") if not s["occluded"][0]]
    capture = {s["frame"]: hello["t0_monotonic_s"] + (s["frame"] - 1) / 100.0 for _, s in samples}
    arrival = [s["received_t_ns"] * 1e-9 - capture[s["frame"]] for _, s in samples]
    at_loop = [t * 1e-9 - capture[s["frame"]] for t, s in samples]
    return {
        "mocap_samples": len(samples),
        "arrival_in_run_latency": _percentiles(arrival),
        "loop_sample_age": _percentiles(at_loop),
    }


def measure_restart(host: str, source: str, duration_s: float) -> dict:
    port = free_port(host)
    args = [*_source_args(source), "--rate-hz", "100", "--restart-every-s", "3", "--restart-downtime-s", "0.2"]
    proc, _ = start_vicon(host, port, *args)
    try:
        body = "aiko/link6" if source == "experiment" else "subject1/seg1"
        seen = probe(f"{host}:{port}", "ServerPush", duration_s, bodies=(body,))
    finally:
        counters = stop_vicon(proc)
    times = [f["received_unix_s"] for f in seen["frames"]]
    outages = []
    for r in seen["reconnects"]:
        before = [t for t in times if t <= r["lost_unix_s"]]
        after = [t for t in times if t >= r["connected_unix_s"]]
        if before and after:
            outages.append(after[0] - before[-1])
    return {
        "server_restarts": counters["restarts"],
        "client_reconnects": len(seen["reconnects"]),
        "frame_gap_over_restart_s": {
            "mean": statistics.mean(outages) if outages else None,
            "max": max(outages) if outages else None,
        },
        "reconnect_after_loss_s": [round(r["connected_unix_s"] - r["lost_unix_s"], 4) for r in seen["reconnects"]],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", choices=("experiment", "synthetic"), default="experiment")
    p.add_argument("--duration-s", type=float, default=10.0)
    p.add_argument("--host", default="127.0.0.70")
    args = p.parse_args()
    result = {
        "source": args.source,
        "stream": measure_stream(args.host, args.source, args.duration_s, 0.0),
        "stream_with_20ms": measure_stream(args.host, args.source, args.duration_s, 20.0),
        "restart": measure_restart(args.host, args.source, args.duration_s),
    }
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result["in_run"] = measure_run(args.host, args.duration_s, Path(tmp))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
