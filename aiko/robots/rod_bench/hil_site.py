"""HIL: the UR3 emulator in another process (``aiko emulate ur3``) on a loopback address, with the rod plant of the
same experiment. Another process, because ur_rtde's C++ calls hold the GIL (docs/ur3.md).

The experiment text (with any overrides) is written to the run's work directory and handed to the plant through
``AIKO_BENCH_EXPERIMENT``; the plant's rod samples come back through ``AIKO_BENCH_PLANT_LOG``. The controller ticks
at the rod's step rate (``1 / dt_s``), so every tick steps the rod once.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from aiko.core.errors import ConfigError, HardwareError
from aiko.core.parent_watch import exit_with_parent_env
from aiko.robots.rod_bench.context import BenchContext
from aiko.robots.rod_bench.ft_sensor import FT_ADDRESS_ENV, FT_PTY_ENV, hil_pty_path
from aiko.robots.rod_bench.plant import EXPERIMENT_ENV, PLANT_LOG_ENV

DEFAULT_HOST = "127.0.0.41"
PLANT = "aiko.robots.rod_bench.plant:rod_plant"
REPO = Path(__file__).resolve().parents[3]


class EmulatedController:
    def __init__(self, start_timeout_s: float = 120.0) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.start_timeout_s = start_timeout_s
        self.controller_rate_hz = 125.0
        self.plant_log: Path | None = None
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self, ctx: BenchContext) -> str:
        host = ctx.host or DEFAULT_HOST
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(f"--backend hil runs the emulator on a loopback address (127.0.0.N), got {host!r}")
        if ctx.workdir is None:
            raise ConfigError("the HIL backend needs a work directory for the plant's files")
        experiment_file = ctx.workdir / "experiment.toml"
        experiment_file.write_text(ctx.experiment.text)
        self.plant_log = ctx.workdir / "plant_rod.jsonl"
        self.controller_rate_hz = min(1000.0, max(10.0, 1.0 / ctx.experiment.scenario.dt_s))
        env = dict(os.environ, **{EXPERIMENT_ENV: str(experiment_file), PLANT_LOG_ENV: str(self.plant_log)})
        # the plant's factory starts the F/T emulator: the USB DAQ on a pty linked at this host's path, or RDT over
        # UDP on the same host (aiko.robots.rod_bench.ft_sensor.start_plant_sensor)
        ft = ctx.experiment.ft_sensor
        if ft is not None and ft.transport == "serial":
            env[FT_PTY_ENV] = str(hil_pty_path(host))
        elif ft is not None:
            env[FT_ADDRESS_ENV] = f"{host}:{ft.udp_port}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        env.update(exit_with_parent_env())  # a run that dies hard takes its emulator with it
        cmd = [sys.executable, "-m", "aiko.cli", "emulate", "ur3", "--host", host]
        cmd += ["--rate-hz", f"{self.controller_rate_hz:g}", "--unlock-delay", "0", "--plant", PLANT]
        if ctx.emulator_rt_priority > 0:  # granted or refused there: its summary's rt_priority says which
            cmd += ["--rt-priority", str(ctx.emulator_rt_priority)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        first = ""
        while self.proc.stdout is not None:  # lines before the greeting (e.g. NUMBA_DEBUG_CACHE's) are kept
            line = self.proc.stdout.readline()
            if not line or line.startswith("ur3: "):
                first = line.strip()
                break
            self.lines.append(line.strip())
        if not first.startswith("ur3: "):
            proc = self.proc
            self.stop()  # before reading its stderr: a running emulator never closes it (the read hung)
            err = proc.stderr.read().strip().splitlines() if proc.stderr else []
            raise HardwareError(f"the UR3 emulator did not start on {host}: {(err or [first])[-1]}")
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return host

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)  # a stopped (stalled) emulator could not act on the SIGTERM for 20 s
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)

    def _plant_rows(self) -> list[dict[str, Any]]:
        """The plant log's rows: rod channels at a controller time, or an event (the plant never prints)."""
        if self.plant_log is None or not self.plant_log.exists():
            return []
        rows = []
        for line in self.plant_log.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the emulator's stop
        return rows

    def side_records(self) -> list[tuple[str, float, dict[str, Any]]]:
        """The plant's rod channels: (channel, controller time, payload)."""
        return [
            (channel, float(row["controller_time_s"]), payload)
            for row in self._plant_rows()
            for channel, payload in row.get("channels", {}).items()
        ]

    def plant_timing(self) -> dict[str, Any]:
        """The plant hook's time per controller tick (median, p99, max; `plant.PlantTiming`), as last written."""
        if self.plant_log is None or not self.plant_log.exists():
            return {}
        timing: dict[str, Any] = {}
        for line in self.plant_log.read_text().splitlines():
            if line.startswith('{"plant_timing"'):
                try:
                    timing = json.loads(line)["plant_timing"]
                except json.JSONDecodeError:
                    continue
        return timing

    def summary(self) -> dict[str, Any]:
        counters: dict[str, Any] = {}
        for line in reversed(self.lines):
            if line.startswith("{") and '"event"' not in line:
                try:
                    counters = json.loads(line)
                except json.JSONDecodeError:
                    pass
                break
        events = [json.loads(x)["event"] for x in self.lines if x.startswith('{"event"')]
        events += [row["event"] for row in self._plant_rows() if "event" in row]
        return {
            "controller_rate_hz": self.controller_rate_hz,
            "emulator": counters,
            "emulator_events": events[-10:],
            "plant_tick_time": self.plant_timing(),
        }
