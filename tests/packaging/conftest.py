"""The distributions, built once per session from a clean copy of the source tree.

The copy keeps the build from reading stale files of an earlier build (setuptools'
``build/lib``) and from writing its metadata into the checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What a checkout holds that is not source: environments, caches, build output.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "site", "dist", "*.egg-info", "__pycache__", ".hypothesis",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", "snapshots")


def build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of ``source`` (no dependencies, no isolation) into ``out``."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True, text=True, timeout=600)
    return next(out.glob("*.whl"))


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout's source files, as a fresh clone would have them."""
    copy = tmp_path_factory.mktemp("source") / "specguard"
    shutil.copytree(ROOT, copy, ignore=_NOT_SOURCE, symlinks=True)
    return copy


@pytest.fixture(scope="session")
def wheel(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built the way a release is."""
    return build_wheel(source_tree, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def wheel_names(wheel: Path) -> list[str]:
    """Every path in the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.fixture(scope="session")
def sdist(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source distribution, built through setuptools' PEP 517 backend."""
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run([sys.executable, "-c",
                    "import sys; from setuptools import build_meta; "
                    "print(build_meta.build_sdist(sys.argv[1]))", str(out)],
                   cwd=source_tree, check=True, capture_output=True, text=True, timeout=600)
    return next(out.glob("*.tar.gz"))


@pytest.fixture(scope="session")
def sdist_names(sdist: Path) -> list[str]:
    """Every path in the sdist, without its top folder (``specguard-X.Y.Z/``)."""
    with tarfile.open(sdist) as archive:
        return [name.partition("/")[2] for name in archive.getnames()]
