"""Suite-wide settings: headless Qt and matplotlib, and the repository paths tests refer to."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"


@pytest.fixture
def experiments_dir() -> Path:
    return EXPERIMENTS
