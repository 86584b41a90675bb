"""Shared helpers of the sweep tests: a sweep file next to the repository's experiments."""

import pytest

from tests.conftest import EXPERIMENTS

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")


@pytest.fixture
def write_spec(tmp_path):
    """``write_spec(body)``: a sweep file in tmp_path naming experiments/sidewinding.toml; returns its path."""

    def write(body: str, name: str = "sweep.toml", experiment: str = "sidewinding.toml"):
        path = tmp_path / name
        path.write_text(f'experiment = "{EXPERIMENTS / experiment}"\n{body}')
        return path

    return write
