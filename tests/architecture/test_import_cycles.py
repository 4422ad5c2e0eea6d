"""No import cycles among the adapters' modules, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "specguard." + ".".join(parts)


def _graph(layer: str) -> dict[str, set[str]]:
    """Module → the modules of the same layer it imports (anywhere in the file)."""
    modules = {_module_name(p): p for p in (ROOT / layer).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                candidates = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            targets |= {c for c in candidates if c in modules and c != name}
        graph[name] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (package __init__ edges aside), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if node.startswith(target + "."):
                continue  # a module importing its own package: the package is loading it
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_adapters_have_no_import_cycle():
    """Writing a snapshot imports nothing that reads one back (no _build → step_tracker loop)."""
    # The package itself imports every module: edges into it say nothing about order.
    graph = {name: targets - {"specguard.adapters"} for name, targets in _graph("adapters").items()}
    assert _cycle(graph) is None


def test_cycle_finder_sees_a_cycle():
    """The search is not vacuous: a three-module loop is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
