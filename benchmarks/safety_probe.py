"""Safety probes from outside: separate processes, slcan on a pseudo-terminal, as a lab would find them.

    python benchmarks/safety_probe.py --probe PROBE [--repeat N] [--duration S] [--beside busy,suite]
                                      [--jsonl TRIALS.jsonl] [--random-frames 1000] [--firmware]
                                      [--keep-failed DIR [--keep-gaps-over-ms MS]] [--tty-workers-fifo P]

Every trial starts ``aiko emulate can`` (ten emulated modules serving slcan on a pty; ``--rt-priority`` 30 by
default: the modules are separate hardware, which the PC's load never slows) and a real
``aiko run experiments/sidewinding.toml --backend can --interface slcan --channel PTY`` in its own process, then:

- ``load``: nothing else; the run must end by itself after ``--duration`` (exit 0).
- ``freeze``: a child process of the probe freezes the run again and again (SIGSTOP for 30-70 ms, SIGCONT for
  30-70 ms, uniformly random: about half of every reference period frozen, a PC that keeps waking up late) from
  its spawn to its exit; the run must still end by itself (exit 0): the modules' watchdog (0.3 s) must not see a
  gap a busy PC did not really make.
- ``stall``: one 1.5 s SIGSTOP at ``--stall-at`` s of streaming, with a 2 s module watchdog (20 periods) so that the
  stall does not trip it: after it, the newest reference once, then the grid; the smallest spacing shows a burst.
- ``estop``: ``aiko can estop --json`` (a third process on the same pty) once the run streams: the run must stop
  with reason ESTOP (``run_stopped`` event ``estop_or_fault``), no traceback in any process; the e-stop's times.
- ``stray``: stray ParameterRequest and random frames onto the pty while the run streams, then SIGKILL of the run
  (the PC goes silent): stray writes accepted (must be 0) and each module's time from its last valid reference to
  its watchdog trip.

Per trial: the run's exit status and ``run_stopped`` reasons, whether any process printed a traceback, the
modules' own view of the stream (longest gap between accepted references, shortest spacing, watchdog trips; from
the emulator's counters), the PC's view (the run summary's ``task_timing``), the freezes actually applied, and the
load, and the machine's own stalls: ``benchmarks/stall_witness.py`` runs for the whole probe (a SCHED_FIFO 99
thread pinned to each CPU; a gap in its wake-ups is time the machine gave to nobody, e.g. a VM's vCPU descheduled
by its host), and a stopped run says which of those gaps fell in the second before its modules' trip
(``machine_stalls_before_trip_ms``: CPU, start relative to the trip, length, steal counted). ``--beside busy``
runs two busy loops (``yes > /dev/null``) and ``--beside suite`` a test-suite loop (``pytest tests/sim
tests/aiko/core``) for the whole probe, killed by PID at the end. ``--tty-workers-fifo P`` (root) puts the kernel's
unbound workers, which move a pty's bytes, at SCHED_FIFO P for the probe (`TtyWorkers`: a change to the machine that
tells whether the pty's silences are that worker waiting for a CPU). Each trial is appended to
``--jsonl`` as it ends (a long probe can be watched, and a killed one keeps what it measured); one JSON object with
the trials and their summary is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
EXPERIMENT = REPO / "experiments" / "sidewinding.toml"
AIKO = [sys.executable, "-m", "aiko.cli"]


# ------------------------------------------------------------------------------------------------ processes
EMULATOR_EXTRA: list[str] = []  # --firmware: the firmware on simulated ATmega128 boards instead of the Python model


def start_emulator(rt_priority: int) -> tuple[subprocess.Popen, str]:
    cmd = [*AIKO, "emulate", "can", "--rt-priority", str(rt_priority), *EMULATOR_EXTRA]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    first = proc.stdout.readline().strip()
    if not first.startswith("slcan: "):
        proc.kill()
        raise SystemExit(f"emulator did not start: {first!r} {proc.communicate()[1][-300:]}")
    return proc, first.split(": ", 1)[1]


def stop_emulator(proc: subprocess.Popen) -> tuple[dict, str]:
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1]), err


class RunProcess(subprocess.Popen):
    """``aiko run`` with its stdout and stderr in files, not pipes: a pipe this (loaded) process reads late fills up,
    and the run's next write to stderr would then block its control loop: the probe would measure itself."""

    def __init__(self, cmd: list[str], log: Path) -> None:
        self._out_path, self._err_path = log.with_suffix(".out"), log.with_suffix(".err")
        with open(self._out_path, "w") as out, open(self._err_path, "w") as err:
            super().__init__(cmd, stdout=out, stderr=err, text=True, env=ENV, cwd=REPO)

    def communicate(self, input=None, timeout=None):  # noqa: A002 - Popen's own signature
        self.wait(timeout=timeout)
        return self._out_path.read_text(), self._err_path.read_text()


def start_run(pty: str, log: Path, duration_s: float, *overrides: str) -> RunProcess:
    cmd = [*AIKO, "run", str(EXPERIMENT), "--backend", "can", "--interface", "slcan", "--channel", pty]
    cmd += ["--duration", str(duration_s), "--out", str(log), "--no-report", "--json"]
    for item in overrides:
        cmd += ["--set", item]
    return RunProcess(cmd, log)


def references_on_disk(log: Path) -> int:
    import logging

    from aiko.log import LogReader
    from aiko.log.reader import LogReadError

    logging.getLogger("aiko.log.reader").setLevel(logging.ERROR)
    try:
        return len(LogReader(log).messages("/references")) if log.exists() else 0
    except (LogReadError, OSError):
        return 0


def wait_streaming(log: Path, run: subprocess.Popen, references: int = 10, timeout_s: float = 120.0) -> None:
    """Until the run's log holds `references` references (read while it is written: a truncated log is fine)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if run.poll() is not None:
            return  # ended early: the trial reports how
        if references_on_disk(log) >= references:
            return
        time.sleep(0.25)


def has_traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in (text or "")


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def pty_round_trip(seconds: float = 2.0) -> dict:
    """The transport's own health now: a line echoed through a fresh pty by two SCHED_FIFO 30 threads of this
    process, every 10 ms. Bytes cross a pty (as a USB serial adapter's cross its tty) in the kernel's flip-buffer
    worker, a normal-priority kernel thread: on a PC busy with normal-priority work its delays reach the real-time
    threads on both ends (they wait for it in uninterruptible sleep). The run cannot be faster than this."""
    import select
    import tty

    master, slave = os.openpty()
    tty.setraw(slave)
    halt = threading.Event()

    def echo() -> None:
        set_fifo_self(30)
        while not halt.is_set():
            if select.select([master], [], [], 0.05)[0]:
                os.write(master, os.read(master, 4096))

    echoer = threading.Thread(target=echo, daemon=True)
    echoer.start()
    result: list[float] = []

    def ping() -> None:
        set_fifo_self(30)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            os.write(slave, b"t10180011223344556677\r")
            got = b""
            while not got.endswith(b"\r"):
                got += os.read(slave, 4096)
            result.append(time.monotonic() - t0)
            time.sleep(0.01)

    pinger = threading.Thread(target=ping)
    pinger.start()
    pinger.join()
    halt.set()
    echoer.join()
    os.close(master)
    os.close(slave)
    result.sort()
    return {
        "pty_round_trip_p99_ms": round(1e3 * result[int(0.99 * (len(result) - 1))], 2),
        "pty_round_trip_max_ms": round(1e3 * result[-1], 1),
    }


def set_fifo_self(priority: int) -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError):
        return False
    return True


# The freezer runs in a process of its own: as a thread of the probe it shared the probe's interpreter lock, and
# a freeze then lasted until the probe's main thread let go of it (200 ms once where 70 were asked, 2026-11-29). The
# child is one loop with no other thread: it waits with select() on its stdin (the parent closing it is the halt) and
# prints each freeze as "start_monotonic_s length_s" after the SIGCONT.
_FREEZER_CHILD = """
import os, random, select, signal, sys, time
pid, f_lo, f_hi, t_lo, t_hi, seed = int(sys.argv[1]), *map(float, sys.argv[2:6]), int(sys.argv[6])
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
    print("fifo", flush=True)
except (AttributeError, OSError):
    pass
rng = random.Random(seed)
def halted(wait_s):
    return bool(select.select([sys.stdin], [], [], wait_s)[0])
try:
    while not halted(rng.uniform(t_lo, t_hi) / 1e3):
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        stop = halted(rng.uniform(f_lo, f_hi) / 1e3)
        os.kill(pid, signal.SIGCONT)
        print(t0, time.monotonic() - t0, flush=True)
        if stop:
            break
except ProcessLookupError:
    pass
finally:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
"""


class Freezer:
    """SIGSTOP / SIGCONT a process again and again: frozen for a uniform [lo, hi] ms, then running for [lo, hi] ms.

    The freezing runs in a child process at SCHED_FIFO 40 (above the run's 20/21), so the freezes are as long as
    asked on a loaded machine and nothing of the probe's own can hold them longer; the lengths actually applied are
    measured by the child and reported. ``halt.set()`` then ``join()`` end it (the interface of the thread it was)."""

    def __init__(self, pid: int, freeze_ms: tuple[float, float], thaw_ms: tuple[float, float], seed: int) -> None:
        self.pid, self.freeze_ms, self.thaw_ms, self.seed = pid, freeze_ms, thaw_ms, seed
        self.halt = threading.Event()
        self.frozen_s: list[float] = []
        self.freezes: list[tuple[float, float]] = []  # (monotonic start, length)
        self.started_s = self.ended_s = 0.0
        self.fifo = False
        self._child: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        args = [str(self.pid), *(str(v) for v in (*self.freeze_ms, *self.thaw_ms)), str(self.seed)]
        self.started_s = time.monotonic()
        self._child = subprocess.Popen(
            [sys.executable, "-c", _FREEZER_CHILD, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="freezer-reader")
        self._reader.start()

    def _read(self) -> None:
        assert self._child is not None and self._child.stdout is not None
        for line in self._child.stdout:
            if line.strip() == "fifo":
                self.fifo = True
                continue
            t0, length = (float(x) for x in line.split())
            self.frozen_s.append(length)
            self.freezes.append((t0, length))

    def join(self) -> None:
        child = self._child
        if child is None:
            return
        if self.halt.is_set() and child.stdin is not None and not child.stdin.closed:
            child.stdin.close()  # the child's select() sees the end of its stdin: it thaws the run and exits
        child.wait()
        if self._reader is not None:
            self._reader.join()
        self.ended_s = time.monotonic()

    def stats(self) -> dict:
        span = max(self.ended_s - self.started_s, 1e-9)
        return {
            "freezes": len(self.frozen_s),
            "freezer_fifo": self.fifo,
            "max_freeze_ms": round(1e3 * max(self.frozen_s), 2) if self.frozen_s else None,
            "mean_freeze_ms": round(1e3 * statistics.fmean(self.frozen_s), 2) if self.frozen_s else None,
            "frozen_fraction": round(sum(self.frozen_s) / span, 3),
        }


class TtyWorkers:
    """``--tty-workers-fifo P``: the kernel's unbound workers (``kworker/u*``) at SCHED_FIFO P for the whole probe
    (root only), so that the pty's flip-buffer work is never left waiting behind normal-priority tasks.

    Why: the bytes written to a pty reach the other side only when an unbound kworker has run ``flush_to_ldisc``,
    and that worker is a normal-priority (SCHED_OTHER) kernel thread. ftrace here (2026-11-29, `sched_switch`,
    `sched_wakeup` and the workqueue events of ``flush_to_ldisc``, trace clock ``mono``) showed a freeze trial stopped
    by the modules' watchdog while the PC sent on time: the worker woken for the pty at 2503.595 s ran at 2503.903 s,
    while seven normal-priority tasks took turns on its CPU; the PC's next reference (queued at 2503.691 s) waited
    for the same worker. This option tells whether that is the whole cause: it is a change to the machine (every
    unbound work of the kernel then runs above every normal task), not something the stack does. New workers start
    at normal priority (the kernel resets a kthread's policy): a thread looks every 20 ms and raises the new ones.
    At the end the workers it raised are set back to SCHED_OTHER, each only if it is still an unbound worker at
    this priority (a pid the kernel gave to something else is left alone); a probe killed by a signal it cannot
    catch leaves them raised until they exit (the kernel retires idle workers) or the machine restarts."""

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.raised: set[int] = set()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tty-workers")
        self._thread.start()

    @staticmethod
    def _unbound_workers() -> list[int]:
        try:
            children = Path("/proc/2/task/2/children").read_text().split()  # kthreadd's children: the kthreads
        except OSError:
            return []
        pids = []
        for pid in children:
            try:
                if Path(f"/proc/{pid}/comm").read_text().startswith("kworker/u"):
                    pids.append(int(pid))
            except OSError:
                continue
        return pids

    def _loop(self) -> None:
        while not self._halt.wait(0.02):
            self.raise_new()

    def raise_new(self) -> list[int]:
        """One look: every unbound worker still at SCHED_OTHER to SCHED_FIFO ``priority``; the workers it saw."""
        seen = self._unbound_workers()
        for pid in seen:
            try:
                if os.sched_getscheduler(pid) == os.SCHED_OTHER:
                    os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(self.priority))
                    self.raised.add(pid)
            except OSError:
                continue
        return seen

    def stop(self) -> None:
        self._halt.set()
        self._thread.join()
        still_ours = set(self._unbound_workers()) & self.raised
        for pid in still_ours:
            try:
                if (
                    os.sched_getscheduler(pid) == os.SCHED_FIFO
                    and os.sched_getparam(pid).sched_priority == self.priority
                ):
                    os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
            except OSError:
                continue


class Beside:
    """Load beside the probe: two busy loops and/or a test-suite loop; every process killed by PID at the end."""

    def __init__(self, what: set[str]) -> None:
        self.procs: list[subprocess.Popen] = []
        if "busy" in what:
            for _ in range(2):
                self.procs.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL))
        if "suite" in what:
            loop = (
                "while true; do "
                f"{sys.executable} -m pytest -q -p no:cacheprovider tests/sim tests/aiko/core >/dev/null 2>&1; done"
            )
            env = dict(ENV, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
            self.procs.append(subprocess.Popen(["bash", "-c", loop], cwd=REPO, env=env, start_new_session=True))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.args[0] == "bash":  # the suite loop: its whole session (bash and the pytest it runs)
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            else:
                proc.kill()
            proc.wait(timeout=30)


class Witness:
    """``benchmarks/stall_witness.py`` for the whole probe: a SCHED_FIFO 99 thread pinned to each CPU whose wake-up
    gaps are time the machine gave to nobody in the guest (a VM's vCPU descheduled by its host, counted as steal).
    A run that stopped during such a gap stopped because the whole machine stalled, not because of the run."""

    def __init__(self, path: Path, min_gap_ms: float = 50.0) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "benchmarks" / "stall_witness.py"),
                "--min-gap-ms",
                str(min_gap_ms),
                "--out",
                str(path),
            ],
            start_new_session=True,
        )

    def gaps(self, since_s: float, until_s: float) -> list[dict]:
        """The gaps that ended after ``since_s`` and began before ``until_s`` (monotonic s)."""
        try:
            lines = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        except (OSError, ValueError):
            return []
        return [
            g
            for g in lines
            if "gap_ms" in g
            and g["start_monotonic_s"] <= until_s
            and g["start_monotonic_s"] + g["gap_ms"] / 1e3 >= since_s
        ]

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


WITNESS: Witness | None = None


# --------------------------------------------------------------------------------------------- one trial
def summary_from_stdout(out: str) -> dict:
    for line in reversed((out or "").strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return {}
    return {}


def stopped_reasons(log: Path) -> list[list[str]]:
    import logging

    from aiko.log import LogReader
    from aiko.log.reader import LogReadError

    logging.getLogger("aiko.log.reader").setLevel(logging.ERROR)
    try:
        return [e.fields.get("reasons", []) for e in LogReader(log).events("run_stopped")]
    except (LogReadError, OSError):
        return [["<log unreadable>"]]


def module_view(counters: dict) -> dict:
    gaps = counters.get("max_reference_gap_s", [])
    spacings = [s for s in counters.get("min_reference_spacing_s", []) if s is not None]
    return {
        "module_max_reference_gap_ms": round(1e3 * max(gaps), 1) if gaps else None,
        "module_min_reference_spacing_ms": round(1e3 * min(spacings), 1) if spacings else None,
        "module_watchdog_trips": sum(counters.get("watchdog_trips", [])),
        "module_accepted_references": [min(counters["accepted_references"]), max(counters["accepted_references"])],
        "module_states": sorted(set(counters.get("state", []))),
        # where a gap was made: the emulator's lag behind the wall clock, and silences on the PC's side of the pty
        "emulator_largest_lag_ms": round(1e3 * counters["largest_lag_s"], 1) if "largest_lag_s" in counters else None,
        "emulator_resyncs": counters.get("resyncs"),
        "pty_read_gaps_over_200_ms": [round(1e3 * g, 1) for g, _ in counters.get("slcan_long_read_gaps_s", [])],
    }


def trip_diagnosis(counters: dict, freezes: list[tuple[float, float]]) -> dict:
    """For a run the modules' watchdog stopped: the pty read silences and the freezes in the second before the
    first trip, on the monotonic clock both processes share (module time + the emulator's origin)."""
    origin = counters.get("origin_monotonic_s")
    trips = [t for t in counters.get("watchdog_trip_s", []) if t is not None]
    if origin is None or not trips:
        return {}
    trip = origin + min(trips)
    return {
        "trip_monotonic_s": round(trip, 3),
        "pty_read_gaps_before_trip_ms": [
            [round(1e3 * g, 1), round(1e3 * (end - trip), 1)]
            for g, end in counters.get("slcan_long_read_gaps_s", [])
            if trip - 1.0 <= end <= trip + 0.5
        ],
        "freezes_before_trip_ms": [
            [round(1e3 * (start - trip), 1), round(1e3 * length, 1)]
            for start, length in freezes
            if trip - 1.0 <= start <= trip
        ],
    }


def pc_view(summary: dict) -> dict:
    refs = summary.get("task_timing", {}).get("references", {})
    return {
        "pc_reference_runs": refs.get("runs"),
        "pc_references_missed": refs.get("missed"),
        "pc_max_reference_gap_ms": round(1e3 * refs["max_gap_s"], 1) if refs.get("max_gap_s") is not None else None,
        "pc_min_reference_spacing_ms": (
            round(1e3 * refs["min_spacing_s"], 1) if refs.get("min_spacing_s") is not None else None
        ),
        "pc_receive_errors": summary.get("can_receive_errors"),
    }


def trial_run(kind: str, index: int, tmp: Path, args: argparse.Namespace) -> dict:
    """One run of kind load / freeze / stall; see the module docstring."""
    transport = pty_round_trip()
    emulator, pty = start_emulator(args.emulator_rt_priority)
    log = tmp / f"{kind}-{index}.mcap"
    watchdog_periods = 20 if kind == "stall" else 3  # the stall outlasts the default 3 periods on purpose
    overrides = (f"can.watchdog_periods={watchdog_periods}",) if kind == "stall" else ()
    load_start = load_average()
    t0 = time.monotonic()
    run = start_run(pty, log, args.duration, *overrides)
    freezer = None
    stall: dict = {}
    try:
        if kind == "freeze":
            freezer = Freezer(run.pid, args.freeze_ms, args.thaw_ms, seed=args.seed + index)
            freezer.start()
        elif kind == "stall":
            wait_streaming(log, run, references=int(args.stall_at * 10))
            if run.poll() is None:
                run.send_signal(signal.SIGSTOP)
                s0 = time.monotonic()
                time.sleep(1.5)
                run.send_signal(signal.SIGCONT)
                stall = {"stall_ms": round(1e3 * (time.monotonic() - s0), 1)}
        out, err = run.communicate(timeout=args.duration + 600)
    finally:
        if freezer is not None:
            freezer.halt.set()
            freezer.join()
        if run.poll() is None:
            run.kill()
            out, err = run.communicate()
        counters, emulator_err = stop_emulator(emulator)
    summary = summary_from_stdout(out)
    t_end = time.monotonic()
    result = {
        "kind": kind,
        "trial": index,
        "run_exit": run.returncode,
        "run_wall_s": round(time.monotonic() - t0, 2),
        "stopped_reasons": stopped_reasons(log),
        "traceback": has_traceback(err) or has_traceback(emulator_err),
        "deadlines_missed": summary.get("deadlines_missed"),
        **module_view(counters),
        **pc_view(summary),
        **stall,
        **(freezer.stats() if freezer is not None else {}),
        "load_1min": [load_start, load_average()],
        "tty_workers_fifo": args.tty_workers_fifo,
        **transport,
        **witness_view(t0, t_end),
    }
    near_miss = (
        args.keep_gaps_over_ms is not None
        and run.returncode == 0
        and (result.get("pc_max_reference_gap_ms") or 0.0) > args.keep_gaps_over_ms
    )
    if near_miss:  # ended by itself, but the PC was silent long: its log says why (deadline_missed), kept
        result.update(pc_view_from_log(log))
        result.update(keep_log(log, args.keep_failed, f"near-{kind}-{index}"))
    if run.returncode != 0:
        result["run_stderr_tail"] = err.strip().splitlines()[-3:]
        result["emulator_stderr_tail"] = emulator_err.strip().splitlines()[-6:]
        result.update(pc_view_from_log(log))
        result.update(trip_diagnosis(counters, freezer.freezes if freezer is not None else []))
        if "trip_monotonic_s" in result and WITNESS is not None:
            trip = result["trip_monotonic_s"]
            result["machine_stalls_before_trip_ms"] = [
                [g["cpu"], round(1e3 * (g["start_monotonic_s"] - trip), 1), g["gap_ms"], g["steal_ms"]]
                for g in WITNESS.gaps(trip - 1.0, trip)
            ]
        result.update(keep_log(log, args.keep_failed, f"{kind}-{index}"))
        result["silence_made_by"] = silence_made_by(
            result, watchdog_ms=watchdog_periods * 100.0, freeze_ms=args.freeze_ms
        )
    log.unlink(missing_ok=True)
    return result


def silence_made_by(result: dict, watchdog_ms: float, freeze_ms: tuple[float, float]) -> str:
    """Which side made the silence that tripped the modules' watchdog (10 Hz references, ``watchdog_ms``):

    * ``probe``: the probe's own freezer held the run stopped longer than it was asked to (its thread late);
    * ``pc``: the run's own log has a reference gap as long as the watchdog: the PC did not send;
    * ``transport``: the PC sent on time and the emulator's reader saw the silence: the pty delivered late (its
      bytes cross the kernel in a normal-priority worker thread, docs/can_hil.md);
    * ``unknown``: none of these."""
    if (result.get("max_freeze_ms") or 0.0) > freeze_ms[1] + 20.0:
        return "probe"
    if (result.get("pc_logged_max_reference_gap_ms") or 0.0) >= watchdog_ms - 100.0:
        return "pc"
    if any(gap >= watchdog_ms - 100.0 for gap, _ in result.get("pty_read_gaps_before_trip_ms", [])):
        return "transport"
    return "unknown"


def keep_log(log: Path, keep_dir: Path | None, name: str) -> dict:
    """Move a trial's log into ``keep_dir`` (``--keep-failed``) as NAME-<unix time>.mcap; where it went, if kept."""
    if keep_dir is None or not log.exists():
        return {}
    keep_dir.mkdir(parents=True, exist_ok=True)
    kept = keep_dir / f"{name}-{int(time.time())}.mcap"
    log.replace(kept)
    return {"log_kept": str(kept)}


def witness_view(since_s: float, until_s: float) -> dict:
    """The machine's own stalls during a trial (see Witness): per CPU the longest, and every one over 100 ms."""
    if WITNESS is None:
        return {}
    gaps = WITNESS.gaps(since_s, until_s)
    return {
        "machine_max_stall_ms": {
            f"cpu{c}": max((g["gap_ms"] for g in gaps if g["cpu"] == c), default=0.0)
            for c in sorted(os.sched_getaffinity(0))
        },
        "machine_stalls_over_100_ms": [[g["cpu"], g["gap_ms"], g["steal_ms"]] for g in gaps if g["gap_ms"] > 100],
    }


def pc_view_from_log(log: Path) -> dict:
    """The loop's reference stream as logged, for a run that printed no summary (it stopped)."""
    import logging

    import numpy as np

    from aiko.log import LogReader
    from aiko.log.reader import LogReadError

    logging.getLogger("aiko.log.reader").setLevel(logging.ERROR)
    try:
        reader = LogReader(log)
        stamps = np.array([t for t, _ in reader.messages("/references")], dtype=np.int64)
    except (LogReadError, OSError):
        return {}
    if stamps.size < 2:
        return {}
    gaps_ms = np.diff(stamps) / 1e6
    # the loop's own account of each long silence (aiko.core.usage): asleep, busy, blocked, or runnable but
    # given no CPU (run-queue wait)
    long_misses = [  # t_ns on the run's clock: time.monotonic_ns, as the probe's own stamps (and ftrace's "mono")
        {"t_ns": e.t_ns, **e.fields} for e in reader.events("deadline_missed") if e.fields.get("gap_s", 0.0) > 0.2
    ]
    return {
        "pc_logged_max_reference_gap_ms": round(float(gaps_ms.max()), 1),
        "pc_logged_min_reference_spacing_ms": round(float(gaps_ms.min()), 1),
        "pc_logged_gaps_over_200_ms": [round(float(g), 1) for g in gaps_ms[gaps_ms > 200]],
        "pc_deadlines_missed_over_200_ms": long_misses,
    }


def trial_estop(index: int, tmp: Path, args: argparse.Namespace) -> dict:
    from aiko.log import LogReader

    emulator, pty = start_emulator(args.emulator_rt_priority)
    log = tmp / f"estop-{index}.mcap"
    run = start_run(pty, log, args.duration)
    cli = None
    try:
        wait_streaming(log, run)
        load = load_average()
        t0_ns = time.monotonic_ns()
        cmd = [*AIKO, "can", "estop", "--interface", "slcan", "--channel", pty, "--json"]
        cli = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
        t1_ns = time.monotonic_ns()
        _, run_err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            _, run_err = run.communicate()
        counters, emulator_err = stop_emulator(emulator)
    report = {}
    if cli is not None and cli.stdout.strip():
        try:
            report = json.loads(cli.stdout)
        except ValueError:
            report = {}
    confirmed = report.get("all_confirmed_s")
    reader = LogReader(log)
    stopped = reader.events("run_stopped")
    refs_after = [t for t, _ in reader.messages("/references") if stopped and t > stopped[0].t_ns]
    result = {
        "kind": "estop",
        "trial": index,
        "estop_exit": cli.returncode if cli else None,
        "estop_frames_sent": report.get("frames_sent"),
        "cli_handler_start_to_send_ms": round(1e3 * report["sent_after_s"], 1) if report else None,
        "send_to_all_modules_estop_ms": round(1e3 * confirmed, 1) if confirmed is not None else None,
        "cli_handler_start_to_all_estop_ms": (
            round(1e3 * (report["sent_after_s"] + confirmed), 1) if confirmed is not None else None
        ),
        "launch_to_send_ms": round(1e3 * (report["sent_monotonic_s"] - t0_ns / 1e9), 1) if report else None,
        "launch_to_all_modules_estop_ms": (
            round(1e3 * (report["sent_monotonic_s"] + confirmed - t0_ns / 1e9), 1) if confirmed is not None else None
        ),
        "launch_to_exit_ms": round((t1_ns - t0_ns) / 1e6, 1),
        "run_exit": run.returncode,
        "stopped_reasons": [e.fields.get("reasons") for e in stopped],
        "run_stop_after_launch_ms": round((stopped[0].t_ns - t0_ns) / 1e6, 1) if stopped else None,
        "references_after_the_stop": len(refs_after),
        "traceback": has_traceback(run_err) or has_traceback(cli.stderr if cli else "") or has_traceback(emulator_err),
        "estop_stderr": (cli.stderr.strip()[-300:] if cli else ""),
        "module_states": sorted(set(counters["state"])),
        "load_1min": load,
    }
    log.unlink(missing_ok=True)
    return result


def trial_stray(index: int, tmp: Path, args: argparse.Namespace) -> dict:
    import serial

    from firmware_protocol.codec import default_codec
    from firmware_protocol.dbc import MessageKind, Parameter

    codec = default_codec()
    emulator, pty = start_emulator(args.emulator_rt_priority)
    log = tmp / f"stray-{index}.mcap"
    run = start_run(pty, log, 60.0)
    rng = random.Random(args.seed + index)
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
    for _ in range(args.random_frames):  # half on the protocol's own ids (random payloads), half on any 11-bit id
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
        _, run_err = run.communicate(timeout=30)
        time.sleep(1.0)
    finally:
        if run.poll() is None:
            run.kill()
        counters, _ = stop_emulator(emulator)
    own = OWN_PARAMETER_WRITES
    silence = [
        None if trip is None else round(trip - last, 4)
        for trip, last in zip(counters["watchdog_trip_s"], counters["last_valid_reference_s"], strict=True)
    ]
    log.unlink(missing_ok=True)
    return {
        "kind": "stray",
        "trial": index,
        "stray_parameter_frames": len(stray),
        "random_frames": args.random_frames,
        "run_alive_when_silenced": alive,
        "run_stderr_last_line": (run_err.strip().splitlines() or [""])[-1][:300],
        "stray_parameter_writes_accepted": sum(a - own for a in counters["parameter_writes_accepted"]),
        "rejected": {k: sum(v) for k, v in counters["rejected"].items() if sum(v)},
        "unknown_id_frames": counters["unknown_id_frames"],
        "states_after_silence": counters["state"],
        "last_reference_to_watchdog_trip_s": silence,
        "max_last_reference_to_watchdog_trip_s": max((s for s in silence if s is not None), default=None),
    }


OWN_PARAMETER_WRITES = 9  # a run writes parameters 1-9 to each module before enabling (activation write-and-verify)


def slcan_line(frame_id: int, data: bytes) -> bytes:
    return f"t{frame_id:03X}{len(data)}{data.hex().upper()}\r".encode()


def codec_length(codec, frame_id: int) -> int:
    classified = codec.scheme.classify(frame_id)
    return codec.layout(*classified).length if classified else 8


# ------------------------------------------------------------------------------------------------ summary
def _values(trials: list[dict], key: str) -> list[float]:
    return [t[key] for t in trials if t.get(key) is not None]


def summarise(kind: str, trials: list[dict]) -> dict:
    out: dict = {"trials": len(trials), "tracebacks": sum(bool(t.get("traceback")) for t in trials)}
    if kind == "estop":
        out["stopped_with_estop"] = sum(t["stopped_reasons"] == [["estop_or_fault"]] for t in trials)
        out["estop_confirmed"] = sum(t["estop_exit"] == 0 for t in trials)
        for key in (
            "cli_handler_start_to_send_ms",
            "cli_handler_start_to_all_estop_ms",
            "launch_to_send_ms",
            "launch_to_all_modules_estop_ms",
            "launch_to_exit_ms",
            "run_stop_after_launch_ms",
        ):
            values = _values(trials, key)
            if values:
                out[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        out["references_after_the_stop"] = sum(t["references_after_the_stop"] for t in trials)
    elif kind in ("load", "freeze", "stall"):
        out["runs_ended_by_themselves"] = sum(t["run_exit"] == 0 for t in trials)
        out["runs_stopped"] = [
            {
                "trial": t["trial"],
                "exit": t["run_exit"],
                "reasons": t["stopped_reasons"],
                "silence_made_by": t.get("silence_made_by"),
            }
            for t in trials
            if t["run_exit"] != 0
        ]
        out["module_watchdog_trips"] = sum(t["module_watchdog_trips"] for t in trials)
        for key, pick in (
            ("module_max_reference_gap_ms", max),
            ("module_min_reference_spacing_ms", min),
            ("pc_max_reference_gap_ms", max),
            ("pc_min_reference_spacing_ms", min),
            ("max_freeze_ms", max),
            ("emulator_largest_lag_ms", max),
        ):
            values = _values(trials, key)
            if values:
                out[key] = pick(values)
        out["pty_read_gaps_over_200_ms"] = sorted(g for t in trials for g in t.get("pty_read_gaps_over_200_ms", []))
        fractions = _values(trials, "frozen_fraction")
        if fractions:
            out["frozen_fraction_mean"] = round(statistics.fmean(fractions), 3)
        loads = [x for t in trials for x in t.get("load_1min", [])]
        if loads:
            out["load_1min_range"] = [min(loads), max(loads)]
    elif kind == "stray":
        out["stray_parameter_writes_accepted"] = sum(t["stray_parameter_writes_accepted"] for t in trials)
        out["max_last_reference_to_watchdog_trip_s"] = max(_values(trials, "max_last_reference_to_watchdog_trip_s"))
    return out


def span(text: str) -> tuple[float, float]:
    match = re.fullmatch(r"(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)", text)
    if not match or float(match[1]) > float(match[2]):
        raise argparse.ArgumentTypeError(f"{text!r}: expected LO:HI in ms, e.g. 30:70")
    return float(match[1]), float(match[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", choices=("load", "freeze", "stall", "estop", "stray"), required=True)
    parser.add_argument("--repeat", type=int, default=1, help="trials (default 1)")
    parser.add_argument("--duration", type=float, default=30.0, help="run duration in s (default 30)")
    parser.add_argument("--freeze-ms", type=span, default=(30.0, 70.0), help="freeze length LO:HI (default 30:70)")
    parser.add_argument("--thaw-ms", type=span, default=(30.0, 70.0), help="running between LO:HI (default 30:70)")
    parser.add_argument("--stall-at", type=float, default=10.0, help="stall after this many s of streaming")
    parser.add_argument("--beside", default="", help="load beside the probe: busy, suite or busy,suite")
    parser.add_argument("--emulator-rt-priority", type=int, default=30)
    parser.add_argument(
        "--tty-workers-fifo",
        type=int,
        default=0,
        metavar="P",
        help="root only: the kernel's unbound workers (they move a pty's bytes) at SCHED_FIFO P during the probe "
        "(default 0: left as the machine has them); see TtyWorkers",
    )
    parser.add_argument(
        "--firmware", action="store_true", help="the modules are the firmware in the AVR simulator (make firmware)"
    )
    parser.add_argument("--jsonl", type=Path, help="append each trial to this file as it ends")
    parser.add_argument("--keep-failed", type=Path, metavar="DIR", help="keep the logs of runs that stopped here")
    parser.add_argument(
        "--keep-gaps-over-ms",
        type=float,
        metavar="MS",
        help="also keep (in --keep-failed DIR, as near-*.mcap) the logs of runs that ended by themselves but whose "
        "PC left a gap over MS between two references, with their long deadline_missed events in the trial",
    )
    parser.add_argument("--random-frames", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--no-witness", action="store_true", help="do not run benchmarks/stall_witness.py beside the trials"
    )
    args = parser.parse_args()
    if args.firmware:
        EMULATOR_EXTRA.append("--firmware")
    global WITNESS
    if not 0 <= args.tty_workers_fifo <= 99:
        parser.error("--tty-workers-fifo takes a SCHED_FIFO priority 1..99 (0: off)")
    if args.tty_workers_fifo and os.geteuid() != 0:
        parser.error("--tty-workers-fifo needs root (it sets kernel threads' scheduling)")
    tty_workers = TtyWorkers(args.tty_workers_fifo) if args.tty_workers_fifo else None
    beside = Beside({w for w in args.beside.split(",") if w})
    trials: list[dict] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="aiko-safety-probe-") as tmp:
            if not args.no_witness:
                WITNESS = Witness(Path(tmp) / "witness.jsonl")
            for index in range(args.repeat):
                if args.probe == "estop":
                    trial = trial_estop(index, Path(tmp), args)
                elif args.probe == "stray":
                    trial = trial_stray(index, Path(tmp), args)
                else:
                    trial = trial_run(args.probe, index, Path(tmp), args)
                trials.append(trial)
                if args.jsonl is not None:
                    with args.jsonl.open("a") as fh:
                        fh.write(json.dumps(trial) + "\n")
    finally:
        if WITNESS is not None:
            WITNESS.stop()
        beside.stop()
        if tty_workers is not None:
            tty_workers.stop()
    result = {
        "probe": args.probe,
        "beside": args.beside,
        "duration_s": args.duration,
        "tty_workers_fifo": args.tty_workers_fifo,
        "tty_workers_raised": len(tty_workers.raised) if tty_workers is not None else 0,
        "wall_s": round(time.monotonic() - started, 1),
        "summary": summarise(args.probe, trials),
        "trials": trials,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
