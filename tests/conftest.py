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
