"""The layers import one way only, and always through the ``specguard`` namespace."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("contracts", "adapters", "runner", "benchmarks")
# What each layer may import from the others: knowledge flows one way.
ALLOWED = {
    "contracts": set(),
    "adapters": {"contracts"},
    "runner": {"contracts", "adapters"},
    "benchmarks": {"contracts", "adapters", "runner"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "specguard":
                found += [(node.lineno, f"specguard.{alias.name}") for alias in node.names]
    return found


def _python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_the_layers_below_it(layer):
    """contracts imports no other layer, adapters only contracts, runner no benchmarks."""
    wrong = []
    for path in _python_files(layer):
        for line, module in _imports(path):
            parts = module.split(".")
            other = parts[1] if parts[0] == "specguard" and len(parts) > 1 else None
            if other in LAYERS and other != layer and other not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert wrong == []


def test_nothing_imports_a_layer_by_its_bare_folder_name():
    """`import contracts` would load a second copy (or someone else's package)."""
    folders = (*LAYERS, "specguard", "tests", "docs", "tools")
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}"
             for path in _python_files(*folders)
             for line, module in _imports(path) if module.split(".")[0] in LAYERS]
    assert wrong == []


def test_layering_check_sees_a_wrong_import(tmp_path):
    """The scan is not vacuous: an upward import in a file is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("from specguard.runner import engine\nimport contracts\n")
    assert _imports(sample) == [(1, "specguard.runner"), (2, "contracts")]
