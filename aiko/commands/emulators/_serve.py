"""The one "serve until SIGTERM, SIGINT or --duration" loop of the ``aiko emulate`` devices."""

from __future__ import annotations

import signal
import threading

from aiko.core.parent_watch import watch_parent


def serve_until_stopped(duration_s: float | None, stop: threading.Event | None = None) -> None:
    """Block until SIGTERM or SIGINT arrives, ``duration_s`` passes (None: no limit), ``stop`` is set (a device
    that ends itself, e.g. a dashboard ``shutdown``) or the program that started it is gone (`watch_parent`). The
    previous signal handlers are restored on return, so the caller's ``finally`` (close the device, print its
    counters) runs on every path."""
    done = stop if stop is not None else threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    watch_parent(done)
    try:
        done.wait(duration_s)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
