"""Text written to stderr by a thread of its own, so that no thread that calls ``write`` waits for the output.

Why: a run's control loop logs (a missed deadline is a warning, the progress a line every 10 s) from the loop's own
thread, and a write to a file can block for a long time: on a busy lab PC a test suite or a compiler filling the page
cache makes the kernel throttle every writer of dirty pages (``balance_dirty_pages``: pauses of up to 200 ms,
repeated), and a terminal or pipe nobody reads blocks as soon as its buffer is full. A CAN run on this machine, its
stderr a file on the disk a test suite was writing to, stopped on the modules' watchdog after its loop had sent
nothing for 1.13 s: the loop's own calls had blocked, not the machine and not its sleep (docs/can_hil.md, the
real-time notes). Which call is not known; a write to stderr is one that can block, and it is taken off every
thread here. The recorder already keeps the disk off the loop's thread (a queue and a writer thread); this does the
same for stderr, for every command.

Nothing is dropped: text waits in memory until written (a run writes a few kB a second at most). ``close`` writes what
is queued (bounded by a timeout) and then passes later writes straight through, so text written at interpreter exit
(``logging.shutdown``, a traceback) still arrives.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

DRAIN_TIMEOUT_S = 10.0
THREAD_NAME = "stderr-writer"  # also the OS thread's name (Linux): `ps -L`, `top -H`, /proc/PID/task/TID/comm
_PR_SET_NAME = 15


def _name_os_thread(name: str) -> None:
    """Give the calling thread its name in the kernel too (Python 3.11 names only its own Thread object): so a user
    or a test can tell this thread, deliberately at normal priority and off the control path, from a run's
    real-time threads."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        except (OSError, AttributeError):
            pass


class BackgroundStream:
    """A text stream whose ``write`` and ``flush`` return at once; a daemon thread writes to ``target``."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._queue: collections.deque[str] = collections.deque()
        self._cond = threading.Condition()
        self._busy = False  # the writer holds text taken off the queue and not yet written
        self._open = True
        self.write_errors = 0
        self._thread = threading.Thread(target=self._write_loop, name=THREAD_NAME, daemon=True)
        self._thread.start()

    # the parts of the TextIO protocol that logging, print, tqdm and our Progress use
    def write(self, text: str) -> int:
        if not self._open:
            return self.target.write(text)
        with self._cond:
            self._queue.append(text)
            self._cond.notify()
        return len(text)

    def flush(self) -> None:
        if not self._open:
            self.target.flush()
        # open: the writer flushes after every batch; a caller never waits for it

    def isatty(self) -> bool:
        return bool(self.target.isatty())

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:
        return str(getattr(self.target, "encoding", "utf-8"))

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """Wait until everything written so far is written to the target (False if it took longer than timeout_s)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Write what is queued, then write through (the target itself stays open: it is not ours)."""
        self.drain(timeout_s)
        with self._cond:
            self._open = False
            leftover = "".join(self._queue)  # only if the drain timed out
            self._queue.clear()
            self._cond.notify_all()
        if leftover:
            self.target.write(leftover)
            self.target.flush()

    def _write_loop(self) -> None:
        _name_os_thread(THREAD_NAME)
        while True:
            with self._cond:
                while not self._queue and self._open:
                    self._cond.wait()
                if not self._open:
                    return
                text = "".join(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                self.target.write(text)
                self.target.flush()
            except (OSError, ValueError):  # a closed or broken stderr: as a plain write would, minus the crash
                self.write_errors += 1
            with self._cond:
                self._busy = False
                self._cond.notify_all()


@contextlib.contextmanager
def stderr_in_background() -> Iterator[BackgroundStream]:
    """``sys.stderr`` is a :class:`BackgroundStream` over the current one inside the block; drained on the way out."""
    original = sys.stderr
    stream = BackgroundStream(original)
    sys.stderr = stream
    try:
        yield stream
    finally:
        stream.close()
        if sys.stderr is stream:
            sys.stderr = original
