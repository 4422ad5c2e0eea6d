"""The contract pages: every field documented and shown, rules placed, markers known."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from specguard import contracts

DOCS = Path(__file__).resolve().parents[2] / "docs"

OBJECTS = contracts.BOUNDARY_OBJECTS
FIELDS = [(cls, spec) for cls in OBJECTS for spec in contracts.fields_of(cls)]


def _id(value):
    return value.__name__ if isinstance(value, type) else getattr(value, "name", str(value))


@pytest.mark.parametrize("cls, spec", FIELDS, ids=[f"{c.__name__}.{s.name}" for c, s in FIELDS])
def test_every_field_has_a_docstring(cls, spec):
    """Each field of each boundary object carries a non-empty attribute docstring."""
    assert contracts.field_docs(cls).get(spec.name, "").strip()


@pytest.mark.parametrize("cls, spec", FIELDS, ids=[f"{c.__name__}.{s.name}" for c, s in FIELDS])
def test_every_field_has_a_row_with_dtype_shape_and_meaning(pages, cls, spec):
    """The object's page has the field's row: name, dtype, shape in named dims, meaning."""
    page = pages.object_page(cls)
    row = next((line for line in page.splitlines() if line.startswith(f"| `{spec.name}` |")), None)
    assert row is not None, f"{spec.name} missing from the page of {cls.__name__}"
    meaning = " ".join(contracts.field_docs(cls)[spec.name].split()).replace("|", "\\|")
    assert meaning in row
    if isinstance(spec, contracts.ArrayField):
        assert f"`{spec.shape_text}`" in row
        assert all(f"`{dtype}`" in row for dtype in spec.dtypes)
    else:
        assert f"`{spec.type.__name__}`" in row and "scalar" in row


@pytest.mark.parametrize("cls, field, code", [
    (contracts.ScheduledBatch, "draft_token_ids", "SG101"),
    (contracts.ScheduledBatch, "draft_token_ids", "SG108"),
    (contracts.ScheduledBatch, "num_decode", "SG101"),
    (contracts.DrafterInput, "input_ids", "SG301"),
    (contracts.VerifyOutput, "token_ids", "SG202"),
    (contracts.ModelInput, "slot_mapping", "SG305"),
])
def test_field_rows_link_the_rules_that_guard_the_field(pages, cls, field, code):
    """A field's row links the value rules naming it and the rules owning its dimensions."""
    row = next(line for line in pages.object_page(cls).splitlines()
               if line.startswith(f"| `{field}` |"))
    assert f"[{code}](../rules.md#{code.lower()} " in row


@pytest.mark.parametrize("cls", OBJECTS, ids=_id)
def test_rules_section_lists_exactly_the_rules_that_apply(pages, cls):
    """The rules table holds each rule naming the class, and no rule of another object."""
    codes = {r.code for r in pages.rules_of(cls)}
    named = {code for code, r in contracts.REGISTRY.items() if cls.__name__ in r.applies_to}
    assert named <= codes
    for code, rule in contracts.REGISTRY.items():
        if rule.check is not None and cls.__name__ not in rule.applies_to \
                and "*" not in rule.applies_to:
            assert code not in codes, f"{code} listed on {cls.__name__}"
    page = pages.object_page(cls)
    for code in codes:
        assert f"| [{code}](../rules.md#{code.lower()} " in page
        assert f" | {contracts.REGISTRY[code].title} | " in page


def test_dimension_rules_follow_the_dimensions_an_object_uses(pages):
    """SG101 (num_decode) applies to the draft rows, not to the drafter's token stream."""
    assert "SG101" in {r.code for r in pages.rules_of(contracts.ScheduledBatch)}
    assert "SG101" not in {r.code for r in pages.rules_of(contracts.DrafterInput)}
    assert "SG104" in {r.code for r in pages.rules_of(contracts.DrafterInput)}


@pytest.mark.parametrize("cls", OBJECTS, ids=_id)
def test_page_shows_dimensions_and_json_schema(pages, cls):
    """Each page tables its named dimensions and embeds the class's JSON Schema."""
    page = pages.object_page(cls)
    for name in {a.name for s in contracts.fields_of(cls) for a in getattr(s, "axes", ())
                 if a.name}:
        assert f"| `{name}` |" in page
    assert '"title": "' + cls.__name__ + '"' in page


def test_each_object_gets_its_own_page(pages):
    """Every boundary object has one generated page, at a distinct path under contracts/."""
    paths = pages.object_pages()
    assert len(paths) == len(OBJECTS)
    assert all(p.startswith("contracts/") and p.endswith(".md") for p in paths)
    assert pages.object_path(contracts.ScheduledBatch) == "contracts/scheduled-batch.md"
    assert [pages.title_of(p) for p in paths] == [c.__name__ for c in OBJECTS]


MARKDOWN = sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_marker_in_the_pages_expands(pages, path):
    """Each specguard marker in a hand-written page names a known generator and expands."""
    text = path.read_text(encoding="utf-8")
    expanded = pages.expand_markers(text, path.relative_to(DOCS).as_posix())
    assert "<!-- specguard:" not in expanded


def test_unknown_marker_fails_the_build(pages):
    """A misspelt marker is an error, not silently left in the page."""
    with pytest.raises(ValueError, match="specguard:exmaple"):
        pages.expand_markers("<!-- specguard:exmaple SG101 -->", "index.md")


@pytest.mark.parametrize("module", ["contracts", "adapters"])
def test_api_reference_covers_the_public_api(module):
    """Every name a package exports has its entry on the API reference page."""
    imported = importlib.import_module(f"specguard.{module}")
    text = (DOCS / "reference" / f"{module}.md").read_text(encoding="utf-8")
    if f"::: specguard.{module}\n" in text:
        return  # the whole package is rendered, __all__ included
    missing = [n for n in imported.__all__ if f"::: specguard.{module}.{n}\n" not in text]
    assert not missing


MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|Users)/")


@pytest.mark.parametrize("path", sorted(p for p in DOCS.rglob("*") if p.suffix in {".md", ".py"}),
                         ids=lambda p: p.relative_to(DOCS).as_posix())
def test_docs_name_no_machine_paths(path):
    """No page or build file points at a path on one particular machine."""
    assert not MACHINE_PATH.search(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("cls", OBJECTS, ids=_id)
def test_constructor_example_runs_and_builds_a_clean_object(pages, cls):
    """The page's constructor example runs as shown and builds an object that breaks no
    rule, naming every required field."""
    page = pages.object_page(cls)
    block = re.search(r"## Constructing one\n.*?```python\n(.*?)```", page, re.S)
    assert block is not None
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), f"{cls.__name__} page", "exec"), namespace)
    built = [value for value in namespace.values() if isinstance(value, cls)]
    assert len(built) == 1
    with contracts.checking(depth="full", collect="all"):
        assert contracts.validate(built[0]) == []
    required = {spec.name for spec in contracts.fields_of(cls) if not spec.optional}
    assert {name for name in required if f"    {name}=" in block.group(1)} == required


@pytest.mark.parametrize("cls", OBJECTS, ids=_id)
def test_optional_fields_are_marked_and_listed(pages, cls):
    """Each field row says whether it is required; the optional ones are listed by name."""
    page = pages.object_page(cls)
    for spec in contracts.fields_of(cls):
        row = next(line for line in page.splitlines() if line.startswith(f"| `{spec.name}` |"))
        assert row.split(" | ")[1] == ("no, default `None`" if spec.optional else "yes")
        if spec.optional:
            assert f"- `{spec.name}`: " in page
