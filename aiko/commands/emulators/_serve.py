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
SIGNAL_CHECK_S = 0.1


def serve_until_stopped(duration_s: float | None, stop: threading.Event | None = None) -> None:
    """Block until SIGTERM or SIGINT arrives, ``duration_s`` passes (None: no limit), ``stop`` is set (a device
    that ends itself, e.g. a dashboard ``shutdown``) or the program that started it is gone (`watch_parent`). The
    previous signal handlers are restored on return, so the caller's ``finally`` (close the device, print its
    counters) runs on every path."""
    done = stop if stop is not None else threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    watch_parent(done)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not done.is_set():
            left = SIGNAL_CHECK_S if deadline is None else min(SIGNAL_CHECK_S, deadline - time.monotonic())
            if left <= 0:
                break
            done.wait(left)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
