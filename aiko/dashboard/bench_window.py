"""The rod bench's dashboard view: the rod's side view at the scrubbed instant (the simulated centreline, the
camera's tracked markers and the observer's rod where the log has them), the force at the flange over time (the
force sensor's reading, else the rod's base reaction) and the arm's flange height and speed (in the arm's frame).

The Aiko view is about joints; a bench log has none, so it gets this window instead (``aiko dashboard LOG`` picks
it when the log holds ``/bench/observation``). It reads a recorded log, and the slider scrubs through it; or,
live (``aiko bench run --live``), the records of the running bench as they come (:class:`BenchRecords`, fed by
:mod:`aiko.dashboard.live`), the slider at the newest instant unless the user moves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.dashboard.window import application, qt_modules, save_screenshot

BENCH_TOPIC = "/bench/observation"


BENCH_VIEW_TOPICS = (
    BENCH_TOPIC, "/bench/wrench", "/sim/rod/centreline", "/bench/markers", "/bench/observed_strain",
)  # fmt: skip


def is_bench_log(reader: Any) -> bool:
    return BENCH_TOPIC in reader.topics


class BenchRecords:
    """The bench view's channels of a running bench, as they arrive; reads like a log (``topics``, ``messages``).

    Why a copy of the records and not a log reader: the live view runs in its own process, fed through a queue
    (:mod:`aiko.dashboard.live`), while the log file is still being written by the run."""

    path = "the live bench run"

    def __init__(self) -> None:
        self._messages: dict[str, list[tuple[int, dict[str, Any]]]] = {}

    def ingest(self, channel: str, t_ns: int, payload: dict[str, Any]) -> bool:
        """Keep a record of a channel the view shows; True if it was one."""
        if channel not in BENCH_VIEW_TOPICS:
            return False
        self._messages.setdefault(channel, []).append((t_ns, payload))
        return True

    @property
    def topics(self) -> list[str]:
        return list(self._messages)

    def messages(self, topic: str) -> list[tuple[int, dict[str, Any]]]:
        return sorted(self._messages.get(topic, []), key=lambda m: m[0])  # side records arrive after the run

    def series(self) -> BenchSeries | None:
        """The arrays so far; None before the first arm observation."""
        return BenchSeries(self) if self._messages.get(BENCH_TOPIC) else None


class BenchSeries:
    """The log's bench channels as arrays on one time axis (seconds from the first message)."""

    def __init__(self, reader: Any) -> None:
        obs = reader.messages(BENCH_TOPIC)
        if not obs:
            raise AikoError(f"{reader.path}: no {BENCH_TOPIC} messages: not a bench log")
        t0 = min(t for t, _ in obs)
        self.t0_ns = t0
        self.t_s = np.array([(t - t0) * 1e-9 for t, _ in obs])
        self.flange_pose = np.array([p["flange_pose"] for _, p in obs], dtype=float)
        self.flange_speed = np.array([p["flange_speed"] for _, p in obs], dtype=float)
        sensor = reader.messages("/bench/wrench") if "/bench/wrench" in reader.topics else []
        if sensor:
            self.force_label = "force sensor"
            self.force_t_s = np.array([(t - t0) * 1e-9 for t, _ in sensor])
            self.force_n = np.array([p["force_n"] for _, p in sensor], dtype=float)
        else:
            self.force_label = "rod base reaction"
            self.force_t_s = self.t_s
            self.force_n = np.array([p["base_force_n"] for _, p in obs], dtype=float)
        self.rods = self._shapes(reader, "/sim/rod/centreline", "centreline_m", t0)
        self.markers = self._shapes(reader, "/bench/markers", "world_m", t0)  # unseen markers: None -> NaN
        self.observed = self._shapes(reader, "/bench/observed_strain", "centreline_m", t0)

    @staticmethod
    def _shapes(reader: Any, topic: str, key: str, t0: int) -> list[tuple[float, np.ndarray]]:
        if topic not in reader.topics:
            return []
        out = []
        for t, p in reader.messages(topic):
            if key in p:
                points = [[np.nan] * 3 if point is None else point for point in p[key]]
                out.append(((t - t0) * 1e-9, np.asarray(points, dtype=float).reshape(-1, 3)))
        return out

    @property
    def duration_s(self) -> float:
        return float(self.t_s[-1]) if len(self.t_s) else 0.0


def _at(shapes: list[tuple[float, np.ndarray]], t_s: float) -> np.ndarray | None:
    """The last shape at or before ``t_s``."""
    best = None
    for t, shape in shapes:
        if t > t_s + 1e-9:
            break
        best = shape
    return best


def build_bench_window(
    series: BenchSeries | None, *, title: str = "aiko dashboard — rod bench", live: Any | None = None
):
    """The bench view of ``series`` (a recorded log), or, with ``live`` (a source whose ``drain()`` returns new
    ``(channel, t_ns, payload)`` records and whose ``finished`` says the run ended), of a running bench."""
    QtCore, QtWidgets, pg = qt_modules()
    application()

    class BenchWindow(QtWidgets.QMainWindow):
        def __init__(self) -> None:
            super().__init__()
            self.series = series
            self.records = BenchRecords() if live is not None else None
            self.setWindowTitle(title)
            self.resize(1300, 800)
            pg.setConfigOptions(antialias=True, background="w", foreground="k")
            central = QtWidgets.QWidget()
            layout = QtWidgets.QVBoxLayout(central)
            self.plots = pg.GraphicsLayoutWidget()
            layout.addWidget(self.plots, stretch=1)
            self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
            self.slider.setRange(0, 1000)
            self.slider.valueChanged.connect(self.scrub)
            layout.addWidget(self.slider)
            self.setCentralWidget(central)
            self._add_rod_view()
            self._add_time_plots()
            self._show_series()
            self.slider.setValue(1000)
            self.scrub(1000)
            if live is not None:
                self.timer = QtCore.QTimer(self)  # dispose() stops it
                self.timer.setInterval(250)
                self.timer.timeout.connect(self.refresh)
                self.timer.start()

        def refresh(self) -> None:
            """Live: take the new records; redraw if the view's channels got any (following the newest instant
            unless the slider was moved back)."""
            assert live is not None and self.records is not None
            new = [self.records.ingest(*record) for record in live.drain()]
            if not any(new):
                return
            following = self.slider.value() == 1000
            self.series = self.records.series()
            self._show_series()
            self.scrub(1000 if following else self.slider.value())

        def _add_rod_view(self) -> None:
            """The rod in the x–z plane (the bench's side view), equal axes."""
            self.rod_plot = self.plots.addPlot(row=0, col=0, rowspan=2, title="rod, side view x–z [m]")
            self.rod_plot.setAspectLocked(True)
            self.rod_plot.showGrid(x=True, y=True, alpha=0.3)
            self.rod_plot.addLegend()
            self.rod_curve = self.rod_plot.plot(pen=pg.mkPen("#37474f", width=3), name="simulated rod")
            self.marker_dots = self.rod_plot.plot(
                pen=None, symbol="o", symbolSize=9, symbolBrush="#d32f2f", name="camera markers"
            )
            self.observed_curve = self.rod_plot.plot(pen=pg.mkPen("#1976d2", width=2), name="observer's rod")
            self.base_dot = self.rod_plot.plot(
                pen=None, symbol="s", symbolSize=10, symbolBrush="#ff8f00", name="rod base (at the flange)"
            )

        def _add_time_plots(self) -> None:
            self.force_plot = self.plots.addPlot(row=0, col=1, title="flange force [N]")
            self.force_plot.addLegend()
            self.force_curves = [
                self.force_plot.plot(pen=pg.mkPen(colour, width=1), name="xyz"[k])
                for k, colour in enumerate(("#c62828", "#2e7d32", "#1565c0"))
            ]
            self.arm_plot = self.plots.addPlot(row=1, col=1, title="flange height [m] and speed [m/s]")
            self.arm_plot.addLegend()
            self.height_curve = self.arm_plot.plot(pen=pg.mkPen("#6a1b9a", width=1), name="z")
            self.speed_curve = self.arm_plot.plot(pen=pg.mkPen("#00838f", width=1), name="|v|")
            self.cursors = [pg.InfiniteLine(angle=90, pen=pg.mkPen("#9e9e9e")) for _ in range(2)]
            self.force_plot.addItem(self.cursors[0])
            self.arm_plot.addItem(self.cursors[1])

        def _show_series(self) -> None:
            s = self.series
            if s is None:
                return
            self.force_plot.setTitle(f"flange force [N] ({s.force_label})")
            for k, curve in enumerate(self.force_curves):
                curve.setData(s.force_t_s, s.force_n[:, k])
            self.height_curve.setData(s.t_s, s.flange_pose[:, 2])
            self.speed_curve.setData(s.t_s, np.linalg.norm(s.flange_speed[:, :3], axis=1))

        def scrub(self, value: int) -> None:
            s = self.series
            if s is None:
                return
            t_s = s.duration_s * value / 1000.0
            for cursor in self.cursors:
                cursor.setValue(t_s)
            rod = _at(s.rods, t_s)
            if rod is not None:
                self.rod_curve.setData(rod[:, 0], rod[:, 2])
                self.base_dot.setData(rod[:1, 0], rod[:1, 2])
            markers = _at(s.markers, t_s)
            if markers is not None:
                seen = markers[np.all(np.isfinite(markers), axis=1)]
                self.marker_dots.setData(seen[:, 0], seen[:, 2])
            observed = _at(s.observed, t_s)
            if observed is not None:
                self.observed_curve.setData(observed[:, 0], observed[:, 2])

        def screenshot(self, path: str | Path) -> Path:
            if live is not None:
                self.refresh()
            return save_screenshot(self, path)

    return BenchWindow()
