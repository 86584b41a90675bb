"""The plug-in registry: a section is parsed once, at load, into typed settings that a backend reads; a backend's
capabilities (not its name) decide what the CLI and the clock do with it."""

from pathlib import Path

import pytest

from aiko.core import registry
from aiko.core.config import Table
from aiko.core.errors import ConfigError
from aiko.robots.aiko.backends.can_settings import CanSection
from aiko.robots.aiko.experiment import load_experiment
from aiko.robots.aiko.run import choose_clock

REPO = Path(__file__).resolve().parents[3]
SIDEWINDING = REPO / "experiments" / "sidewinding.toml"


def test_a_section_is_parsed_once_into_typed_settings(monkeypatch):
    calls = []
    original = registry.section_parser("can")

    def counting(table: Table, experiment):
        calls.append(table.path)
        return original(table, experiment)

    monkeypatch.setitem(registry._SECTIONS, "can", registry.SectionInfo("can", counting))
    experiment = load_experiment(SIDEWINDING, {"can.bitrate": 500_000})
    assert calls == ["can"]  # at load: the file has the table (through the override)
    first = experiment.settings("can")
    assert isinstance(first, CanSection) and first.bitrate == 500_000
    assert experiment.settings("can") is first and calls == ["can"]  # never again


def test_an_absent_section_is_parsed_from_its_defaults_on_first_use():
    experiment = load_experiment(SIDEWINDING)
    assert "hil" not in experiment.tables
    assert experiment.settings("hil").plant == "inertia"


def test_a_bad_key_in_a_plugin_section_fails_at_load_not_at_run():
    with pytest.raises(ConfigError, match=r"can\.bitrat: unknown key"):
        load_experiment(SIDEWINDING, {"can.bitrat": 500_000})


def test_the_clock_follows_the_backends_capability_not_its_name(monkeypatch):
    from aiko.core.clock import SimulatedClock, WallClock
    from aiko.robots.aiko.backends.kinematic import KinematicBackend

    assert isinstance(choose_clock("can", realtime=False), WallClock)
    assert isinstance(choose_clock("kinematic", realtime=False), SimulatedClock)
    registry.register_backend("test_hardware", KinematicBackend, "a hardware stand-in", wall_clock_only=True)
    try:
        assert isinstance(choose_clock("test_hardware", realtime=False), WallClock)
    finally:
        registry.unregister_backend("test_hardware")
