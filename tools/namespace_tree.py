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
    """Recreate the link tree and return the folder to put on a tool's search path."""
    tree = root / "build" / "namespace"
    package = tree / "specguard"
    shutil.rmtree(tree, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in sorted((root / "specguard").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for layer in LAYERS:
        (package / layer).symlink_to(root / layer, target_is_directory=True)
    return tree


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT))
