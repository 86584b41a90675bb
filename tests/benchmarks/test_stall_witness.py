"""benchmarks/stall_witness.py: a stall it is shown reaches its output with the CPU and the length."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stall_witness.py"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only (CPU affinity, /proc/stat)")
def test_a_stopped_witness_reports_the_gap_on_every_cpu(tmp_path):
    out = tmp_path / "w.jsonl"
    witness = subprocess.Popen([sys.executable, str(SCRIPT), "--out", str(out), "--min-gap-ms", "100"])
    try:
        cpus = sorted(os.sched_getaffinity(0))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < len(cpus)):
            time.sleep(0.05)
        children = [json.loads(line)["pid"] for line in out.read_text().splitlines()]
        assert len(children) == len(cpus)
        for pid in children:  # a stall the witness cannot have caused: its processes stopped for 0.3 s
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)
        for pid in children:
            os.kill(pid, signal.SIGCONT)
        while time.monotonic() < deadline and _cpus_with_a_gap_of(out, 0.29) != cpus:
            time.sleep(0.05)
    finally:
        witness.send_signal(signal.SIGTERM)
        assert witness.wait(timeout=30) == 0
    # every CPU's witness reports at least the 0.3 s it was stopped (a machine's own stall may add more lines)
    assert _cpus_with_a_gap_of(out, 0.29) == cpus


def _cpus_with_a_gap_of(path: Path, at_least_s: float) -> list[int]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted({g["cpu"] for g in lines if g.get("gap_ms", 0) >= 1e3 * at_least_s and g["steal_ms"] >= 0})
