"""What a bench backend is configured with: the experiment, the run's recorder and clock, and where it may write
side files. (Aiko's backends take Aiko's ``RunContext``; the bench's take this one.)"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiko.core.clock import Clock
from aiko.core.interfaces import Recorder
from aiko.robots.rod_bench.bench_experiment import BenchExperiment


@dataclass
class BenchContext:
    experiment: BenchExperiment
    recorder: Recorder
    clock: Clock
    duration_s: float
    host: str | None = None  # --host: the address to use instead of [ur3] host (HIL: where to start the emulator)
    workdir: Path | None = None  # side files of the run (the HIL plant's rod samples)
    emulator_rt_priority: int = 0  # --rt-priority: HIL's emulated controller (with its rod plant) at SCHED_FIFO, 0 off
