"""The import graph of src/tokenward has no cycle, between modules or between packages.

Imports inside functions count (a lazy import is still a dependency). The run-time graph
leaves out those under ``TYPE_CHECKING``; the typed graph counts them too, since a type a
module names is a dependency of its design even when it costs nothing at run time. The
layers themselves are declared in pyproject.toml and checked by ``lint-imports`` in
scripts/test.sh; this test adds what a layers contract cannot see: two modules of one
package importing each other, and imports made for types only.
"""

from __future__ import annotations

import grimp

def _cycles(graph: grimp.ImportGraph, nodes: set[str], edges) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges(root))))]
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
                    work.append((child, iter(sorted(edges(child)))))
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


def _graph(types: bool = False) -> grimp.ImportGraph:
    """The run-time import graph, or with ``types`` the one that counts TYPE_CHECKING imports."""
    # no cache: a stale one (files moved by a merge) showed imports the tree no longer has
    return grimp.build_graph("tokenward", exclude_type_checking_imports=not types, cache_dir=None)


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_two_modules_import_each_other_in_a_cycle():
    graph = _graph()
    modules = set(graph.modules)
    assert _cycles(graph, modules, graph.find_modules_directly_imported_by) == []


def _package_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    packages = {_package(m) for m in graph.modules}
    between: dict[str, set[str]] = {p: set() for p in packages}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if _package(imported) != _package(module):
                between[_package(module)].add(_package(imported))
    return _cycles(graph, packages, lambda p: between[p])


def test_no_two_packages_import_each_other_in_a_cycle():
    assert _package_cycles(_graph()) == []


def test_no_two_packages_import_each_other_in_a_cycle_counting_type_imports():
    assert _package_cycles(_graph(types=True)) == []


def test_no_two_modules_import_each_other_in_a_cycle_counting_type_imports():
    graph = _graph(types=True)
    assert _cycles(graph, set(graph.modules), graph.find_modules_directly_imported_by) == []


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(None, set(edges), lambda n: edges[n]) == [["a", "b", "c"]]
