"""`aiko run … --set mocap.source=vicon`: motion capture over the real protocol, through the real SDK client, from
the emulated Vicon serving a simulation of the experiment — occlusion flagged, restarts logged as reconnects, the
SDK's latency and our receive times in the log."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from aiko.log import LogReader
from tests.aiko.devices.vicon.processes import ENV, REPO, free_port, start_vicon, stop_vicon

pytest.importorskip("pyvicon_datastream")

HOST = "127.0.0.62"
LATENCY_S = 0.02


def test_kinematic_run_tracked_by_the_emulated_vicon(tmp_path):
    port = free_port(HOST)
    proc, hello = start_vicon(
        HOST,
        port,
        "--experiment",
        "experiments/sidewinding_hil.toml",
        "--backend",
        "kinematic",
        "--occlude",
        "link6",
        "--latency-ms",
        str(LATENCY_S * 1e3),
        "--restart-every-s",
        "2",
        "--restart-downtime-s",
        "0.2",
    )
    assert hello["subjects"]["aiko"] == [f"link{k}" for k in range(1, 12)]
    out = tmp_path / "run.mcap"
    try:
        cmd = [sys.executable, "-m", "aiko.cli", "run", "experiments/sidewinding_hil.toml", "--backend", "kinematic"]
        cmd += ["--realtime", "--duration", "5", "--out", str(out), "--json", "--no-report"]
        cmd += ["--set", "mocap.source=vicon", "--set", f"mocap.host={HOST}:{port}"]
        cmd += ["--set", 'mocap.segments=["link6", "link5"]']
        done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    finally:
        counters = stop_vicon(proc)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert counters["restarts"] >= 2 and counters["connections"] >= 2

    log = LogReader(out)
    samples = [payload for _, payload in log.messages("/mocap")]
    assert summary["mocap_samples"] == len(samples) > 50
    assert all(s["names"] == ["aiko/link6", "aiko/link5"] and s["source"] == "vicon" for s in samples)
    occluded = np.array([s["occluded"] for s in samples])
    assert occluded[:, 0].all()  # link6 is never seen: flagged in every sample, its pose null (NaN)
    assert all(all(v is None for v in s["position_m"][0]) for s in samples)
    seen = [s for s in samples if not s["occluded"][1]]
    assert len(seen) > 20 and occluded[:, 1].any()  # link5 seen, except while the server restarts
    for s in seen:
        assert all(math.isfinite(v) for v in s["position_m"][1])
        # get_latency_total: LatencyInfo's delay + half the SDK's ping round trip (ms on a loaded machine)
        assert LATENCY_S <= s["reported_latency_s"] < LATENCY_S + 0.05
        assert s["capture_t_ns"] == s["received_t_ns"] - int(s["reported_latency_s"] * 1e9)

    events = [e.kind for e in log.events() if e.kind.startswith("mocap_")]
    assert events[0] == "mocap_connected"
    assert "mocap_connection_lost" in events and "mocap_reconnected" in events
    lost = [e for e in log.events("mocap_connection_lost")]
    assert all(e.fields["host"] == f"{HOST}:{port}" for e in lost)
