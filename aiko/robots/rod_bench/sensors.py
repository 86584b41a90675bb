"""The run's sensor tasks from the experiment's ``[ft_sensor]`` / ``[camera]`` tables and the backend: HIL reads the
emulated sensors on the run's loopback host, ``real`` the addresses of the file (strictly validated), ``sim`` has
no devices (the simulator's own channels are the truth)."""

from __future__ import annotations

from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.camera import MARKERS, HilCamera
from aiko.robots.rod_bench.ft_sensor import WRENCH, FTSensorTask, make_reader
from aiko.robots.rod_bench.hil_site import DEFAULT_HOST
from aiko.robots.rod_bench.sensor_settings import require_real_ft_address
from aiko.robots.rod_bench.sensor_task import SensorTask


def bench_sensors(experiment: BenchExperiment, backend_name: str, host: str | None) -> list[SensorTask]:
    ft = experiment.ft_sensor
    out: list[SensorTask] = []
    if ft is not None and backend_name in ("hil", "real"):
        if backend_name == "hil":
            address = f"{host or DEFAULT_HOST}:{ft.udp_port}"
        else:
            require_real_ft_address(ft, str(experiment.path))
            address = None
        task = FTSensorTask(make_reader(ft, address), ft)
        rate = min(ft.rate_hz, experiment.bench.observe_rate_hz)
        out.append(SensorTask("ft_sensor", rate, WRENCH, task.sample, task.close, task.open, task.summary))
    if experiment.camera is not None and backend_name == "hil":
        camera = HilCamera(experiment)
        out.append(
            SensorTask("camera", experiment.camera.rate_hz, MARKERS, None, summary=camera.summary, finish=camera.finish)
        )
    elif experiment.camera is not None and backend_name == "real":
        raise ConfigError(
            "a real camera in the bench loop is not built yet: film the run with aiko.devices.camera (docs/camera.md)"
            " and run its StrainPipeline on the video; remove [camera] for --backend real"
        )
    return out
