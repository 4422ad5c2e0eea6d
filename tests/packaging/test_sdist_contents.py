"""The source distribution can test, document and rebuild what it ships."""

from __future__ import annotations

import tarfile
import zipfile

import pytest
from conftest import ROOT, build_wheel


@pytest.mark.parametrize("path", [
    "LICENSE", "DESCRIPTION.md", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in",
    "mkdocs.yml",
    "constraints/ci.txt", "tools/check", "tools/typecheck", "tools/layer_links.py",
    "tests/conftest.py", "tests/packaging/test_sdist_contents.py", "tests/strategies/cases.py",
    "docs/index.md", "docs/first-contract.md", "docs/_hooks/generate.py",
    "docs/stylesheets/specguard.css", "docs/javascripts/vendor/mermaid-11.17.2.min.js",
    "docs/javascripts/vendor/mermaid-LICENSE.txt",
])
def test_sdist_carries_tests_docs_constraints_and_tools(sdist_names, path):
    """Everything needed to run the tests and build the docs is in the sdist."""
    assert path in sdist_names


def test_sdist_carries_every_tracked_test_and_doc(sdist_names):
    """No test module or docs page of the checkout is left out."""
    wanted = {p.relative_to(ROOT).as_posix()
              for folder in ("tests", "docs") for p in (ROOT / folder).rglob("*")
              if p.is_file() and not any(part.startswith((".", "__pycache__"))
                                         for part in p.relative_to(ROOT).parts)}
    assert sorted(wanted - set(sdist_names)) == []


def test_sdist_leaves_out_caches_and_builds(sdist_names):
    """No bytecode, environment or build output travels in the sdist."""
    assert not [n for n in sdist_names if "__pycache__" in n or n.endswith(".pyc")
                or n.startswith((".venv/", "build/", "site/"))]


def test_a_wheel_built_from_the_sdist_equals_the_wheel(sdist, wheel_names, tmp_path):
    """Unpacked and built again, the sdist yields a wheel with the very same files."""
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    unpacked = next(tmp_path.iterdir())
    rebuilt = build_wheel(unpacked, tmp_path / "wheel")
    with zipfile.ZipFile(rebuilt) as archive:
        assert sorted(archive.namelist()) == sorted(wheel_names)
