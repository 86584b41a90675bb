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


def test_a_sigterm_taken_by_another_thread_ends_it_too():
    """The kernel may hand a process's SIGTERM to any of its threads; Python runs the handler in the main thread,
    which an untimed wait never woke: the emulator served on (1 of 8 SIGTERMs beside two busy loops). Here the
    signal is sent to a helper thread on purpose; the loop must still end (it hung before, until the next signal)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    code = (
        "import signal, threading, time\n"
        "from aiko.commands.emulators._serve import serve_until_stopped\n"
        "def poke():\n"
        "    time.sleep(0.3)\n"
        "    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)\n"
        "    time.sleep(60)\n"
        "threading.Thread(target=poke, daemon=True).start()\n"
        "serve_until_stopped(None)\n"
        "print('ended', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "ended", done.stderr


def test_it_ends_when_the_program_that_started_it_dies_hard(tmp_path):
    # a "run" process starts a serve loop as its child with AIKO_EXIT_WITH_PARENT, then is SIGKILLed (as a run is
    # ended by a segfault in a vendor library): the child must not serve for ever
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    child = "from aiko.commands.emulators._serve import serve_until_stopped; serve_until_stopped(60.0)"
    parent = (
        "import os, subprocess, sys, time\n"
        "from aiko.core.parent_watch import exit_with_parent_env\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}], env={{**os.environ, **exit_with_parent_env()}})\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(repo))
    run = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, env=env)
    child_pid = int(run.stdout.readline())
    time.sleep(0.5)
    run.kill()
    run.wait()
    deadline = time.monotonic() + 30  # polled every 0.5 s; the rest is a loaded machine's scheduling
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        stat = Path(f"/proc/{child_pid}/stat")
        if stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z":
            break  # ended; a zombie until an init that does not reap (some containers' PID 1) gets to it
        try:  # reap it if it was re-parented to us (a subreaper), else it is init's
            os.waitpid(child_pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        os.kill(child_pid, signal.SIGKILL)
        raise AssertionError("the child kept serving after its parent died")
