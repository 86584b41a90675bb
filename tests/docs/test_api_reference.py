"""The API reference (docs/api/*.md) lists every module of the packages it covers, so a new module cannot be left
out of the documentation site unnoticed (its docstrings are rendered by mkdocstrings at ``make docs``)."""

import pkgutil
import re
from pathlib import Path

import aiko

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"core": "aiko.core", "log": "aiko.log", "devices": "aiko.devices", "robots": "aiko.robots"}


def _modules(package: str) -> set[str]:
    module = __import__(package, fromlist=["__path__"])
    found = {package}
    for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
        found.add(info.name)
    return found


def test_every_module_of_the_documented_packages_has_its_entry():
    assert aiko.__version__
    for page, package in PAGES.items():
        listed = set(re.findall(r"^::: ([\w.]+)$", (ROOT / "docs" / "api" / f"{page}.md").read_text(), re.M))
        missing = sorted(_modules(package) - listed)
        gone = sorted(listed - _modules(package))
        assert not missing, f"docs/api/{page}.md lacks {missing}"
        assert not gone, f"docs/api/{page}.md lists modules that no longer exist: {gone}"
