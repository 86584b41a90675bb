"""The rod bench's dashboard view: the rod's side view at the scrubbed instant (the simulated centreline, the
camera's tracked markers and the observer's rod where the log has them), the force at the flange over time (the
force sensor's reading, else the rod's base reaction) and the arm's flange height and speed (in the arm's frame).

The Aiko view is about joints; a bench log has none, so it gets this window instead (``aiko dashboard LOG`` picks
it when the log holds ``/bench/observation``). It reads a recorded log; the slider scrubs through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.errors import AikoError
from aiko.dashboard.window import application, qt_modules, save_screenshot

BENCH_TOPIC = "/bench/observation"


def is_bench_log(reader: Any) -> bool:
    return BENCH_TOPIC in reader.topics


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


def build_bench_window(series: BenchSeries, *, title: str = "aiko dashboard — rod bench"):
    QtCore, QtWidgets, pg = qt_modules()
    application()

    class BenchWindow(QtWidgets.QMainWindow):
        def __init__(self) -> None:
            super().__init__()
            self.series = series
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
            self.slider.setValue(1000)
            self.scrub(1000)

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
            s = self.series
            self.force_plot = self.plots.addPlot(row=0, col=1, title=f"flange force [N] ({s.force_label})")
            self.force_plot.addLegend()
            for k, colour in enumerate(("#c62828", "#2e7d32", "#1565c0")):
                self.force_plot.plot(s.force_t_s, s.force_n[:, k], pen=pg.mkPen(colour, width=1), name="xyz"[k])
            self.arm_plot = self.plots.addPlot(row=1, col=1, title="flange height [m] and speed [m/s]")
            self.arm_plot.addLegend()
            self.arm_plot.plot(s.t_s, s.flange_pose[:, 2], pen=pg.mkPen("#6a1b9a", width=1), name="z")
            speed = np.linalg.norm(s.flange_speed[:, :3], axis=1)
            self.arm_plot.plot(s.t_s, speed, pen=pg.mkPen("#00838f", width=1), name="|v|")
            self.cursors = [pg.InfiniteLine(angle=90, pen=pg.mkPen("#9e9e9e")) for _ in range(2)]
            self.force_plot.addItem(self.cursors[0])
            self.arm_plot.addItem(self.cursors[1])

        def scrub(self, value: int) -> None:
            s = self.series
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
            return save_screenshot(self, path)

    return BenchWindow()
