"""The joint-module firmware and the AVR simulator harness, built once per test session with `make firmware`.

Tests that run the firmware ask for them with `require_firmware()`: it builds them (make is incremental) or skips
the test, saying which Debian packages are missing, as the ATmega128 build test of the codec does."""

import subprocess
from functools import cache
from pathlib import Path

import pytest

from firmware_protocol.emulator.harness_client import DEFAULT_FIRMWARE, harness_path, missing_tools

REPO = Path(__file__).resolve().parents[1]


@cache
def _build() -> str | None:
    """None when built, else why not (one line)."""
    missing = missing_tools()
    if missing is not None:
        return f"the firmware needs Debian's AVR tools and simavr ({missing}); `make firmware` builds it"
    result = subprocess.run(["make", "--no-print-directory", "firmware"], cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        return f"`make firmware` failed: {(result.stdout + result.stderr).strip()[-600:]}"
    return None


def require_firmware() -> tuple[Path, Path]:
    """(firmware ELF, harness program), built; or skip the calling test with the reason."""
    why = _build()
    if why is not None:
        pytest.skip(why)
    return DEFAULT_FIRMWARE, harness_path()
