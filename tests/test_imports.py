"""Arrows point down: no two xdrl modules import each other, and the leaf modules (config types,
settings, errors) import nothing of xdrl but leaves. Read from source with ast (function-level
imports included), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

LEAVES = {
    "xdrl.config_types": set(),
    "xdrl.errors": set(),
    "xdrl.policy_types": set(),
    "xdrl.settings": {"xdrl.config_types"},
}
# (module, package it must not import): arrows that would point up
UPWARD = [
    ("xdrl.collector", "xdrl.algorithms"),  # the collector knows policies by xdrl.policy_types
    ("xdrl.envs", "xdrl.config_check"),  # the check reads the env factory, never the reverse
    ("xdrl.envs", "xdrl.collector"),  # the collector steps envs; evaluation builders pick its path
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every xdrl module and the xdrl modules it imports."""
    paths = {_module_name(p): p for p in (REPO / "xdrl").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    found = next((c for c in (f"{base}.{alias.name}", base) if c in paths), None)
                    targets |= {found} if found else set()
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in paths}
        graph[name] = targets - {name}
    return graph


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, if there is one (depth-first)."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in graph[node]:
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_import_cycles() -> None:
    graph = _import_graph()
    cycles = [c for c in (_cycle_from(m, graph) for m in sorted(graph)) if c]
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_leaf_modules_import_only_leaves() -> None:
    graph = _import_graph()
    assert {leaf: graph[leaf] for leaf in LEAVES} == LEAVES


def test_no_upward_arrows() -> None:
    graph = _import_graph()
    wrong = [(m, t) for m, package in UPWARD for t in graph[m] if t.startswith(package)]
    assert not wrong
