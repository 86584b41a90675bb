"""Speed of a lockstep HIL run: the gait through the CAN driver, the emulated modules and a plant.

    python benchmarks/hil_speed.py --plant inertia --duration 15 --json
    python benchmarks/hil_speed.py --plant snake3d --duration 5 --json

Prints simulated seconds per wall second (> 1: faster than real time). The first snake3d run in a fresh checkout
also pays numba's compilation (cached afterwards); `--warmup` runs 0.2 s first to exclude it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiko.robots.aiko.backends.hil  # noqa: E402,F401  (registers [can] and [hil])
from aiko.core.recording import MemoryRecorder  # noqa: E402
from aiko.robots.aiko.experiment import load_experiment  # noqa: E402
from aiko.robots.aiko.run import RunOptions, run_experiment  # noqa: E402


def run(plant: str, duration_s: float) -> dict:
    experiment = load_experiment(REPO / "experiments" / "sidewinding.toml", {"hil.plant": plant})
    start = time.perf_counter()
    cpu_start = time.process_time()
    _, summary = run_experiment(experiment, MemoryRecorder(), RunOptions(backend="hil", duration_s=duration_s))
    wall_s = time.perf_counter() - start
    return {
        "plant": plant,
        "simulated_s": duration_s,
        "wall_s": wall_s,
        "cpu_s": time.process_time() - cpu_start,
        "realtime_factor": duration_s / wall_s,
        "controller_ticks": summary["controller_ticks"],
        "physics_steps": summary["physics_steps"],
        "can_frames": summary["can_frames_sent"] + summary["can_frames_received"],
        "tracked_point_end_m": summary["tracked_point_end_m"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plant", default="inertia", help="HIL plant: inertia or snake3d")
    p.add_argument("--duration", type=float, default=15.0, metavar="S")
    p.add_argument("--warmup", action="store_true", help="run 0.2 s first (numba compilation, caches)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.warmup:
        run(args.plant, 0.2)
    result = run(args.plant, args.duration)
    print(json.dumps(result) if args.json else "\n".join(f"{k:22s} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
