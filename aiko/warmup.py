"""Compile the simulators' numba kernels once, with a progress line each, so no run starts with a silent wait.

The kernels are compiled with ``cache=True``: numba writes the machine code beside the sources (``__pycache__``)
and every later process loads it in milliseconds. Without this step the first ``make run`` on a fresh checkout
spends its first 20 s or more compiling, saying nothing. ``make`` runs it once after installing; run it again
yourself after changing a kernel, or with ``--all`` before using the other simulators offline.

    python -m aiko.warmup          # what the default job (`make run`) needs: HIL on the 3D simulator, its replay
    python -m aiko.warmup --all    # every simulator

The default set runs `make run`'s own job, `experiments/sidewinding_hil.toml`, for a fraction of a second on both
backends it uses (``hil``, then ``sim`` for ``--replay sim``), so it compiles exactly the kernels and signatures that
job loads: the compiled HIL plant (`aiko.robots.aiko.backends.hil_snake3d`, which inlines the emulated modules'
kernels and the simulator's step) and the simulator's own kernels (tests/aiko/test_warmup.py checks that a run after
it compiles nothing).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import aiko._blas_threads  # noqa: F401  (before numpy loads)

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _default_job() -> None:
    """`make run`'s job on both of its backends, briefly: HIL (the compiled plant) and sim (its replay)."""
    from aiko.core.recording import MemoryRecorder
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.plugins import backend_names
    from aiko.robots.aiko.run import RunOptions, run_experiment

    backend_names()  # registers the backends' sections
    experiment = load_experiment(EXPERIMENTS / "sidewinding_hil.toml")
    for backend in ("hil", "sim"):
        run_experiment(experiment, MemoryRecorder(), RunOptions(backend=backend, duration_s=0.2))


def _cosserat() -> None:
    from aiko.robots.rod_bench.experiment import load_rod_experiment
    from sim.cosserat import step

    scenario = load_rod_experiment(EXPERIMENTS / "rod" / "rod_on_plane.toml")
    state = scenario.initial_state.copy()
    step(scenario.model, state, scenario.dt_s, scenario.newton)


def _planar_snake() -> None:
    from aiko.core.recording import MemoryRecorder
    from aiko.robots.aiko.experiment import load_experiment
    from aiko.robots.aiko.plugins import backend_names
    from aiko.robots.aiko.run import RunOptions, run_experiment

    backend_names()  # registers the backends' sections
    experiment = load_experiment(EXPERIMENTS / "obstacle_aided_structured.toml")
    run_experiment(experiment, MemoryRecorder(), RunOptions(backend="sim", duration_s=0.2))


def _ur3_controller() -> None:
    from aiko.devices.ur import kinematics_compiled

    kinematics_compiled.warm_up()


# (name, what it compiles, in the default set)
KERNELS: tuple[tuple[str, Callable[[], None], bool], ...] = (
    ("3D snake simulator and its HIL plant (paper 000; `make run`)", _default_job, True),
    ("Cosserat rod (paper 004)", _cosserat, False),
    ("planar snake among obstacles (paper 001)", _planar_snake, False),
    ("UR3 emulator's controller kinematics (`aiko emulate ur3`, the bench's HIL)", _ur3_controller, False),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiko.warmup", description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every simulator, not only the default job's")
    args = parser.parse_args(argv)
    chosen = [(name, fn) for name, fn, default in KERNELS if args.all or default]
    start = time.perf_counter()
    for i, (name, fn) in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] compiling the {name} (numba, cached on disk; once) …", flush=True)
        t0 = time.perf_counter()
        fn()
        print(f"[{i}/{len(chosen)}] done in {time.perf_counter() - t0:.1f} s", flush=True)
    print(f"numba kernels ready ({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
