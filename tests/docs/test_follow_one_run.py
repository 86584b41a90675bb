"""docs/design.md "Follow one run" names each hop as ``file:function``: every one of them must exist, so the map
cannot go stale silently when a function is renamed or moved."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOP = re.compile(r"`([\w/]+\.py):\s*([\w.]+)`")


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _defined(path: Path) -> set[str]:
    """Top-level functions and classes, and Class.method, of a module."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            methods = (item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef))
            names.update(f"{node.name}.{item.name}" for item in methods)
    return names


def test_every_hop_of_follow_one_run_exists():
    section = _section((ROOT / "docs/design.md").read_text(), "Follow one run")
    hops = HOP.findall(section)
    assert len(hops) > 30
    missing = [f"{path}:{name}" for path, name in hops if name not in _defined(ROOT / path)]
    assert not missing, f"docs/design.md names hops that do not exist: {missing}"
