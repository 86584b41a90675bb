"""Dashboard redraw rate while a feeder thread records like a run (100 Hz feedback, 10 Hz references, 20 Hz
mocap, real time), offscreen. Prints one JSON object: redraws per second and the feeder's record() cost."""

import json
import os
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402

from aiko.dashboard.model import DashboardModel, LiveRecorder  # noqa: E402
from aiko.dashboard.window import application, build_window, dispose  # noqa: E402


def feeder(live: LiveRecorder, seconds: float, costs: list) -> None:
    n = 10
    t0 = time.monotonic_ns()
    k = 0
    while (time.monotonic_ns() - t0) < seconds * 1e9:
        t = k / 100
        now = t0 + round(t * 1e9)
        while time.monotonic_ns() < now:
            time.sleep(0.0005)
        angles = np.sin(t + np.arange(n))
        c = time.perf_counter_ns()
        live.record(
            "/joint_feedback", now, {"t_s": t, "angle_h_rad": angles, "angle_v_rad": 0 * angles, "status": [1] * n}
        )
        if k % 10 == 0:
            live.record("/references", now, {"t_s": t, "angle_h_rad": angles, "angle_v_rad": 0 * angles})
        if k % 5 == 0:
            live.record("/mocap", now, {"position_m": [[0.01 * t, 0.1 * np.sin(t), 0.05]], "occluded": [False]})
        costs.append(time.perf_counter_ns() - c)
        k += 1


def main(seconds: float = 5.0) -> None:
    app = application()
    live = LiveRecorder()
    window = build_window(DashboardModel(10), live, update_hz=25.0)
    window.show()
    costs: list = []
    thread = threading.Thread(target=feeder, args=(live, seconds, costs), daemon=True)
    start = time.monotonic()
    thread.start()
    while thread.is_alive():
        app.processEvents()
        time.sleep(0.002)
    elapsed = time.monotonic() - start
    frames = window.frames_drawn
    # CPU cost of one full frame (model → curves → paint of the whole window) in the GUI thread: independent of
    # how loaded the machine is, unlike the rate above.
    window.timer.stop()
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for _ in range(30):
        window.redraw()
        window.repaint()
        app.processEvents()
    frame_cpu_ms = (time.thread_time() - cpu0) / 30 * 1e3
    frame_wall_ms = (time.perf_counter() - wall0) / 30 * 1e3
    dispose(window)
    costs_us = np.array(costs) / 1e3
    print(
        json.dumps(
            {
                "benchmark": "dashboard_rate",
                "seconds": elapsed,
                "redraws_per_s": frames / elapsed,
                "frame_cpu_ms": frame_cpu_ms,
                "frame_wall_ms": frame_wall_ms,
                "cpu_bound_redraws_per_s": 1e3 / frame_cpu_ms,
                "load_average_1min": os.getloadavg()[0],
                "record_us_median": float(np.median(costs_us)),
                "record_us_max": float(costs_us.max()),
                "dropped": live.dropped,
            }
        )
    )


if __name__ == "__main__":
    main()
