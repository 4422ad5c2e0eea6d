"""Check, and where missing restore, the links that make ``specguard/`` the namespace.

``specguard/contracts`` is a committed relative link to ``../contracts``, and so on for
each folder that ``package-dir`` in pyproject.toml maps onto a subpackage. With them the
checkout's ``specguard/`` folder is the package as it installs: type checkers, the docs
build and ``python -c "import specguard.contracts"`` read it without setuptools' import
hook. A clone has them; a source distribution does not (setuptools packs files, not
links), so ``tools/check`` runs this first and puts them back. Anything else in a link's
place (a folder, or the small text file git writes where links are off) is reported,
never replaced.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (tomli comes with pytest and mypy there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def layers(root: Path = ROOT) -> dict[str, str]:
    """Each link's name under ``specguard/`` and the folder it points to, from package-dir:
    ``{"contracts": "contracts", ...}``."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix("specguard."): folder for name, folder in mapping.items()
            if name.startswith("specguard.") and "." not in name.removeprefix("specguard.")}


def problems(root: Path = ROOT) -> list[str]:
    """Create the missing links; return what stands in the way of the others."""
    found = []
    for name, folder in layers(root).items():
        link, target = root / "specguard" / name, Path("..") / folder
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if not link.exists() and not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
            continue
        found.append(f"specguard/{name} should be a link to {target.as_posix()} "
                     "(with git: enable core.symlinks and check the file out again)")
    return found


if __name__ == "__main__":
    wrong = problems(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)
    for line in wrong:
        print(f"tools/layer_links.py: {line}", file=sys.stderr)
    sys.exit(1 if wrong else 0)
