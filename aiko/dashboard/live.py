"""``aiko run --live`` and ``aiko bench run --live``: the dashboard (Aiko's joint view or the rod bench's view) in its
own process, fed through a bounded multiprocessing queue.

The control loop keeps the main thread (Ctrl-C still reaches it and the robot is still disabled on the way out)
and pays only a ``put_nowait`` per record; a full queue drops the record for the display and counts it, it never
waits. A separate process also keeps Qt's drawing off the loop's GIL on a 2-core machine.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import sys
from pathlib import Path
from typing import Any

from aiko.core.errors import AikoError

log = logging.getLogger(__name__)

DONE = "__run_finished__"


class QueueRecorder:
    """The loop side: a Recorder that hands records to the dashboard process without ever blocking."""

    def __init__(self, q: Any) -> None:
        self.queue = q
        self.dropped = 0

    def record(self, channel: str, t_ns: int, payload: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait((channel, t_ns, payload))
        except queue.Full:
            self.dropped += 1

    def event(self, kind: str, t_ns: int, /, **fields: Any) -> None:
        self.record("/events", t_ns, {"kind": kind, **fields})

    def finish(self) -> None:
        try:
            self.queue.put_nowait((DONE, 0, {}))
        except queue.Full:
            self.dropped += 1


class _QueueSource:
    """GUI side: drains the multiprocessing queue like a LiveRecorder."""

    def __init__(self, q: Any) -> None:
        self.queue = q
        self.finished = False
        self.dropped = 0

    def drain(self, limit: int = 20_000) -> list:
        out = []
        for _ in range(limit):
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item[0] == DONE:
                self.finished = True
                continue
            out.append(item)
        return out


EXIT_SCREENSHOT_FAILED = 2


VIEWS = ("aiko", "bench")


def _gui_main(q: Any, n_joints: int, title: str, screenshot: str | None, close_when_done: bool, view: str) -> None:
    from aiko.dashboard.model import DashboardModel
    from aiko.dashboard.window import application, build_window, dispose, qt_modules

    QtCore, _, _ = qt_modules()
    app = application()
    source = _QueueSource(q)
    if view == "bench":
        from aiko.dashboard.bench_window import build_bench_window

        window = build_bench_window(None, title=title, live=source)
    else:
        window = build_window(DashboardModel(n_joints), source, title=title)  # type: ignore[arg-type]
    window.show()

    def check_done() -> None:
        if source.finished and close_when_done:
            timer.stop()  # once: a failing screenshot must not be retried (and reported) every 100 ms
            window.refresh()
            if screenshot:
                try:
                    window.screenshot(screenshot)
                except AikoError as exc:
                    sys.stderr.write(f"aiko: {exc}\n")
                    app.exit(EXIT_SCREENSHOT_FAILED)
                    return
            app.quit()

    timer = QtCore.QTimer()
    timer.setInterval(100)
    timer.timeout.connect(check_done)
    timer.start()
    status = int(app.exec())
    timer.stop()
    dispose(window)
    if status:
        sys.exit(status)  # the process exit code is what LiveDashboard.wait() reports


class LiveDashboard:
    """Start the dashboard process; use ``recorder`` in the run; ``finish()`` then ``wait()``. ``view``: "aiko"
    (the joints of ``n_joints`` modules) or "bench" (the rod bench; ``n_joints`` unused)."""

    def __init__(
        self,
        n_joints: int,
        title: str = "aiko run --live",
        *,
        screenshot: str | Path | None = None,
        close_when_done: bool = False,
        max_pending: int = 20_000,
        view: str = "aiko",
    ) -> None:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        ctx = mp.get_context("spawn")  # no fork of a process that may hold CAN sockets and threads
        self._queue = ctx.Queue(maxsize=max_pending)
        self.recorder = QueueRecorder(self._queue)
        self.process = ctx.Process(
            target=_gui_main,
            args=(self._queue, n_joints, title, str(screenshot) if screenshot else None, close_when_done, view),
            name="aiko-dashboard",
            daemon=False,
        )
        self.process.start()

    def finish(self) -> None:
        self.recorder.finish()

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the window to be closed (or to close itself); returns the process exit code."""
        self.process.join(timeout_s)
        if self.process.is_alive():
            return None
        # Let the queue's feeder thread finish so the interpreter can exit cleanly.
        self._queue.close()
        self._queue.join_thread()
        return self.process.exitcode

    def terminate(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
