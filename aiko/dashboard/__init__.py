"""Live and recorded-log dashboard (pyqtgraph, the ``gui`` extra). Qt is imported only when a window is built."""

from aiko.dashboard.model import DashboardModel, LiveRecorder

__all__ = ["DashboardModel", "LiveRecorder"]
