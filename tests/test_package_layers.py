"""The packages of isthmus import each other one way only: no cycle between top-level packages
(a cycle would tie the live manager and the server into one unit that cannot load alone)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "isthmus"


def package_imports() -> dict[str, set[str]]:
    """For each top-level package, the other top-level packages it imports (lazy imports included)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).parts
        pkg = parts[0] if len(parts) > 1 else "(top)"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                bits = name.split(".")
                if bits[0] == "isthmus" and len(bits) > 1 and bits[1] != pkg:
                    edges[pkg].add(bits[1])
    return edges


def cycles(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The pairs (a, b) where a imports b and b reaches a back."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    return [(a, b) for a in sorted(edges) for b in sorted(edges[a]) if a in reach(b)]


def test_no_import_cycle_between_packages() -> None:
    edges = package_imports()
    assert edges["server"] and edges["live"], "the scan found no imports: the source layout moved"
    assert cycles(edges) == []


def test_the_scan_finds_a_cycle_when_there_is_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [("a", "b"), ("b", "c"), ("c", "a")]


def test_core_packages_do_not_import_the_outer_ones() -> None:
    edges = package_imports()
    outer = {"cli", "server", "live", "experiments"}
    for core in ("model", "policies", "engine", "sim", "store", "backends", "workloads", "metrics"):
        assert not edges.get(core, set()) & outer, (core, sorted(edges[core] & outer))
