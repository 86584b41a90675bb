"""Import paths moved by the regrouping keep working for one release, with a warning naming the new path, and
give the very module object of the new path (so registries are not duplicated)."""

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    "old, new",
    [
        ("aiko.experiment", "aiko.robots.aiko.experiment"),
        ("aiko.backends.can_bus", "aiko.robots.aiko.backends.hil"),
        ("aiko.can_driver.driver", "aiko.devices.can.driver"),
        ("aiko.mocap.config", "aiko.robots.aiko.mocap"),
        ("aiko.mocap.vicon", "aiko.devices.vicon.client"),
        ("aiko.session", "aiko.robots.aiko.run"),
    ],
)
def test_an_old_path_warns_and_is_the_new_module(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_an_old_package_path_does_not_load_its_submodules_twice():
    for name in ("aiko.backends", "aiko.backends.can_bus"):
        sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning):
        from aiko.backends.can_bus import HilBackend
    from aiko.robots.aiko.backends.hil import HilBackend as new

    assert HilBackend is new
