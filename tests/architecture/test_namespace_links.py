"""``specguard/`` is the namespace as it installs: one link per layer, read once by tools."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("layer_links", ROOT / "tools" / "layer_links.py")
assert _SPEC is not None and _SPEC.loader is not None
layer_links = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(layer_links)

LAYERS = ("contracts", "adapters", "runner", "benchmarks")


def test_package_dir_maps_the_four_layers():
    """The links follow package-dir in pyproject.toml: one per layer, named as its folder."""
    assert layer_links.layers() == {layer: layer for layer in LAYERS}


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_has_a_relative_link(layer):
    """``specguard/<layer>`` is a committed link to ``../<layer>`` (relative, so it holds
    in any clone and in the copies the packaging tests build from)."""
    link = ROOT / "specguard" / layer
    assert link.is_symlink()
    assert Path(os.readlink(link)) == Path("..") / layer
    assert link.resolve() == (ROOT / layer).resolve()


def test_links_are_all_right_in_this_checkout():
    """tools/layer_links.py finds nothing to report (and so changed nothing)."""
    assert layer_links.problems() == []


def _layout(root: Path) -> None:
    """A minimal checkout: pyproject.toml, specguard/ and the layers' folders, no links."""
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "specguard", root / "specguard", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", *LAYERS))
    for layer in LAYERS:
        shutil.copytree(ROOT / layer, root / layer, ignore=shutil.ignore_patterns("__pycache__"))


def test_missing_links_are_restored_and_anything_else_is_reported(tmp_path):
    """As in an unpacked sdist: the links are created; a file in a link's place (what git
    writes with core.symlinks off) is named, and left alone."""
    _layout(tmp_path)
    (tmp_path / "specguard" / "runner").write_text("../runner")
    found = layer_links.problems(tmp_path)
    assert found == ["specguard/runner should be a link to ../runner (with git: enable "
                     "core.symlinks and check the file out again)"]
    assert (tmp_path / "specguard" / "runner").read_text() == "../runner"
    for layer in ("contracts", "adapters", "benchmarks"):
        assert os.readlink(tmp_path / "specguard" / layer) == os.path.join("..", layer)
    (tmp_path / "specguard" / "runner").unlink()
    assert layer_links.problems(tmp_path) == []
    assert layer_links.problems(tmp_path) == []  # a second run changes nothing


def test_a_bare_checkout_imports_itself(tmp_path):
    """From the root of a copy, ``import specguard.contracts`` loads the copy's files
    through its links: no install, no import hook (this environment's editable install
    points at another folder, and is not what answers)."""
    _layout(tmp_path)
    assert layer_links.problems(tmp_path) == []
    code = ("import specguard.adapters, specguard.contracts; "
            "print(specguard.contracts.__file__); print(specguard.adapters.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(tmp_path / "specguard" / "contracts" / "__init__.py"),
        str(tmp_path / "specguard" / "adapters" / "__init__.py")]


def test_ruff_does_not_lint_through_the_links():
    """ruff reads each layer's files once, in their own folders."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    done = subprocess.run([ruff, "check", "--show-files", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    files = [Path(line.strip()) for line in done.stdout.splitlines() if line.strip()]
    through = [str(p) for p in files
               if p.is_relative_to(ROOT / "specguard") and len(p.relative_to(ROOT).parts) > 1
               and p.relative_to(ROOT).parts[1] in LAYERS]
    assert files and through == []
    assert ROOT / "contracts" / "__init__.py" in files
