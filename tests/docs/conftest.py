"""Load the docs generator the way the mkdocs hook does: from docs/_hooks, by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOKS = DOCS / "_hooks"


def load_hook_module(name: str) -> ModuleType:
    """Import ``docs/_hooks/<name>.py`` once per process, under its own name."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def pages() -> ModuleType:
    """The page generator behind the docs site (docs/_hooks/docs_pages.py)."""
    return load_hook_module("docs_pages")


@pytest.fixture(scope="session")
def catalogue(pages: ModuleType) -> str:
    """The rule catalogue exactly as the rules page gets it."""
    return pages.expand_markers((DOCS / "rules.md").read_text(encoding="utf-8"), "rules.md")
