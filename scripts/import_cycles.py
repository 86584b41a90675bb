#!/usr/bin/env python3
"""Prints the import graph's circles: every strongly connected component of two or more modules of ``aiko``,
``sim`` and ``firmware_protocol`` (grimp's graph, the one import-linter checks: imports inside functions and under
``TYPE_CHECKING`` count, a reader has to untangle them too). Exit status 1 if there is one that is not listed in
``KNOWN`` below, 0 otherwise; ``make lint`` runs it. The contract ``acyclic_siblings`` in ``pyproject.toml`` keeps
them from coming back; this script is the whole-graph view (a circle through a package's ``__init__`` included).

Usage: python scripts/import_cycles.py [--json]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping

import grimp

PACKAGES = ("aiko", "sim", "firmware_protocol")
KNOWN: dict[frozenset[str], str] = {
    frozenset({"sim.cosserat.multirod", "sim.cosserat.pair_geometry"}): "cut on the perf branch (issue 27)",
}


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of modules): components of two or more nodes."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    circles = strongly_connected(edges)
    unknown = [c for c in circles if frozenset(c) not in KNOWN]
    if "--json" in argv:
        print(json.dumps({"modules": len(edges), "imports": sum(map(len, edges.values())), "circles": circles}))
    else:
        print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports between them, {len(circles)} circle(s)")
        for circle in circles:
            note = KNOWN.get(frozenset(circle), "NEW")
            links = [f"{a} -> {b}" for a in circle for b in sorted(edges[a]) if b in circle]
            print(f"  circle ({note}): " + "; ".join(links))
    gone = [", ".join(sorted(k)) for k in KNOWN if list(sorted(k)) not in circles]
    for known in gone:
        print(f"  note: the known circle {known} is gone: remove it from KNOWN in {__file__}")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
