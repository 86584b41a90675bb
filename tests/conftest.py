"""Suite-wide settings: headless Qt and matplotlib, and the repository paths tests refer to."""

import os

# One BLAS thread: the suite's linear systems are small, and on a 2-core machine OpenBLAS's thread pool turns a
# 0.3 ms 201x201 solve into 160 ms when the other core is busy. Must be set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"


@pytest.fixture
def experiments_dir() -> Path:
    return EXPERIMENTS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make mutate` (docs/testing.md) mutates one module at a time and must judge it by that module's own tests:
    AIKO_MUTATION_TESTS (space-separated test files) keeps only those. Unset (CI, `make test`) it does nothing."""
    only = os.environ.get("AIKO_MUTATION_TESTS", "").split()
    if not only:
        return
    keep = tuple(f"{path}::" for path in only)
    selected = [item for item in items if item.nodeid.startswith(keep)]
    config.hook.pytest_deselected(items=[item for item in items if not item.nodeid.startswith(keep)])
    items[:] = selected


@pytest.fixture(params=["python", "firmware"])
def modules(request: pytest.FixtureRequest) -> str:
    """The joint modules a test runs against: ``"python"``, the Python model of their firmware
    (firmware_protocol.emulator.modules), or ``"firmware"``, the firmware itself (firmware_protocol/firmware/)
    on simulated ATmega128 boards in the AVR simulator harness; skipped, saying why, where it cannot be built."""
    if request.param == "firmware":
        from tests.firmware_build import require_firmware

        require_firmware()
    return request.param
