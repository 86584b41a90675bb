"""Speed of a lockstep HIL run: the gait through the CAN driver, the emulated modules and a plant.

    python benchmarks/hil_speed.py --plant inertia --duration 15 --json
    python benchmarks/hil_speed.py --plant snake3d --duration 15 --warmup --json
    python benchmarks/hil_speed.py --experiment experiments/sidewinding_hil.toml --duration 15 --warmup --json
    python benchmarks/hil_speed.py --plant snake3d --duration 5 --warmup --compare-reference 3 --json

Prints simulated seconds per wall second (> 1: faster than real time). The first snake3d run in a fresh checkout
also pays numba's compilation (cached afterwards); `--warmup` runs 0.2 s first to exclude it.

``compiled_ticks_s`` is the wall time inside the compiled module ticks (modules + physics; snake3d only), the rest
of ``wall_s`` is the CAN path (encode, virtual bus, decode on both sides) and the run loop. ``--compare-reference
N`` alternates N runs of the compiled path with N runs of the readable numpy reference path (the emulator's
``use_reference``: tick by tick, the plant through ``joint_state``/``advance``) and reports the median factors and
their ratio, measured interleaved because the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiko.robots.aiko.backends.hil  # noqa: E402,F401  (registers [can] and [hil])
import firmware_protocol.emulator.modules as emulator_module  # noqa: E402
from aiko.core.recording import MemoryRecorder  # noqa: E402
from aiko.robots.aiko.backends.hil import HilBackend  # noqa: E402
from aiko.robots.aiko.experiment import load_experiment  # noqa: E402
from aiko.robots.aiko.run import RunOptions, run_experiment  # noqa: E402

_COMPILED_RUNNER = emulator_module.compiled_runner


def run(plant: str | None, duration_s: float, experiment_path: Path, reference_path: bool = False) -> dict:
    """One run; ``reference_path``: the emulator's numpy reference path instead of the compiled ticks."""
    overrides = {"hil.plant": plant} if plant else {}
    experiment = load_experiment(experiment_path, overrides)
    emulator_module.compiled_runner = (lambda _plant: None) if reference_path else _COMPILED_RUNNER
    backend = HilBackend()
    try:
        start = time.perf_counter()
        cpu_start = time.process_time()
        _, summary = run_experiment(
            experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=duration_s), backend=backend
        )
        wall_s = time.perf_counter() - start
    finally:
        emulator_module.compiled_runner = _COMPILED_RUNNER
    simulator = getattr(getattr(backend.emulator.plant, "plant", None), "simulator", None)
    result = {
        "plant": summary["hil_plant"],
        "path": "reference" if reference_path else "compiled",
        "simulated_s": duration_s,
        "wall_s": wall_s,
        "cpu_s": time.process_time() - cpu_start,
        "realtime_factor": duration_s / wall_s,
        "controller_ticks": summary["controller_ticks"],
        "physics_steps": summary["physics_steps"],
        "can_frames": summary["can_frames_sent"] + summary["can_frames_received"],
        "tracked_point_end_m": summary["tracked_point_end_m"],
    }
    if simulator is not None and not reference_path:
        result["compiled_ticks_s"] = simulator.stats.wall_time_s
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plant", default=None, help="HIL plant: inertia or snake3d (default: the experiment's)")
    p.add_argument("--experiment", type=Path, default=REPO / "experiments" / "sidewinding.toml", metavar="TOML")
    p.add_argument("--duration", type=float, default=15.0, metavar="S")
    p.add_argument("--warmup", action="store_true", help="run 0.2 s first (numba compilation, caches)")
    p.add_argument("--compare-reference", type=int, default=0, metavar="N", help="N interleaved pairs of runs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    plant = args.plant if args.plant or args.experiment.name != "sidewinding.toml" else "inertia"
    if args.warmup:
        run(plant, 0.2, args.experiment)
    if args.compare_reference > 0:
        runs = {"compiled": [], "reference": []}
        for _ in range(args.compare_reference):
            for path in runs:
                runs[path].append(run(plant, args.duration, args.experiment, reference_path=path == "reference"))
        factors = {path: [r["realtime_factor"] for r in rs] for path, rs in runs.items()}
        same = all(a["tracked_point_end_m"] == b["tracked_point_end_m"] for a, b in zip(*runs.values(), strict=True))
        result = {
            "plant": runs["compiled"][0]["plant"],
            "simulated_s": args.duration,
            "realtime_factor_compiled": factors["compiled"],
            "realtime_factor_reference": factors["reference"],
            "median_compiled": statistics.median(factors["compiled"]),
            "median_reference": statistics.median(factors["reference"]),
            "speedup": statistics.median(factors["compiled"]) / statistics.median(factors["reference"]),
            "identical_tracked_point": same,
        }
    else:
        result = run(plant, args.duration, args.experiment)
    print(json.dumps(result) if args.json else "\n".join(f"{k:26s} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
