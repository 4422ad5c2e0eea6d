"""The Conformance page: engine × version × scenario, read from the corpus files."""

from __future__ import annotations

import re
from pathlib import Path

from specguard.adapters.corpus import Corpus, Event, Expected, corpus_files, write_corpus
from tests.docs.conftest import load_hook_module

ROOT = Path(__file__).resolve().parents[2]
PAGE = "conformance.md"


def _tables(root: Path | None = None) -> str:
    return load_hook_module("conformance_page").conformance_tables(
        PAGE, str(root) if root else None)


def test_conformance_page_is_in_the_nav_and_expands_its_marker(pages):
    """mkdocs.yml links the page; its marker becomes the generated tables."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(rf"^  - Conformance: {PAGE}$", config[config.index("\nnav:\n"):], re.M)
    text = pages.expand_markers((ROOT / "docs" / PAGE).read_text(encoding="utf-8"), PAGE)
    assert "specguard:conformance" not in text and "## ATOM" in text


def test_every_atom_corpus_file_is_a_cell_with_its_expected_result():
    """One row per scenario, one column per commit, oldest first; buggy cells name the rule."""
    tables = _tables()
    files = list(corpus_files(load_hook_module("conformance_page").CORPUS / "atom"))
    assert f"{len(files)} recorded runs: 20 scenarios × 4 versions." in tables
    assert "| `pd-remote-joins-running` |" + " 0 violations |" * 4 in tables
    header = next(line for line in tables.splitlines() if line.startswith("| scenario | `"))
    assert re.findall(r"`(\w+)`", header) == ["80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"]
    assert ("| `partial-prefill-requeue` | **SG101** seq 2, position 0 | 0 violations | "
            "0 violations | 0 violations |") in tables
    assert "| `block-size-4-k4` |" + " **SG110** seq 1, position 1 |" * 4 in tables


def test_vllm_pd_first_decode_is_a_cell_for_every_version():
    """vLLM × version × pd-first-decode: recorded for each release, clean; its async runs
    where async scheduling supports drafts (0.11.1 on)."""
    tables = _tables()
    vllm = tables[tables.index("## vLLM"):]
    header = next(line for line in vllm.splitlines() if line.startswith("| scenario | `"))
    assert re.findall(r"`([\d.]+)`", header) == ["0.11.0", "0.11.1", "0.17.1", "0.21.0",
                                                 "0.24.0", "0.29.0", "0.33.0"]
    assert "| `pd-first-decode` |" + " 0 violations |" * 7 in vllm
    for scenario in ("pd-first-decode-async", "pd-async-empty-steps"):
        assert f"| `{scenario}` | not recorded |" + " 0 violations |" * 6 in vllm


def test_a_new_engine_folder_shows_up_without_a_change(tmp_path):
    """Any engine recorded in the corpus format gets its own section (vLLM's, say)."""
    folder = tmp_path / "vllm" / "0.11.0"
    folder.mkdir(parents=True)
    write_corpus(folder / "async-scheduling.json", Corpus(
        engine="vllm", engine_version="0.11.0", scenario="async-scheduling",
        description="one step", config={}, events=[Event(event="schedule", fields={})],
        expect=[Expected(code="SG603", seq_id="r1", position=0)]))
    tables = _tables(tmp_path)
    assert "## vLLM" in tables
    assert "| `async-scheduling` | **SG603** seq r1, position 0 |" in tables
