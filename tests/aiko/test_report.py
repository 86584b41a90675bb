"""The run report `aiko run` writes: a self-contained HTML page (or a PNG)."""

import base64
import re
from pathlib import Path

import pytest

import aiko.mocap.config  # noqa: F401
from aiko.cli import main
from aiko.errors import AikoError
from aiko.experiment import load_experiment
from aiko.report import write_report
from aiko.runner import RunOptions
from aiko.session import record_run

from .chain_backend import ChainBackend

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "run.mcap"
    experiment = load_experiment(
        REPO / "experiments" / "sidewinding.toml", {"run.duration_s": 2.0, "mocap.source": "simulated"}
    )
    record_run(experiment, path, RunOptions(backend="kinematic"), backend=ChainBackend())
    return path


def test_html_report_is_self_contained(log_path, tmp_path):
    out = write_report(log_path, tmp_path / "r.html")
    text = out.read_text()
    for section in ("<h2>Run</h2>", "<h2>Summary</h2>", "<h2>Channels</h2>", "<h2>Events</h2>"):
        assert section in text
    assert "/mocap" in text and "reference_updates" in text and "start" in text
    png = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)'", text).group(1))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert not (tmp_path / "r.png").exists()  # nothing written beside it


def test_png_report_and_bad_suffix(log_path, tmp_path, capsys):
    assert main(["report", str(log_path), "--out", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(AikoError, match=".html or .png"):
        write_report(log_path, tmp_path / "r.pdf")
