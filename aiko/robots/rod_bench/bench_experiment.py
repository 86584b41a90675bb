"""A bench experiment: a rod experiment file (the simulator's scenario, exactly as ``aiko rod run`` reads it) plus
the bench's own ``[bench]`` and ``[ur3]`` tables. The file's text is kept: it goes into every log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiko.core.config import parse_toml, read_toml
from aiko.core.errors import ConfigError
from aiko.robots.rod_bench.experiment import scenario_from_dict
from aiko.robots.rod_bench.sensor_settings import CameraSettings, FTSensorSettings, parse_camera, parse_ft_sensor
from aiko.robots.rod_bench.settings import BenchSettings, UR3Settings, parse_bench, parse_ur3
from sim.cosserat import RodParameterError
from sim.cosserat.scenario import Scenario


@dataclass(frozen=True)
class BenchExperiment:
    path: Path
    text: str
    scenario: Scenario
    bench: BenchSettings
    ur3: UR3Settings
    log_rate_hz: float
    ft_sensor: FTSensorSettings | None = None
    camera: CameraSettings | None = None

    @property
    def name(self) -> str:
        return self.scenario.name


def load_bench_experiment(path: str | Path, overrides: Mapping[str, Any] | None = None) -> BenchExperiment:
    """Read and validate a bench experiment file (every table strict; errors are one line naming the key)."""
    path = Path(path)
    data, text = read_toml(path, "rod experiment file", overrides)
    return bench_experiment_from_dict(data, text, path)


def bench_experiment_from_text(text: str, source: str = "<log>") -> BenchExperiment:
    """The experiment as a log stored it (``aiko bench replay`` needs no file)."""
    data = parse_toml(text, f"{source}: stored experiment")
    return bench_experiment_from_dict(data, text, Path(source))


def bench_experiment_from_dict(data: Mapping[str, Any], text: str, path: Path) -> BenchExperiment:
    source = str(path)
    if "base_motion" not in data:
        raise ConfigError(f"{source}: a bench experiment needs a [base_motion] table (the arm's trajectory)")
    try:
        scenario = scenario_from_dict(data, source)
    except RodParameterError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if scenario.model.base != "clamped":
        raise ConfigError(f'{source}: model.base must be "clamped" on the bench (the arm holds the rod)')
    if scenario.release_at_s is not None:
        raise ConfigError(f"{source}: run.release_at_s has no meaning on the bench (the rod stays on the flange)")
    start = scenario.initial_state.q[0:6]
    first = scenario.base_motion.alpha(0.0) if scenario.base_motion is not None else start
    if not np.allclose(first, start, atol=1e-9):
        raise ConfigError(
            f"{source}: base_motion at t = 0 must be the [initial] base pose (the arm starts the trajectory there)"
        )
    log_rate = float(data.get("run", {}).get("log_rate_hz", 50.0))
    bench = parse_bench(data.get("bench"), source)
    ft = parse_ft_sensor(data.get("ft_sensor"), source)
    camera = parse_camera(data.get("camera"), source, scenario.model.rod.length_m)
    return BenchExperiment(path, text, scenario, bench, parse_ur3(data.get("ur3"), source), log_rate, ft, camera)
