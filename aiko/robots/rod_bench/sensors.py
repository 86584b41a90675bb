"""The run's sensor tasks from the experiment's ``[ft_sensor]`` / ``[camera]`` tables and the backend: HIL reads the
emulated sensors on the run's loopback host, ``real`` the addresses and the camera source of the file (strictly
validated), ``sim`` has no devices (the simulator's own channels are the truth)."""

from __future__ import annotations

from pathlib import Path

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.camera import MARKERS, HilCamera
from aiko.robots.rod_bench.ft_sensor import WRENCH, FTSensorTask, hil_pty_path, make_reader
from aiko.robots.rod_bench.hil_site import DEFAULT_HOST
from aiko.robots.rod_bench.sensor_settings import require_real_ft_address
from aiko.robots.rod_bench.sensor_task import SensorTask


def bench_sensors(
    experiment: BenchExperiment, backend_name: str, host: str | None, *, log_path: str | Path | None = None
) -> list[SensorTask]:
    """``log_path``: the run's log (a real camera writes its video beside it)."""
    ft = experiment.ft_sensor
    out: list[SensorTask] = []
    if ft is not None and backend_name in ("hil", "real"):
        if backend_name == "hil":  # the emulated sensor in the plant's process (aiko.robots.rod_bench.hil_site)
            address, port = f"{host or DEFAULT_HOST}:{ft.udp_port}", str(hil_pty_path(host or DEFAULT_HOST))
        else:
            require_real_ft_address(ft, str(experiment.path))
            address, port = None, None
        task = FTSensorTask(make_reader(ft, address, port), ft)
        rate = min(ft.rate_hz, experiment.bench.observe_rate_hz)
        out.append(SensorTask("ft_sensor", rate, WRENCH, task.sample, task.close, task.open, task.summary))
    if experiment.camera is not None and backend_name == "hil":
        camera = HilCamera(experiment, live=True)  # films beside the run, in a process of its own
        out.append(
            SensorTask(
                "camera",
                experiment.camera.rate_hz,
                MARKERS,
                None,
                close=camera.close,
                open=camera.open,
                summary=camera.summary,
                finish=camera.finish,
                start_finish=camera.start_finish,
                follow=camera.follow,
            )
        )
    elif experiment.camera is not None and backend_name == "real":
        if experiment.camera.is_synthetic:
            raise ConfigError(
                f"{experiment.path}: --backend real films with a real camera: set camera.source to a device index,"
                " video file, URL or GStreamer pipeline (and camera.calibration), or remove [camera]"
            )
        from aiko.robots.rod_bench.real_camera import RealCamera  # OpenCV's capture: only when a camera is used

        real = RealCamera(experiment, log_path)
        out.append(
            SensorTask(
                "camera",
                experiment.camera.rate_hz,
                MARKERS,
                None,
                close=real.close,
                summary=real.summary,
                open_with_clock=real.open_with_clock,
                finish=real.finish,
            )
        )
    return out
