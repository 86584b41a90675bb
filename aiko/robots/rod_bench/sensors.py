"""The run's sensor tasks from the experiment's ``[ft_sensor]`` / ``[camera]`` tables and the backend: HIL reads the
emulated sensors on the run's loopback host, ``real`` the addresses of the file (strictly validated), ``sim`` has
no devices (the simulator's own channels are the truth)."""

from __future__ import annotations

from aiko.robots.rod_bench.bench_experiment import BenchExperiment
from aiko.robots.rod_bench.bench_run import SensorTask
from aiko.robots.rod_bench.ft_sensor import WRENCH, FTSensorTask, make_reader
from aiko.robots.rod_bench.hil_site import DEFAULT_HOST
from aiko.robots.rod_bench.sensor_settings import require_real_ft_address


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
    return out
