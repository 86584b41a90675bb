"""Safety probes from outside: separate processes, slcan on a pseudo-terminal, as a lab would find them.

    python benchmarks/safety_probe.py [--probe estop|stray|stall|all] [--random-frames 1000] [--firmware]

Every probe starts ``python -m firmware_protocol.emulator`` (ten emulated modules serving slcan on a pty) and a real
``aiko run experiments/sidewinding.toml --backend can --interface slcan --channel PTY`` in its own process, then:

- ``estop``: runs ``aiko can estop`` (a third process) while the run streams. Reports the CLI's own confirmation
  (from its handler start to every module reporting ESTOP), the end-to-end time (spawn of the process to its
  exit), the run's exit status, its ``run_stopped`` event and the references it logged after the stop.
- ``stray``: while the run streams, writes 20 stray ParameterRequest frames (WatchdogPeriods = 100 and
  ReferencePeriodMs = 1000 to all ten modules) and N random frames (half on the DBC's ids, mostly with the right
  length, random payloads; half on any 11-bit id; never the Command id, see below) to the same pty, then SIGKILLs
  the run (the PC goes silent). Reports the parameter writes the modules accepted besides the run's own, and per
  module the time from its last valid reference to its watchdog trip. (Random Command frames are left out: a
  random Disable makes the run stop by itself, which tests/aiko/robots/aiko/test_run_stops.py checks.)
- ``stall``: SIGSTOPs the run for 1.5 s, SIGCONTs it (with a 2 s module watchdog so that the stall does not trip
  it) and reports the smallest interval between two logged references and the ``deadline_missed`` events.

``--firmware``: the modules are the firmware itself on simulated ATmega128 boards (``--firmware`` of the
emulator, `make firmware`), the same probes from outside.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
EXPERIMENT = REPO / "experiments" / "sidewinding.toml"


EMULATOR = [sys.executable, "-m", "firmware_protocol.emulator"]


def start_emulator() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        EMULATOR,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )
    first = proc.stdout.readline().strip()
    if not first.startswith("slcan: "):
        proc.kill()
        raise SystemExit(f"emulator did not start: {first!r}")
    return proc, first.split(": ", 1)[1]


def stop_emulator(proc: subprocess.Popen) -> dict:
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def start_run(pty: str, log: Path, duration_s: float, *overrides: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "aiko.cli", "run", str(EXPERIMENT), "--backend", "can", "--interface", "slcan"]
    cmd += ["--channel", pty, "--duration", str(duration_s), "--out", str(log), "--no-report", "--json"]
    for item in overrides:
        cmd += ["--set", item]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)


def wait_streaming(log: Path, run: subprocess.Popen, references: int = 10, timeout_s: float = 30.0) -> None:
    """Until the run's log holds `references` references (read while it is written: a truncated log is fine)."""
    import logging

    from aiko.log import LogReader
    from aiko.log.reader import LogReadError

    logging.getLogger("aiko.log.reader").setLevel(logging.ERROR)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if run.poll() is not None:
            raise SystemExit(f"the run ended early: {run.communicate()[1][-500:]}")
        try:
            if log.exists() and len(LogReader(log).messages("/references")) >= references:
                return
        except LogReadError:
            pass
        time.sleep(0.2)
    raise SystemExit("the run did not start streaming")


def read_log(log: Path):
    from aiko.log import LogReader

    return LogReader(log)


def slcan_line(frame_id: int, data: bytes) -> bytes:
    return f"t{frame_id:03X}{len(data)}{data.hex().upper()}\r".encode()


def probe_estop(tmp: Path) -> dict:
    emulator, pty = start_emulator()
    log = tmp / "estop.mcap"
    run = start_run(pty, log, 30.0)
    try:
        wait_streaming(log, run)
        t0_ns = time.monotonic_ns()
        cli = subprocess.run(
            [sys.executable, "-m", "aiko.cli", "can", "estop", "--interface", "slcan", "--channel", pty, "--json"],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=REPO,
        )
        t1_ns = time.monotonic_ns()
        _, run_err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
        counters = stop_emulator(emulator)
    report = json.loads(cli.stdout) if cli.stdout.strip() else {}
    reader = read_log(log)
    stopped = reader.events("run_stopped")
    refs_after = [t for t, _ in reader.messages("/references") if t > t1_ns]
    refs_after_start = [t for t, _ in reader.messages("/references") if t > t0_ns]
    handler_to_all_estop_s = (
        report["sent_after_s"] + report["all_confirmed_s"] if report.get("all_confirmed_s") is not None else None
    )
    return {
        "estop_exit_status": cli.returncode,
        "estop_stderr": cli.stderr.strip()[-300:],
        "estop_confirmed_modules": sorted(int(n) for n in report.get("confirmed_s", {})),
        "estop_frames_sent": report.get("frames_sent"),
        "cli_handler_start_to_send_s": report.get("sent_after_s"),
        "send_to_all_modules_estop_s": report.get("all_confirmed_s"),
        "cli_handler_start_to_all_estop_s": handler_to_all_estop_s,
        "spawn_to_all_modules_estop_s": (
            report["sent_monotonic_s"] + report["all_confirmed_s"] - t0_ns / 1e9
            if report.get("all_confirmed_s") is not None
            else None
        ),
        "end_to_end_spawn_to_exit_s": (t1_ns - t0_ns) / 1e9,
        "run_exit_status": run.returncode,
        "run_stderr_last_line": (run_err.strip().splitlines() or [""])[-1][:300],
        "run_stopped_events": [{"t_after_estop_spawn_s": (e.t_ns - t0_ns) / 1e9, **e.fields} for e in stopped],
        "references_logged_after_estop_spawn": len(refs_after_start),
        "references_logged_after_estop_exit": len(refs_after),
        "emulator_states": counters["state"],
    }


def codec_length(codec, frame_id: int) -> int:
    classified = codec.scheme.classify(frame_id)
    return codec.layout(*classified).length if classified else 8


def probe_stray(tmp: Path, n_random: int, seed: int) -> dict:
    import serial

    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import MessageKind, Parameter

    codec = default_codec()
    emulator, pty = start_emulator()
    log = tmp / "stray.mcap"
    run = start_run(pty, log, 60.0)
    rng = random.Random(seed)
    stray = []
    for node in range(1, 11):
        for parameter, value in ((Parameter.WATCHDOG_PERIODS, 100.0), (Parameter.REFERENCE_PERIOD_MS, 1000.0)):
            frame_id, data = codec.encode(
                MessageKind.PARAMETER_REQUEST, node, {"Index": int(parameter), "Write": 1, "Value": value}
            )
            stray.append(slcan_line(frame_id, data))
    # every id the DBC defines except the Command broadcast: a random Disable makes the run stop by itself (tested
    # in tests/aiko/robots/aiko/test_run_stops.py), and this probe measures the modules' watchdog after the PC goes
    # silent
    command_id = codec.frame_id(MessageKind.COMMAND)
    protocol_ids = [i for i in sorted(codec.scheme._by_frame_id) if i != command_id]
    randoms = []
    for _ in range(n_random):  # half on the protocol's own ids (random payloads), half on any 11-bit id
        frame_id = rng.choice(protocol_ids) if rng.random() < 0.5 else rng.randrange(0x800)
        while frame_id == command_id:
            frame_id = rng.randrange(0x800)
        dlc = rng.randint(0, 8) if rng.random() < 0.3 else codec_length(codec, frame_id)
        randoms.append(slcan_line(frame_id, bytes(rng.randrange(256) for _ in range(dlc))))
    try:
        wait_streaming(log, run)
        port = serial.serial_for_url(pty, baudrate=115200, timeout=0)  # writes only: the run keeps reading
        try:
            for line in stray:
                port.write(line)
            time.sleep(0.2)
            for i in range(0, len(randoms), 20):  # 20 frames per 10 ms: about the bus load of the stream
                port.write(b"".join(randoms[i : i + 20]))
                time.sleep(0.01)
        finally:
            port.close()
        time.sleep(0.3)
        alive = run.poll() is None
        run.send_signal(signal.SIGKILL)  # the PC goes silent
        _, run_err = run.communicate(timeout=10)
        time.sleep(1.0)
    finally:
        if run.poll() is None:
            run.kill()
        counters = stop_emulator(emulator)
    own = 4  # the run writes reference period, watchdog and both limits to each module before enabling
    silence = [
        None if trip is None else round(trip - last, 4)
        for trip, last in zip(counters["watchdog_trip_s"], counters["last_valid_reference_s"], strict=True)
    ]
    return {
        "stray_parameter_frames": len(stray),
        "random_frames": n_random,
        "run_alive_when_silenced": alive,
        "run_stderr_last_line": (run_err.strip().splitlines() or [""])[-1][:300],
        "stray_parameter_writes_accepted": sum(a - own for a in counters["parameter_writes_accepted"]),
        "rejected": {k: sum(v) for k, v in counters["rejected"].items() if sum(v)},
        "unknown_id_frames": counters["unknown_id_frames"],
        "states_after_silence": counters["state"],
        "last_reference_to_watchdog_trip_s": silence,
        "max_last_reference_to_watchdog_trip_s": max((s for s in silence if s is not None), default=None),
    }


def probe_stall(tmp: Path) -> dict:
    import numpy as np

    emulator, pty = start_emulator()
    log = tmp / "stall.mcap"
    # a 2 s module watchdog: the 1.5 s stall must not trip it, so the stream resumes (and could burst)
    run = start_run(pty, log, 8.0, "can.watchdog_periods=20")
    try:
        wait_streaming(log, run)
        run.send_signal(signal.SIGSTOP)
        stopped_ns = time.monotonic_ns()
        time.sleep(1.5)
        run.send_signal(signal.SIGCONT)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
        counters = stop_emulator(emulator)
    reader = read_log(log)
    stamps = np.array([t for t, _ in reader.messages("/references")], dtype=np.int64)
    gaps_ms = np.diff(stamps) / 1e6
    after = stamps[stamps > stopped_ns]
    return {
        "run_exit_status": run.returncode,
        "references": int(stamps.size),
        "min_interval_between_references_ms": float(gaps_ms.min()),
        "intervals_around_the_stall_ms": [round(float(g), 2) for g in np.diff(after[:6]) / 1e6],
        "stall_gap_ms": float(gaps_ms.max()),
        "deadline_missed_events": [e.fields for e in reader.events("deadline_missed")],
        "watchdog_trips": sum(counters["watchdog_trips"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", choices=("estop", "stray", "stall", "all"), default="all")
    parser.add_argument("--random-frames", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--firmware", action="store_true", help="the firmware in the AVR simulator, not the Python one")
    args = parser.parse_args()
    if args.firmware:
        EMULATOR.append("--firmware")
    results: dict = {"load_average_1min": os.getloadavg()[0], "modules": "firmware" if args.firmware else "python"}
    with tempfile.TemporaryDirectory() as tmp:
        if args.probe in ("estop", "all"):
            results["estop"] = probe_estop(Path(tmp))
        if args.probe in ("stray", "all"):
            results["stray"] = probe_stray(Path(tmp), args.random_frames, args.seed)
        if args.probe in ("stall", "all"):
            results["stall"] = probe_stall(Path(tmp))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
