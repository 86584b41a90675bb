"""Loading the plug-ins survives an exception part way (a sweep's time limit firing inside a cold import)."""

import importlib

import pytest

from aiko.core import registry
from aiko.robots.aiko import plugins


def test_an_interrupted_load_is_finished_by_the_next_call(monkeypatch):
    real_import = importlib.import_module
    calls = []

    def interrupted_after_the_first(name, *args):
        calls.append(name)
        if len(calls) == 2:
            raise TimeoutError("the run's time limit, inside an import")
        return real_import(name, *args)

    monkeypatch.setattr(plugins, "_loaded", False)
    monkeypatch.setattr(plugins.importlib, "import_module", interrupted_after_the_first)
    with pytest.raises(TimeoutError):
        plugins.load_plugins()
    assert plugins._loaded is False  # not marked done: the next call imports the rest
    plugins.load_plugins()
    assert plugins._loaded is True
    assert {"kinematic", "sim", "can", "hil"} <= set(registry.backend_names())
