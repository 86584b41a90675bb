"""The one "serve until SIGTERM, SIGINT or --duration" loop of the ``aiko emulate`` devices."""

from __future__ import annotations

import signal
import threading
import time

from aiko.core.parent_watch import watch_parent

# The longest the main thread blocks before it looks for a signal. Python runs a signal's handler in the main thread,
# and a signal the kernel hands to another thread (any thread of the process may take it) does not wake a main thread
# blocked in an untimed wait: the handler then waits for the next wake-up, which never came. Measured: `aiko emulate
# ur3` beside two busy loops kept serving after 1 of 8 SIGTERMs (a test waited 20 s for it; `aiko bench run --backend
# hil` waits as long, then kills it). A timed wait returns to the interpreter, which runs the pending handler.
# The handler only records the signal: an `Event.set()` there takes the Event's lock, which the main thread holds for
# a few bytecodes on every return from `wait` (where a pending handler runs), and would wait for itself for ever (the
# CAN emulator met that deadlock: firmware_protocol/emulator/cli.py).
SIGNAL_CHECK_S = 0.1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve_until_stopped(duration_s: float | None, stop: threading.Event | None = None) -> None:
    """Block until SIGTERM or SIGINT arrives, ``duration_s`` passes (None: no limit), ``stop`` is set (a device
    that ends itself, e.g. a dashboard ``shutdown``) or the program that started it is gone (`watch_parent`). The
    previous signal handlers are restored on return, so the caller's ``finally`` (close the device, print its
    counters) runs on every path."""
    done = stop if stop is not None else threading.Event()
    signalled: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _: signalled.append(signum)) for sig in STOP_SIGNALS}
    watch_parent(done)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not done.is_set() and not signalled:
            left = SIGNAL_CHECK_S if deadline is None else min(SIGNAL_CHECK_S, deadline - time.monotonic())
            if left <= 0:
                break
            done.wait(left)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        done.set()  # over, however it ended (the parent watcher stops polling); set here, outside any handler
