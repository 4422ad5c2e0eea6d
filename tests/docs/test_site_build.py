"""The real site, built strictly by `specguard docs` (the samples run in test_code_samples)."""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
from pathlib import Path

import pytest

from specguard import cli
from specguard._cli import docs as docs_command
from specguard.adapters import examples

ROOT = Path(__file__).resolve().parents[2]
def test_find_config_walks_up_from_a_subfolder(tmp_path):
    """`specguard docs` finds mkdocs.yml from any folder of a checkout."""
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert docs_command.find_config(deep) == tmp_path / "mkdocs.yml"


def test_build_and_serve_commands_are_strict(tmp_path):
    """Both build and serve run mkdocs strictly, on the config found."""
    parser = argparse.ArgumentParser()
    docs_command.add_arguments(parser)
    config = tmp_path / "mkdocs.yml"
    build = docs_command.mkdocs_command(parser.parse_args(["--site-dir", "out"]), config)
    serve = docs_command.mkdocs_command(parser.parse_args(["--serve", "--dev-addr", "h:1"]), config)
    assert build[2:4] == ["mkdocs", "build"] and "--strict" in build
    assert build[build.index("--site-dir") + 1] == str(Path("out").resolve())
    assert serve[2:4] == ["mkdocs", "serve"] and "--strict" in serve
    assert serve[serve.index("--dev-addr") + 1] == "h:1"


def test_missing_config_is_a_clear_error(tmp_path, capsys):
    """Pointing `specguard docs` at a missing config exits 2 with a message, no traceback."""
    assert cli.main(["docs", "--config-file", str(tmp_path / "absent.yml")]) == 2
    assert "no mkdocs.yml" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed")
def test_specguard_docs_builds_the_site_strictly(tmp_path):
    """`specguard docs` builds every page with no warning, example messages included."""
    site = tmp_path / "site"
    assert cli.main(["docs", "--site-dir", str(site)]) == 0
    for page in ("index.html", "why/index.html", "step/index.html", "rules/index.html",
                 "contracts/scheduled-batch/index.html", "contracts/drafter-output/index.html",
                 "reference/contracts/index.html", "performance/index.html",
                 "engine/index.html"):
        assert (site / page).is_file(), page
    rules = (site / "rules" / "index.html").read_text(encoding="utf-8")
    message = examples.example_message("SG101").splitlines()[1].strip()
    assert html.escape(message, quote=False) in _text(rules)
    why = _text((site / "why" / "index.html").read_text(encoding="utf-8"))
    assert "seq 127 at batch position 127: decode seq without a draft row" in why


def _text(page: str) -> str:
    """The page's text with markup (syntax-highlighting spans) removed."""
    return re.sub(r"<[^>]+>", "", page)
