"""The reference engine's page: a row per catalogued fault, exit codes and live sessions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specguard import contracts
from specguard._cli import _common as exits
from specguard._cli import run as run_command
from specguard.runner import faults
from specguard.runner.faults import FAULTS, Fault

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE = "engine.md"


@pytest.fixture(scope="module")
def engine_page(pages) -> str:
    """The engine page exactly as the site gets it (its run sessions run now)."""
    return pages.expand_markers((DOCS / PAGE).read_text(encoding="utf-8"), PAGE)


def _row(page: str, name: str) -> str:
    """The fault table's row of ``name``."""
    match = re.search(rf"^\| `{re.escape(name)}` \|.*$", page, re.M)
    assert match, f"fault {name} has no row on the engine page"
    return match.group(0)


def test_engine_page_is_in_the_nav():
    """The site's navigation links the engine page."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config[config.index("\nnav:\n"):]
    assert re.search(rf"^  - [\w ]+: {re.escape(PAGE)}$", nav, re.M)


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_fault_has_a_documented_row(engine_page, name):
    """Each catalogued fault has a row: summary, real bug, rule on its object, unguarded."""
    fault = FAULTS[name]
    row = _row(engine_page, name)
    for text in (fault.summary, fault.origin, fault.unguarded):
        assert text.replace("|", "\\|") in row
    for code in fault.rules:
        assert f"[{code}](rules.md#{code.lower()} " in row
        assert code in contracts.REGISTRY
    assert f" on `{fault.subject}`" in row or f" on [{fault.subject}](contracts/" in row


def test_table_follows_the_catalogue(pages, monkeypatch):
    """A fault added to the catalogue gets a row at the next build; a removed one loses it."""
    added = Fault("made-up-fault", "a fault only this test knows", ("Scheduler.schedule",),
                  "no real bug", "SG101", "ScheduledBatch", "nothing at all")
    catalogue = {**FAULTS, added.name: added}
    del catalogue[faults.STALE_DRAFTS]
    monkeypatch.setattr(pages, "FAULTS", catalogue)
    table = pages.fault_table(PAGE)
    assert "| `made-up-fault` | a fault only this test knows | no real bug |" in table
    assert f"`{faults.STALE_DRAFTS}`" not in table
    assert "[ScheduledBatch](contracts/scheduled-batch.md)" in _row(table, "made-up-fault")


def test_exit_codes_are_the_commands_own(engine_page):
    """The exit-status table lists every code `specguard run` documents, with its meaning."""
    for code, meaning in run_command.EXIT_CODES.items():
        assert f"| `{code}` | {meaning} |" in engine_page


def test_sessions_show_a_step_fault_caught_and_a_silent_one_unguarded(engine_page):
    """The live sessions: SG601 names two steps (exit 3); stale drafts match greedy (exit 0)."""
    sessions = re.findall(r"```console\n(.*?)```", engine_page, re.S)
    assert len(sessions) == 2
    caught, unguarded = sessions
    assert caught.startswith("$ specguard run --requests 4 ")
    assert "--fault skipped-rejection-rollback --contracts strict\n" in caught
    assert "by a contract violation in step 6, checked against step 5" in caught
    assert "SG601 a seq resumes where its previous step left off" in caught
    assert caught.endswith(f"$ echo $?\n{exits.EXIT_VIOLATION}\n")
    assert "--fault stale-drafts --contracts off\n" in unguarded
    assert "oracle: identical (48 tokens)" in unguarded
    assert unguarded.endswith(f"$ echo $?\n{exits.EXIT_OK}\n")
