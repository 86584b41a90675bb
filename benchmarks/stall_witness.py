"""Is the machine itself stalling? One SCHED_FIFO 99 thread per CPU, pinned, waking every millisecond.

Why: a run stopped by the modules' watchdog shows that the PC sent nothing for > 0.3 s. That is either the run's
own fault (a lock, a slow path, a thread at the wrong priority) or the machine's: a CPU the guest could not use at
all (a virtual machine's vCPU descheduled by its host, "steal" time; or the kernel busy with interrupts off). A
thread at the highest real-time priority, pinned to one CPU, is preempted by nothing in the guest's user space, so
a gap in its wake-ups is time that CPU gave to nobody the probe could blame. Each gap is printed with the steal
time /proc/stat counted on that CPU across it.

    python benchmarks/stall_witness.py --min-gap-ms 50 --out witness.jsonl   # until SIGTERM / Ctrl-C

Each line: {"cpu", "start_monotonic_s", "gap_ms", "steal_ms"}; a first line says whether SCHED_FIFO was granted
(without it the witness is an ordinary thread and its gaps prove nothing). Needs CAP_SYS_NICE (root here).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TextIO

USER_HZ = os.sysconf("SC_CLK_TCK")


def steal_ms(cpu: int) -> float:
    """The steal time /proc/stat has counted for one CPU, in ms (field 8 of its line)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                return 1e3 * int(line.split()[8]) / USER_HZ
    return float("nan")


def watch(cpu: int, min_gap_s: float, period_s: float, out: TextIO, halt: threading.Event) -> None:
    os.sched_setaffinity(0, {cpu})  # this thread only: Linux applies affinity per thread id
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
        fifo = True
    except OSError:
        fifo = False
    out.write(json.dumps({"cpu": cpu, "fifo_99": fifo, "pid": os.getpid()}) + "\n")
    out.flush()
    steal_before = steal_ms(cpu)
    last = time.monotonic()
    next_steal_read = last + 0.1
    while not halt.is_set():
        time.sleep(period_s)
        now = time.monotonic()
        gap = now - last
        if gap >= min_gap_s:
            steal_after = steal_ms(cpu)
            gap_line = {
                "cpu": cpu,
                "start_monotonic_s": round(last, 4),
                "gap_ms": round(1e3 * gap, 1),
                "steal_ms": round(steal_after - steal_before, 1),
            }
            out.write(json.dumps(gap_line) + "\n")  # one write of one line: O_APPEND keeps the processes' lines whole
            out.flush()
            steal_before, next_steal_read = steal_after, now + 0.1
        elif now >= next_steal_read:  # keep the steal baseline at most ~0.1 s older than a gap's start
            steal_before, next_steal_read = steal_ms(cpu), now + 0.1
        last = now


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-gap-ms", type=float, default=50.0, help="report wake-up gaps at least this long")
    parser.add_argument("--period-ms", type=float, default=1.0, help="the sleep between wake-ups")
    parser.add_argument("--out", default="-", help="JSON lines to this file (default: stdout)")
    parser.add_argument("--cpu", type=int, help="watch this CPU only (default: one process per CPU)")
    args = parser.parse_args(argv)
    if args.cpu is None:
        # one process per CPU, not one thread: a witness stalled while holding the GIL would stall the others
        children = [
            subprocess.Popen([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--cpu", str(c)])
            for c in sorted(os.sched_getaffinity(0))
        ]
        signal.signal(signal.SIGTERM, lambda *_: [c.terminate() for c in children])
        try:
            return max(c.wait() for c in children)
        except KeyboardInterrupt:
            for c in children:
                c.terminate()
            return max(c.wait() for c in children)
    out = sys.stdout if args.out == "-" else open(args.out, "a", buffering=1)  # noqa: SIM115 - closed at exit
    halt = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: halt.set())
    try:
        watch(args.cpu, args.min_gap_ms / 1e3, args.period_ms / 1e3, out, halt)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
