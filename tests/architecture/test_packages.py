"""The wheel's packages are found in the folders (setup.py), so none can be left out."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("specguard_setup", ROOT / "setup.py")
assert _SPEC is not None and _SPEC.loader is not None
setup_py = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(setup_py)  # defines packages(); setup() runs only as __main__


def package_folders(root: Path) -> dict[str, Path]:
    """Package name → folder: every folder holding an ``__init__.py`` under a folder that
    package-dir maps, found by walking the folders themselves (links are not followed)."""
    found = {}
    for name, folder in setup_py.package_dir(root).items():
        for here, dirs, files in os.walk(root / folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                parts = Path(here).relative_to(root / folder).parts
                found[".".join((name, *parts))] = Path(here)
    return found


def folders_without_init(root: Path) -> list[str]:
    """Folders under the mapped ones that hold modules but no ``__init__.py``: a package
    finder skips them, and their modules would be missing from the wheel."""
    wrong = []
    for folder in setup_py.package_dir(root).values():
        for here, dirs, files in os.walk(root / folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if any(f.endswith(".py") for f in files) and "__init__.py" not in files:
                wrong.append(Path(here).relative_to(root).as_posix())
    return wrong


def test_the_wheel_packages_are_every_package_folder():
    """What setup.py hands setuptools is exactly the package folders, each once."""
    found = setup_py.packages()
    assert found == sorted(package_folders(ROOT)) and len(found) == len(set(found))
    assert {"specguard", "specguard._cli", "specguard.contracts._core"} <= set(found)


def test_every_folder_of_modules_is_a_package():
    """No folder of modules lacks its ``__init__.py``."""
    assert folders_without_init(ROOT) == []


def _copy(root: Path) -> None:
    """pyproject.toml and the mapped folders: what the package list is made from."""
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for folder in setup_py.package_dir(ROOT).values():
        shutil.copytree(ROOT / folder, root / folder, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))


def test_a_new_subpackage_is_found_and_a_folder_without_init_is_named(tmp_path):
    """A subpackage added under a layer is in the list with nothing else to edit; a
    folder of modules whose ``__init__.py`` was forgotten is named by the check."""
    _copy(tmp_path)
    engine = tmp_path / "adapters" / "engines" / "another_engine"
    engine.mkdir(parents=True, exist_ok=False)
    (engine / "__init__.py").write_text("")
    (engine / "view.py").write_text("")
    (engine.parent / "__init__.py").write_text("")
    assert {"specguard.adapters.engines", "specguard.adapters.engines.another_engine"} <= set(
        setup_py.packages(tmp_path))
    assert setup_py.packages(tmp_path) == sorted(package_folders(tmp_path))
    assert folders_without_init(tmp_path) == []
    (engine / "__init__.py").unlink()
    assert "specguard.adapters.engines.another_engine" not in setup_py.packages(tmp_path)
    assert folders_without_init(tmp_path) == ["adapters/engines/another_engine"]
