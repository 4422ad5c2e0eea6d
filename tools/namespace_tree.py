"""Lay out the ``specguard`` namespace as it installs, as a tree of links under build/.

The build maps the repository's folders onto subpackages (``contracts/`` becomes
``specguard.contracts``, see ``package-dir`` in pyproject.toml). Tools that find modules
by walking directories rather than importing them (mypy, griffe for the docs) cannot
follow that mapping, so they read this tree instead: ``build/namespace/specguard/`` holds
links to ``specguard/``'s files and to each layer's folder. Rebuilt on every call; cheap.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("contracts", "adapters", "runner", "benchmarks")
TREE = ROOT / "build" / "namespace"


def build(root: Path = ROOT) -> Path:
    """Lay out the link tree if it is not already right; return the folder to search.

    A tree that already holds exactly the right links is left alone, so two builds that
    run at once (the docs tests build the site in parallel workers) never see it removed
    under them.
    """
    tree = root / "build" / "namespace"
    package = tree / "specguard"
    links = _links(root)
    if _holds(package, links):
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    package.mkdir(parents=True)
    for name, target in links.items():
        (package / name).symlink_to(target, target_is_directory=target.is_dir())
    return tree


def _links(root: Path) -> dict[str, Path]:
    """Each entry of the namespace package and what it links to."""
    links = {entry.name: entry for entry in sorted((root / "specguard").iterdir())
             if entry.name != "__pycache__"}
    links.update({layer: root / layer for layer in LAYERS})
    return links


def _holds(package: Path, links: dict[str, Path]) -> bool:
    """True when ``package`` holds exactly ``links``, each pointing where it should."""
    if not package.is_dir():
        return False
    present = {entry.name: entry for entry in package.iterdir()}
    return present.keys() == links.keys() and all(
        entry.is_symlink() and entry.readlink() == links[name]
        for name, entry in present.items())


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT))
