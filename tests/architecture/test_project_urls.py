"""The wheel's Project-URLs follow where the docs are published, and name nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("specguard_setup", ROOT / "setup.py")
assert _SPEC is not None and _SPEC.loader is not None
setup_py = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(setup_py)


@pytest.mark.parametrize("site", ["https://docs.example.org/specguard",
                                  "https://docs.example.org/specguard/"])
def test_a_release_build_names_its_docs_changelog_and_rules(site):
    assert setup_py.project_urls({"SPECGUARD_SITE_URL": site}) == {
        "Documentation": "https://docs.example.org/specguard/",
        "Changelog": "https://docs.example.org/specguard/changelog/",
        "Rules": "https://docs.example.org/specguard/rules/"}


@pytest.mark.parametrize("site", ["", "  ", "docs/", "127.0.0.1:8000"])
def test_a_build_without_a_published_site_names_no_url(site):
    assert setup_py.project_urls({"SPECGUARD_SITE_URL": site}) == {}
    assert setup_py.project_urls({}) == {}


def test_the_changelog_page_of_the_site_is_the_repository_changelog():
    page = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    assert page.strip() == '--8<-- "CHANGELOG.md"'
    assert (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").startswith("# Changelog")
