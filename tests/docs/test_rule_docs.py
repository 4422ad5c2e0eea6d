"""The rule catalogue: every rule documented, every example message live and pinned."""

from __future__ import annotations

import re

import pytest

from specguard import contracts
from specguard.adapters import examples

CODES = sorted(contracts.REGISTRY)
EXAMPLE_CODES = sorted(examples.EXAMPLES)


def _section(catalogue: str, code: str) -> str:
    """The catalogue's section of one rule: from its heading to the next heading."""
    match = re.search(rf"^### {code} · .*?(?=^##)|^### {code} · .*\Z", catalogue, re.M | re.S)
    assert match, f"{code} has no section in the catalogue"
    return match.group(0)


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_a_catalogue_section_with_its_registry_text(catalogue, code):
    """Each registered rule has a section carrying its title, why and bug from the registry."""
    rule = contracts.REGISTRY[code]
    section = _section(catalogue, code)
    assert f"### {code} · {rule.title} {{ #{code.lower()} }}" in section
    assert " ".join(rule.why.split()) in section
    assert " ".join(rule.bug.split()) in section
    assert rule.boundary.value in section
    assert f"[{code}](#{code.lower()})" in catalogue


def test_every_rule_has_an_example_or_a_stated_reason():
    """A rule has exactly one of: a broken example object, or a reason it has none."""
    assert set(examples.EXAMPLES) | set(examples.NO_EXAMPLE) == set(CODES)
    assert not set(examples.EXAMPLES) & set(examples.NO_EXAMPLE)


@pytest.mark.parametrize("code", EXAMPLE_CODES)
def test_example_breaks_its_own_rule_first(code):
    """The example object of a rule is caught by that rule, not by an earlier one."""
    error = examples.example_violation(code)
    assert error.codes[0] == code
    assert error.violations[0].code == code
    assert f"  {code} {contracts.REGISTRY[code].title} [" in str(error)


@pytest.mark.parametrize("code", EXAMPLE_CODES)
def test_documented_message_is_what_the_code_prints(catalogue, code):
    """The catalogue shows, verbatim, the message validating the example object prints now."""
    assert f"```text\n{_printed_now(code)}\n```" in _section(catalogue, code)


def _printed_now(code):
    """What a user sees: build the object in warn mode, then validate it strictly.

    Rules enforced while the object is built (``DraftTokens.from_mapping``) leave nothing
    for a second validation to find; their message is the one construction raises.
    """
    with contracts.checking(mode="warn", depth="full", collect="first"):
        try:
            broken = examples.EXAMPLES[code].build()
        except contracts.ContractViolation:
            broken = None
    if broken is not None:
        with contracts.checking(mode="strict", depth="full", collect="first"):
            try:
                contracts.validate(broken)
            except contracts.ContractViolation as error:
                return str(error)
    return str(examples.example_violation(code))


def test_rule_without_example_shows_its_reason(pages):
    """A rule without an example object says why in its section, in a note."""
    reason = "No shipped object can break this rule alone."
    examples.NO_EXAMPLE["SG999"] = reason
    try:
        block = pages.example_block("SG999")
    finally:
        del examples.NO_EXAMPLE["SG999"]
    assert block.startswith('!!! note "No example object"')
    assert reason in block


_CLASSES = sorted(contracts.BOUNDARY_OBJECTS, key=lambda c: c.__name__)


@pytest.mark.parametrize("name", _CLASSES, ids=[c.__name__ for c in _CLASSES])
def test_clean_objects_break_no_rule(name):
    """Every clean object the examples start from passes every rule at full depth."""
    with contracts.checking(mode="strict", depth="full", collect="all"):
        built = examples.CLEAN[name.__name__]()
        assert contracts.validate(built) == []


@pytest.mark.parametrize("story, code, where", [
    ("atom-1444", "SG101", "seq 127 at batch position 127: decode seq without a draft row: "
                           "draft_token_ids is i32[127,3] but num_decode=128"),
    ("vllm-26231", "SG301", "seq 2 at batch position 2, token 11: input id is -1"),
])
def test_seed_stories_fail_at_the_hand_over_with_their_position(pages, story, code, where):
    """The two motivating crashes, rebuilt, are caught by their rule at the right seq."""
    error = examples.violation_of(examples.STORIES[story])
    assert error.codes == (code,)
    assert where in str(error)
    assert str(error) in pages.story_block(story)


def test_example_that_breaks_nothing_is_reported():
    """A broken example that no longer breaks any rule fails loudly, naming its rule."""
    clean = examples.Example("SG999", "nothing wrong", examples.CLEAN["DrafterOutput"])
    with pytest.raises(LookupError, match="SG999"):
        examples.violation_of(clean)


def test_adapter_rules_have_their_own_group(pages, catalogue):
    """Rules the adapters declare follow the contracts' rules, under Engine adapters."""
    adapter_codes = [c for c in CODES if pages.is_adapter_rule(contracts.REGISTRY[c])]
    assert adapter_codes, "importing the examples registers the adapters' rules"
    group = catalogue.index("## Engine adapters")
    for code in CODES:
        at = catalogue.index(f"### {code} · ")
        assert (at > group) == (code in adapter_codes), code


def test_snapshot_session_is_a_real_check_of_a_written_file(pages):
    """The snapshot guide shows `specguard check` on a file an adapter really wrote."""
    session = pages.snapshot_session()
    name = re.search(r"\$ specguard check (\S+\.json)\n", session)
    assert name and name.group(1).startswith("ScheduledBatch-")
    assert "re-validated (strict, depth full, collect all):" in session
    assert "SG101 one draft row per decode seq" in session
    assert session.rstrip().endswith("$ echo $?\n1\n```")
    assert "/" not in name.group(1) and "tmp" not in session.split("\n", 2)[1]


@pytest.mark.parametrize("code", CODES)
def test_catalogue_says_which_rules_run_by_default(catalogue, code):
    """Metadata and essential rules read "checked by default"; full-depth rules do not."""
    rule = contracts.REGISTRY[code]
    section = _section(catalogue, code)
    by_default = rule.depth is not contracts.Depth.FULL
    assert ("checked by default" in section) is by_default


def test_a_rule_that_reads_further_at_full_depth_says_what_in_its_section(catalogue):
    """SG110's section carries its "At full depth" note; a rule without one has none."""
    assert '!!! note "At full depth"' in _section(catalogue, "SG110")
    assert "480 µs" in _section(catalogue, "SG110")
    assert "At full depth" not in _section(catalogue, "SG101")
