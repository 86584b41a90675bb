"""``aiko can scan`` against the emulated modules in another process over slcan on a pty: what answers, what is
missing, what is doubled (two modules on one node id)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiko.devices.can.scan import ModuleReport, duplicate_reasons
from tests.emulator_process import start_emulator, stop_emulator

REPO = Path(__file__).resolve().parents[4]


def scan(pty: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "aiko.cli", "can", "scan", "--interface", "slcan", "--channel", pty, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_a_missing_and_a_duplicated_module_are_named():
    proc, pty = start_emulator("--nodes", "1-4,6-10", "--duplicate", "7", "--duplicate-delay", "2.3")
    try:
        done = scan(pty, "--json", "--listen", "3.5")
        table = scan(pty)
    finally:
        counters = stop_emulator(proc)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["missing"] == [5] and result["duplicated"] == [7] and result["unexpected"] == []
    assert result["found"] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    modules = {m["node"]: m for m in result["modules"]}
    assert any("replies to one parameter read" in r for r in modules[7]["duplicate_reasons"])
    for node, module in modules.items():
        assert module["state"] == "Disabled" and module["firmware_version"] == 1, module
        assert module["parameters"]["WATCHDOG_PERIODS"] == 3 and module["parameters"]["KP_H"] == 400, module
        assert module["rejected_frames"] == 0 and module["uptime_s"] >= 1
        assert module["duplicate"] == (node == 7)
    assert table.returncode == 1
    assert "MISSING [5]; DUPLICATED [7]" in table.stdout and "DUPLICATE:" in table.stdout
    assert counters["rejected_total"] == 0  # reads only: nothing the modules refused


def test_exactly_the_expected_modules_exit_0():
    proc, pty = start_emulator("--nodes", "1-3")
    try:
        done = scan(pty, "--nodes", "1-3", "--json")
    finally:
        stop_emulator(proc)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["found"] == [1, 2, 3]


def test_bad_arguments_are_one_line():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for extra in (["--interface", "virtual", "--channel", "x"], ["--interface", "slcan", "--channel", "/nonexistent"]):
        done = subprocess.run(
            [sys.executable, "-m", "aiko.cli", "can", "scan", *extra], capture_output=True, text=True, env=env
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "beats, reason",
    [
        ([(0.0, 1, 1, 10), (1.0, 1, 1, 11), (2.0, 1, 1, 12)], None),
        ([(0.0, 1, 1, 10), (0.4, 1, 1, 7), (1.0, 1, 1, 11)], "went back"),
        ([(0.0, 1, 1, 10), (0.3, 1, 1, 14)], "jumped"),
        ([(0.0, 1, 1, 10), (0.05, 2, 1, 10)], "disagree"),
        ([(0.0, 1, 1, 65535), (1.0, 1, 1, 0)], None),  # the 16-bit uptime wraps: one module, not two
        # a loaded PC read one module's beats late, together: one clock (uptime +1 each), not two modules
        ([(0.0, 1, 1, 10), (0.004, 1, 1, 11), (0.009, 1, 1, 12), (1.0, 1, 1, 13)], None),
    ],
)
def test_heartbeats_that_do_not_follow_one_clock(beats, reason):
    module = ModuleReport(3, heartbeats=beats)
    reasons = duplicate_reasons(module, {}, {3: module})
    assert (reasons == []) if reason is None else any(reason in r for r in reasons), reasons
