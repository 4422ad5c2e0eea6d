"""Every Python sample in README.md, DESCRIPTION.md and docs/ runs, top to bottom.

The samples of one page run in order in one namespace (a later sample may use what an
earlier one built), in a scratch working directory. A sample that cannot run on its own
(it needs an engine's live objects, or a file a violation wrote) carries a marker on the
line just above its fence, with the reason::

    <!-- docs-test: skip (needs ATOM's scheduler and model runner) -->

Such a sample is still compiled. Skips are kept rare: a test counts them.
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "DESCRIPTION.md",
         *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]
_FENCE = re.compile(
    r"(?:^<!-- docs-test: skip \((?P<reason>[^)]*)\) -->\n)?^```python\n(?P<code>.*?)^```",
    re.M | re.S)
_SKIP_MARKER = re.compile(r"docs-test:\s*skip")
#: The most samples that may be skipped, over all pages.
MAX_SKIPPED = 8  # the ATOM and vLLM guides hold five that need a live engine (MRV2 one)


@dataclass(frozen=True)
class Sample:
    """One fenced Python sample: its code, where it starts, and why it is skipped (if so)."""

    code: str
    line: int
    skip: str | None


def samples(page: Path) -> list[Sample]:
    """The Python samples of a page, in order."""
    text = page.read_text(encoding="utf-8")
    return [Sample(m["code"], text.count("\n", 0, m.start("code")) + 1, m["reason"])
            for m in _FENCE.finditer(text)]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", [p for p in PAGES if samples(p)], ids=_name)
def test_every_sample_of_the_page_runs(page, tmp_path, monkeypatch):
    """The page's samples execute in order without an error; skipped ones still compile."""
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs_sample")  # a real module: dataclasses look theirs up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for sample in samples(page):
        code = compile("\n" * (sample.line - 1) + sample.code, _name(page), "exec")
        if sample.skip is None:
            exec(code, module.__dict__)


def test_skips_are_rare_and_say_why():
    """Every skip marker gives a reason, and few samples are skipped at all."""
    skipped = [(_name(p), s.line, s.skip) for p in PAGES for s in samples(p) if s.skip is not None]
    assert all(reason.strip() for *_, reason in skipped)
    assert len(skipped) <= MAX_SKIPPED, skipped


def test_every_skip_marker_is_attached_to_a_sample():
    """A marker not directly above a Python fence would skip nothing: it is a typo."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        markers = len(_SKIP_MARKER.findall(text))
        assert markers == sum(s.skip is not None for s in samples(page)), _name(page)


def test_the_readme_sample_is_found_and_run():
    """The README's sample is collected (not silently missed by the fence pattern)."""
    readme = samples(ROOT / "README.md")
    assert readme and all(s.skip is None for s in readme)
    assert "ScheduledBatch" in readme[0].code


def test_a_marker_skips_only_the_sample_below_it():
    """The fence pattern reads a marker into the next sample and nothing else."""
    page = ("<!-- docs-test: skip (needs an engine) -->\n```python\nengine.step()\n```\n\n"
            "```python\nx = 1\n```\n")
    found = [(m["reason"], m["code"]) for m in _FENCE.finditer(page)]
    assert found == [("needs an engine", "engine.step()\n"), (None, "x = 1\n")]
