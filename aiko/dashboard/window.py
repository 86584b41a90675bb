"""The pyqtgraph dashboard: references against measured angles per joint, the tracked x–y path, module and bus
health, recent events. Live (fed by a :class:`LiveRecorder`) or scrubbing a recorded log with a slider.

The window redraws on a QTimer in the GUI thread (25 Hz by default); the control loop runs elsewhere and only
appends to the recorder's deque, so a slow screen can never stall it. Works offscreen (QT_QPA_PLATFORM=offscreen).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError, writing
from aiko.dashboard.model import DashboardModel, LiveRecorder


def qt_modules():
    """(QtCore, QtWidgets, pyqtgraph), with a clear message when the ``gui`` extra is missing or broken."""
    try:
        import pyqtgraph as pg
        import PySide6
        from pyqtgraph.Qt import QtCore, QtWidgets
    except ImportError as exc:
        raise AikoError(f"the dashboard needs the 'gui' extra: pip install 'aiko-stack[gui]' ({exc})") from None
    check_pyside_version(PySide6.__version__, sys.version_info[:2])
    return QtCore, QtWidgets, pg


def check_pyside_version(version: str, python: tuple[int, int]) -> None:
    """PySide6 6.12.0 drops a reference to None/True/False each time a Python override of a Qt virtual runs
    (pyqtgraph overrides ``paint`` everywhere). Python ≥ 3.12 makes those objects immortal, so nothing shows; on
    3.11 the interpreter aborts after a few seconds of drawing ("none_dealloc"). Measured here: 2000 repaints of an
    overridden QGraphicsView.paintEvent lower ``sys.getrefcount(None)`` by exactly 2000 with 6.12.0, by 0 with
    6.11.3. Refuse clearly instead of crashing mid-run."""
    if python < (3, 12) and version.startswith("6.12."):
        raise AikoError(
            f"PySide6 {version} crashes on Python {python[0]}.{python[1]} (reference-count bug in Qt virtual "
            "overrides); install 'PySide6-Essentials<6.12' or use Python >= 3.12"
        )


def _has_display_server() -> bool:
    """X11 or Wayland on Linux/BSD; macOS and Windows always have a screen (and no DISPLAY variable)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def interactive_display_available() -> bool:
    """Whether a window would be one someone can see and close (else an interactive window waits for ever)."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform not in ("offscreen", "minimal")
    return _has_display_server()


def application():
    _, QtWidgets, _ = qt_modules()
    if not _has_display_server():
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    return QtWidgets.QApplication.instance() or QtWidgets.QApplication([])


HEALTH_COLOURS = {
    "ok": "#2e7d32",
    "off": "#757575",
    "LIMIT": "#f9a825",
    "SATURATED": "#ef6c00",
    "WATCHDOG": "#c62828",
    "FAULT": "#b71c1c",
}


def build_window(
    model: DashboardModel,
    source: LiveRecorder | None = None,
    *,
    title: str = "aiko dashboard",
    update_hz: float = 25.0,
    window_s: float = 10.0,
    messages: list | None = None,
):
    """The dashboard main window. ``messages`` (channel, t_ns, payload) in time order enable the scrub slider."""
    QtCore, QtWidgets, pg = qt_modules()
    application()

    class DashboardWindow(QtWidgets.QMainWindow):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.source = source
            self.window_s = window_s
            self.frames_drawn = 0
            self.started = time.monotonic()
            self.messages = messages
            self._shown_events: list[str] = []
            self.setWindowTitle(title)
            self.resize(1400, 850)
            central = QtWidgets.QWidget()
            layout = QtWidgets.QHBoxLayout(central)
            pg.setConfigOptions(antialias=False, background="w", foreground="k")
            self.plots = pg.GraphicsLayoutWidget()
            layout.addWidget(self.plots, stretch=4)
            side = QtWidgets.QVBoxLayout()
            layout.addLayout(side, stretch=1)
            self.setCentralWidget(central)
            rows = self._add_joint_plots(model.n_joints, cols=5)
            self._add_path_plot(rows, cols=5)
            self._add_side_panel(side, model.n_joints)
            self.timer = QtCore.QTimer(self)
            self.timer.setInterval(max(1, round(1000.0 / update_hz)))
            self.timer.timeout.connect(self.refresh)
            self.timer.start()

        def _add_joint_plots(self, n: int, cols: int) -> int:
            """One panel per joint (both axes, reference and measured); returns the number of panel rows."""
            self.joint_curves = []
            rows = (n + cols - 1) // cols
            self.joint_plots = []
            # Fixed y range and x axes drawn only on the bottom row, y axes only on the left column: re-rendering
            # 22 tick-label axes every frame cost ~70 ms per redraw in software (offscreen) rendering.
            y_limit_deg = 60.0
            for j in range(n):
                row, col = j // cols, j % cols
                plot = self.plots.addPlot(row=row, col=col, title=f"joint {j + 1}")
                # No grid: translucent grid lines over every panel dominate software (offscreen) paint time.
                plot.addLine(y=0.0, pen=pg.mkPen("#bdbdbd", width=1))
                plot.setYRange(-y_limit_deg, y_limit_deg, padding=0)
                plot.enableAutoRange(x=False, y=False)
                plot.setMouseEnabled(x=False, y=True)
                if col != 0:
                    plot.hideAxis("left")
                else:
                    plot.setLabel("left", "deg")
                if j + cols < n:
                    plot.hideAxis("bottom")
                if self.joint_plots:
                    plot.setXLink(self.joint_plots[0])
                self.joint_plots.append(plot)
                # Thin solid pens and peak downsampling to the panel's pixel width: dashed and wide pens are
                # several times slower to rasterise. References are the light colours.
                plot.setDownsampling(auto=True, mode="peak")
                plot.setClipToView(True)
                curves = (
                    plot.plot(pen=pg.mkPen("#90caf9", width=1)),  # h reference
                    plot.plot(pen=pg.mkPen("#0d47a1", width=1)),  # h measured
                    plot.plot(pen=pg.mkPen("#ef9a9a", width=1)),  # v reference
                    plot.plot(pen=pg.mkPen("#b71c1c", width=1)),  # v measured
                )
                self.joint_curves.append(curves)
            return rows

        def _add_path_plot(self, rows: int, cols: int) -> None:
            """The tracked point's path in the plane, under the joint panels."""
            self.xy_plot = self.plots.addPlot(row=rows, col=0, colspan=cols, title="tracked point x–y [m]")
            self.xy_plot.setAspectLocked(True)
            self.xy_plot.showGrid(x=True, y=True, alpha=0.3)
            self.xy_curve = self.xy_plot.plot(pen=pg.mkPen("#2e7d32", width=2), connect="finite")
            self.xy_head = self.xy_plot.plot(symbol="o", symbolSize=8, symbolBrush="#2e7d32", pen=None)

        def _add_side_panel(self, side: Any, n: int) -> None:
            """Module health, run statistics, events, and the scrub slider of a recorded log."""
            side.addWidget(
                QtWidgets.QLabel(
                    "<b>joint modules</b> (light: reference, dark: measured; blue horizontal, red vertical)"
                )
            )
            self.health = QtWidgets.QTableWidget(n, 2)
            self.health.setHorizontalHeaderLabels(["module", "status"])
            self.health.verticalHeader().setVisible(False)
            for j in range(n):
                self.health.setItem(j, 0, QtWidgets.QTableWidgetItem(f"joint {j + 1}"))
                self.health.setItem(j, 1, QtWidgets.QTableWidgetItem("–"))
            side.addWidget(self.health, stretch=2)
            self.stats = QtWidgets.QLabel()
            self.stats.setTextFormat(QtCore.Qt.TextFormat.PlainText)
            side.addWidget(self.stats)
            self.events = QtWidgets.QPlainTextEdit()
            self.events.setReadOnly(True)
            side.addWidget(self.events, stretch=1)
            self.slider = None
            if messages is not None:
                self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
                self.slider.setRange(0, 1000)
                self.slider.setValue(1000)
                self.slider.valueChanged.connect(self.scrub)
                side.addWidget(QtWidgets.QLabel("scrub"))
                side.addWidget(self.slider)
                self.scrub(1000)

        def scrub(self, value: int) -> None:
            """Rebuild the model from the log up to the slider's time."""
            msgs = self.messages or []
            if not msgs:
                return
            t0, t1 = msgs[0][1], msgs[-1][1]
            cut = t0 + (t1 - t0) * value / 1000.0
            fresh = DashboardModel(self.model.n_joints, self.model.history_s)
            for channel, t_ns, payload in msgs:
                if t_ns > cut:
                    break
                fresh.ingest(channel, t_ns, payload)
            self.model = fresh
            self.redraw()

        def refresh(self) -> None:
            if self.source is not None:
                for channel, t_ns, payload in self.source.drain():
                    self.model.ingest(channel, t_ns, payload)
            self.redraw()

        def redraw(self) -> None:
            """One frame: a consistent snapshot of the model (under its lock), then curves and status."""
            m = self.model
            with m.lock:
                lo = m.last_t_s - self.window_s
                t_ref, ref = (a.copy() for a in m.references.view(lo))
                t_fb, fb = (a.copy() for a in m.measured.view(lo))
                t_xy, xy = (a.copy() for a in m.path.view())
                health = m.health()
                counts = dict(m.counts)
                events = list(m.events)
                t_last = m.last_t_s
                occluded = m.occluded_samples
                alarms = m.alarms
                feedback_age = m.feedback_age_s()
                drive = m.drive_line()
            self._draw_curves(lo, t_last, t_ref, ref, t_fb, fb, xy)
            self._draw_status(health, counts, events, t_last, occluded, alarms, feedback_age, drive)
            self.frames_drawn += 1

        def _draw_curves(self, lo, t_last, t_ref, ref, t_fb, fb, xy) -> None:
            n = self.model.n_joints
            ref_deg, fb_deg = np.degrees(ref), np.degrees(fb)
            for j, (h_ref, h_fb, v_ref, v_fb) in enumerate(self.joint_curves):
                h_ref.setData(t_ref, ref_deg[:, j], skipFiniteCheck=True)
                h_fb.setData(t_fb, fb_deg[:, j], skipFiniteCheck=True)
                v_ref.setData(t_ref, ref_deg[:, n + j], skipFiniteCheck=True)
                v_fb.setData(t_fb, fb_deg[:, n + j], skipFiniteCheck=True)
            if self.joint_plots:
                self.joint_plots[0].setXRange(max(lo, 0.0), max(t_last, self.window_s * 0.1), padding=0)
            self.xy_curve.setData(xy[:, 0], xy[:, 1])
            if len(xy):
                self.xy_head.setData(xy[-1:, 0], xy[-1:, 1])

        def _draw_status(self, health, counts, events, t_last, occluded, alarms, feedback_age, drive=None) -> None:
            for j, word in enumerate(health):
                item = self.health.item(j, 1)
                if item.text() != word:
                    item.setText(word)
                    item.setForeground(pg.mkColor(HEALTH_COLOURS.get(word, "#000")))
            elapsed = max(t_last, 1e-9)
            age = "no feedback yet" if feedback_age is None else f"{feedback_age * 1e3:.0f} ms"
            lines = [
                f"t = {t_last:.2f} s",
                f"bus: feedback age {age}, alarms {alarms}",
                f"occluded mocap samples: {occluded}",
                *([drive] if drive else []),
            ]
            if self.source is not None:
                lines.append(f"dropped by the display: {self.source.dropped}")
            for channel in sorted(counts):
                lines.append(f"{channel}: {counts[channel]} ({counts[channel] / elapsed:.1f} Hz)")
            text = "\n".join(lines)
            if text != self.stats.text():
                self.stats.setText(text)
            if events != self._shown_events:
                self.events.setPlainText("\n".join(events))
                self._shown_events = events

        def screenshot(self, path: str | Path) -> Path:
            self.redraw()
            return save_screenshot(self, path)

    return DashboardWindow()


def save_screenshot(window: Any, path: str | Path) -> Path:
    """Render ``window`` (after pending paints) to a PNG; a path that cannot be written is one line."""
    _, QtWidgets, _ = qt_modules()
    QtWidgets.QApplication.processEvents()
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(path)):
        raise AikoError(f"could not write the screenshot {path}")
    return path


def dispose(window: Any) -> None:
    """Tear a window down before the interpreter exits. Without this, PySide6 may destroy the QApplication
    before the widgets at shutdown and crash (seen here with PySide6 6.12: segfault / bool_dealloc)."""
    import gc

    _, QtWidgets, _ = qt_modules()
    app = QtWidgets.QApplication.instance()
    timer = getattr(window, "timer", None)  # the live views refresh on a timer; a log view has none
    if timer is not None:
        timer.stop()
    window.close()
    window.deleteLater()
    if app is not None:
        app.processEvents()
        app.sendPostedEvents(None, 0)  # 0: every pending event type, including DeferredDelete
    gc.collect()


def log_messages(reader: Any) -> list:
    return list(reader.iter_all())


def n_joints_of(reader: Any) -> int:
    for topic in ("/references", "/joint_feedback"):
        if reader.has(topic):
            return int(reader.channel(topic)["angle_h_rad"].shape[1])
    raise AikoError(f"{reader.path} has no joint data (/references or /joint_feedback) to show")
