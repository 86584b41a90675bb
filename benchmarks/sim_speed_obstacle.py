"""Temporary entry point until benchmarks/sim_speed.py dispatches ``--scenario obstacle_aided`` here."""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scenario_obstacle_aided import run  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--scenario", default="obstacle_aided", choices=["obstacle_aided"])
parser.add_argument("--environment", default="structured", choices=["structured", "unstructured"])
parser.add_argument("--duration", type=float, default=30.0)
parser.add_argument("--json", action="store_true")
args = parser.parse_args()
result = run(args.duration, args.environment)
print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
