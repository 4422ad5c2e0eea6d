"""The layers import one way only, and always through the ``specguard`` namespace.

From the bottom: contracts, adapters, runner, benchmarks, and the command line on top
(``specguard/cli.py``, ``python -m specguard`` and the subcommands in ``specguard/_cli/``),
which knows every layer and which nothing imports. ``specguard/__init__.py`` and the
pytest entry point sit beside the layers: they may read contracts and adapters only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("contracts", "adapters", "runner", "benchmarks")
#: The files of each layer (folders are walked; links under specguard/ are not followed).
FILES = {
    "contracts": ("contracts",),
    "adapters": ("adapters",),
    "runner": ("runner",),
    "benchmarks": ("benchmarks",),
    "cli": ("specguard/cli.py", "specguard/__main__.py", "specguard/_cli"),
    "root": ("specguard/__init__.py", "specguard/_pytest_entry.py"),
}
# What each layer may import from the others: knowledge flows one way.
ALLOWED = {
    "contracts": set(),
    "adapters": {"contracts"},
    "runner": {"contracts", "adapters"},
    "benchmarks": {"contracts", "adapters", "runner"},
    "cli": {"contracts", "adapters", "runner", "benchmarks"},
    "root": {"contracts", "adapters"},
}
#: The layer of ``specguard.<name>``: the command line is both ``cli`` and ``_cli``.
LAYER_OF = {"contracts": "contracts", "adapters": "adapters", "runner": "runner",
            "benchmarks": "benchmarks", "cli": "cli", "_cli": "cli", "__main__": "cli"}


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


def _python_files(*entries: str) -> list[Path]:
    """Every ``.py`` file of ``entries`` (files, or folders walked without their links)."""
    files = []
    for entry in entries:
        path = ROOT / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    return LAYER_OF.get(parts[1]) if parts[0] == "specguard" and len(parts) > 1 else None


def _wrong_imports(layer: str, files: list[Path]) -> list[str]:
    wrong = []
    for path in files:
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        for line, module in _imports(path):
            other = _layer_of(module)
            if other is not None and other != layer and other not in ALLOWED[layer]:
                wrong.append(f"{name}:{line} imports {module}")
    return wrong


@pytest.mark.parametrize("layer", list(FILES))
def test_layer_imports_only_the_layers_below_it(layer):
    """contracts imports no other layer, adapters only contracts, runner no benchmarks,
    and nothing but the command line itself imports the command line."""
    files = _python_files(*FILES[layer])
    assert files
    assert _wrong_imports(layer, files) == []


def test_every_module_of_the_package_belongs_to_a_layer():
    """No file escapes the scan: every module under specguard/ (links aside) is listed."""
    listed = {p for entries in FILES.values() for p in _python_files(*entries)}
    package = set(_python_files("specguard"))
    assert sorted(str(p.relative_to(ROOT)) for p in package - listed) == []


def test_the_runner_leaves_the_terminal_to_the_command_line():
    """No argparse, tqdm or print in the runner: the CLI parses, draws and prints."""
    wrong = []
    for path in _python_files("runner"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrong += [f"{path.relative_to(ROOT)}:{line} imports {module}"
                  for line, module in _imports(path)
                  if module.split(".")[0] in ("argparse", "tqdm")]
        wrong += [f"{path.relative_to(ROOT)}:{node.lineno} prints"
                  for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Name) and node.func.id == "print"]
    assert wrong == []


def test_nothing_imports_a_layer_by_its_bare_folder_name():
    """`import contracts` would load a second copy (or someone else's package)."""
    folders = (*FOLDERS, "specguard", "tests", "docs", "tools")
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}"
             for path in _python_files(*folders)
             for line, module in _imports(path) if module.split(".")[0] in FOLDERS]
    assert wrong == []


def test_layering_check_sees_a_wrong_import(tmp_path):
    """The scan is not vacuous: an upward import in a file is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("from specguard.runner import engine\nimport contracts\n")
    assert _imports(sample) == [(1, "specguard.runner"), (2, "contracts")]


@pytest.mark.parametrize("source", [
    "from specguard.cli import main\n",
    "from specguard import cli\n",
    "import specguard._cli.run\n",
    "from specguard._cli.run import EXIT_CODES\n",
])
def test_an_import_of_the_command_line_from_below_is_found(tmp_path, source):
    """A benchmark (or any layer) importing the command line, under any spelling, is an
    upward arrow the scan reports."""
    sample = tmp_path / "device_check.py"
    sample.write_text(source)
    assert len(_wrong_imports("benchmarks", [sample])) == 1
    assert _wrong_imports("cli", [sample]) == []
