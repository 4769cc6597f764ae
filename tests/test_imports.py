"""The import drawing of xdrl: no circle, every arrow down the layers below, the leaves import
only leaves, and the light entry points import no torch in a fresh interpreter. Read from source
with ast (function-level imports included), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LEAVES = {
    "xdrl.config.types": set(),
    "xdrl.config.errors": set(),
    "xdrl.config.nested": set(),
    "xdrl.config.renames": set(),
    "xdrl.config.settings": {"xdrl.config.types"},
    "xdrl.config.signatures": {"xdrl.config.types"},
    "xdrl.lean.policy_types": set(),
    "xdrl.run.layout": set(),
}
# The layers, bottom first: a module imports only modules of its own layer or below (the most
# specific prefix names a module's layer). The config's leaves and the run dir's layout sit at the
# bottom; the config check (which reads the env factory), the training wiring and the run's
# lifecycle sit above what they put together.
LAYERS = [
    ["xdrl.config", "xdrl.run.layout", "xdrl.lean.policy_types"],
    ["xdrl.envs"],
    ["xdrl.lean"],
    ["xdrl.algorithms", "xdrl.config.check"],
    ["xdrl.training"],
    ["xdrl.trainer_hooks"],
    ["xdrl.training.build"],
    ["xdrl.policy", "xdrl.run"],
    ["xdrl.run.lifecycle"],
    ["xdrl.pareto"],
    ["xdrl.report"],
    ["xdrl.sweep"],
    ["xdrl.cli", "xdrl"],
]
HEAVY = ("torch", "torchrl", "tensordict", "wandb", "optuna", "ray")


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


def _layer(module: str) -> int:
    """The layer of ``module``: that of the longest prefix in LAYERS naming it."""
    found = [
        (len(prefix), i)
        for i, layer in enumerate(LAYERS)
        for prefix in layer
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert found, f"{module} is in no layer of LAYERS"
    return max(found)[1]


def test_no_import_cycles() -> None:
    graph = _import_graph()
    cycles = [c for c in (_cycle_from(m, graph) for m in sorted(graph)) if c]
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_leaf_modules_import_only_leaves() -> None:
    graph = _import_graph()
    assert {leaf: graph[leaf] for leaf in LEAVES} == LEAVES


def test_every_arrow_points_down_the_layers() -> None:
    graph = _import_graph()
    up = [
        f"{m} (layer {_layer(m)}) -> {t} (layer {_layer(t)})"
        for m, targets in sorted(graph.items())
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]
    assert not up, "\n".join(up)


def test_lean_imports_nothing_above_it() -> None:
    """TorchRL's pieces redone for speed stand on the envs and the config's leaves alone."""
    graph = _import_graph()
    allowed = ("xdrl.lean", "xdrl.envs", *LEAVES)
    wrong = {
        m: sorted(t for t in targets if not t.startswith(allowed))
        for m, targets in graph.items()
        if m.startswith("xdrl.lean")
    }
    assert {m: t for m, t in wrong.items() if t} == {}


def test_every_package_says_what_it_holds() -> None:
    """Each package's ``__init__.py`` starts with a docstring."""
    missing = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "xdrl").rglob("__init__.py"))
        if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not missing


_HELP = "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import xdrl", id="import xdrl"),
        pytest.param("import xdrl.cli", id="xdrl-train's entry point"),
        pytest.param("import xdrl.config.check", id="the config check"),
        pytest.param("import xdrl.sweep.summary", id="the sweep callback Hydra instantiates"),
        pytest.param(f"from xdrl.policy.eval_cli import main\n{_HELP}", id="xdrl-eval --help"),
        pytest.param(f"from xdrl.policy.export_cli import main\n{_HELP}", id="xdrl-export --help"),
        pytest.param(f"from xdrl.report.cli import main\n{_HELP}", id="xdrl-report --help"),
    ],
)
def test_a_fresh_interpreter_imports_no_heavy_library(code: str) -> None:
    check = f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
