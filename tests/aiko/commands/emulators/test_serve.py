"""The one serve loop of the ``aiko emulate`` devices: ends on --duration, on the device's own stop, on SIGTERM."""

import os
import signal
import threading

from aiko.commands.emulators._serve import serve_until_stopped


def test_returns_after_the_duration_and_restores_the_signal_handlers():
    before = signal.getsignal(signal.SIGTERM)
    serve_until_stopped(0.01)
    assert signal.getsignal(signal.SIGTERM) is before


def test_returns_when_the_device_stops_itself():
    stop = threading.Event()
    threading.Timer(0.01, stop.set).start()
    serve_until_stopped(None, stop)  # would block forever without the event
    assert stop.is_set()


def test_sigterm_ends_it():
    threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGTERM)).start()
    serve_until_stopped(None)  # returns instead of the process dying: the caller's finally runs
