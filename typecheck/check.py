#!/usr/bin/env python3
"""mypy over the package (settings: ``[tool.mypy]`` in pyproject.toml) against the checked-in baseline.

The baseline (``typecheck/baseline.txt``) lists the errors the code had when it was written, one per line as
``path: [code] message`` (no line numbers: editing a file above an old error does not make it new). Every error
that is not in the baseline (counting repeats) fails the check: the baseline may only shrink. ``aiko/core`` may have
no entry at all. When errors have been fixed, the check says so; ``make typecheck-baseline`` (``--write``) then
rewrites the file, which is how it shrinks — never to let a new error in.

Usage: python typecheck/check.py [--write]
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "typecheck" / "baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?:\d+:)? error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")
NO_BASELINE = ("aiko/core/",)
"""Folders that must stay free of type errors: no baseline entry may name them."""


def run_mypy() -> tuple[list[str], list[str]]:
    """(errors as baseline keys, the same with their line numbers for the report)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty", "--show-error-codes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):  # 1: type errors found; 2: mypy could not run (bad config, crash)
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy failed to run (exit {proc.returncode})")
    keys, located = [], []
    for line in proc.stdout.splitlines():
        match = ERROR.match(line)
        if match is None:
            continue
        key = f"{match['path']}: [{match['code']}] {match['message']}"
        keys.append(key)
        located.append(f"{match['path']}:{match['line']}: [{match['code']}] {match['message']}")
    return keys, located


def main(argv: list[str]) -> int:
    keys, located = run_mypy()
    if "--write" in argv:
        forbidden = [k for k in keys if k.startswith(NO_BASELINE)]
        if forbidden:
            print("\n".join(["type errors in folders that take no baseline (fix them):", *forbidden]))
            return 1
        BASELINE.write_text("".join(f"{k}\n" for k in sorted(keys)))
        print(f"typecheck/baseline.txt: {len(keys)} errors")
        return 0
    baseline = Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else Counter()
    current = Counter(keys)
    new = current - baseline
    fixed = baseline - current
    for where in located:
        key = re.sub(r":\d+: ", ": ", where, count=1)
        if new[key] > 0:
            print(f"new type error: {where}")
            new[key] -= 1
    new_total = sum((current - baseline).values())
    print(
        f"mypy: {sum(current.values())} errors, {sum(baseline.values())} in the baseline, {new_total} new, "
        f"{sum(fixed.values())} fixed"
    )
    if fixed and not new_total:
        print("errors were fixed: run `make typecheck-baseline` to shrink the baseline")
    return 1 if new_total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
