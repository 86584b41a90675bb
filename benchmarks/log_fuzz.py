"""Fuzz `aiko log recover` and `aiko log info` with damaged real logs (bit flips, truncations, splices, deleted,
duplicated and overwritten spans): counts crashes and outputs the `mcap` library cannot read.

Prints one JSON object. Usage: python benchmarks/log_fuzz.py [--cases 10000] [--seed 0]
"""

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fuzz cases are the suite's (tests/)
from tests.aiko.log.fuzz_cases import check_case, damage, make_logs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import logging

    logging.disable(logging.CRITICAL)  # the reader warns about every truncated case
    rng = random.Random(args.seed)
    failures: list[dict] = []
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        logs = make_logs(directory)
        for case in range(args.cases):
            data = damage(rng, logs)
            problem = check_case(data, directory)
            if problem is not None:
                failures.append({"case": case, "problem": problem, "size": len(data)})
            recovered = directory / "case.recovered.mcap"
            outcomes["recovered" if recovered.exists() else "refused (exit 2)"] += 1
    print(
        json.dumps(
            {
                "cases": args.cases,
                "seed": args.seed,
                "failures": len(failures),
                "first_failures": failures[:10],
                "outcomes": dict(outcomes),
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
