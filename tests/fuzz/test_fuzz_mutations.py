"""One change, one rule: every rule of the registry is broken alone and named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from input_snapshots import same, snapshot
from strategies.mutations import (
    MAPPING_MUTATIONS,
    MUTATIONS,
    UNREACHABLE,
    Mutation,
    contract_rules,
    dimension_sites,
    doubly_mutated,
    mapping_mutated,
    mutated,
    unreachable_dimension_rules,
)

from specguard import contracts
from specguard.contracts._core._metadata import metadata_findings


def _codes(build: Any, collect: str) -> tuple[str, ...]:
    """The codes ``build()`` raises under strict full-depth checking with ``collect``."""
    with contracts.checking(mode="strict", depth="full", collect=collect), \
            pytest.raises(contracts.ContractViolation) as caught:
        build()
    return caught.value.codes


def _excluded() -> dict[str, str]:
    return {**UNREACHABLE, **unreachable_dimension_rules()}


def test_every_rule_has_a_mutation_or_a_documented_exclusion() -> None:
    """A new rule without a one-rule mutation (or a stated reason) fails this test."""
    covered = {m.code for m in MUTATIONS} | {m.code for m in MAPPING_MUTATIONS}
    excluded = _excluded()
    rules = contract_rules()
    missing = set(rules) - covered - set(excluded)
    assert not missing, f"rules without a mutation: {sorted(missing)}"
    assert covered <= set(rules), "a mutation names an unknown rule"
    assert not covered & set(excluded), "an excluded rule is covered after all: drop it"
    assert all(reason.strip() for reason in excluded.values())


def test_every_value_rule_is_broken_on_every_object_it_applies_to() -> None:
    """Each (value rule, boundary class) pair of the registry has a mutation."""
    pairs = {(m.code, cls.__name__) for m in MUTATIONS for cls in m.classes}
    names = {cls.__name__ for cls in contracts.BOUNDARY_OBJECTS}
    for code, rule in contract_rules().items():
        if rule.check is None:
            continue
        for subject in set(rule.applies_to) & names:
            assert (code, subject) in pairs, f"{code} is never broken on {subject}"


def test_dimension_exclusions_are_really_unreachable() -> None:
    """An excluded dimension rule has no field that meets an already bound dimension."""
    reachable = {site.code for site in dimension_sites()}
    for code in unreachable_dimension_rules():
        assert code not in reachable
        dims = [d.name for d in contracts.DIMENSIONS.values() if d.rule == code]
        for cls in contracts.BOUNDARY_OBJECTS:
            uses = [axis.name for spec in contracts.fields_of(cls)
                    if isinstance(spec, contracts.ArrayField) for axis in spec.axes
                    if axis.name in dims]
            assert len(uses) <= 1, f"{cls.__name__} uses {dims} twice: add a mutation"


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@given(data=st.data())
def test_a_mutation_raises_exactly_its_rule(mutation: Mutation, data: st.DataObject) -> None:
    """The valid object passes; broken, its rule is the only code collected and the first."""
    valid, broken = data.draw(mutated(mutation))
    with contracts.checking(mode="strict", depth="full", collect="all"):
        valid.build()
    assert set(_codes(broken.build, "all")) == {mutation.code}
    assert _codes(broken.build, "first") == (mutation.code,)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@given(data=st.data())
def test_revalidating_a_mutated_object_names_the_rule(
    mutation: Mutation, data: st.DataObject
) -> None:
    """Fields swapped into a valid object after construction are caught by validate()."""
    valid, broken = data.draw(mutated(mutation))
    with contracts.checking(mode="strict", depth="full", collect="all"):
        obj = valid.build()
    for name, value in broken.kwargs().items():
        object.__setattr__(obj, name, value)
    assert set(_codes(lambda: contracts.validate(obj), "all")) == {mutation.code}
    assert _codes(lambda: contracts.validate(obj), "first") == (mutation.code,)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@given(data=st.data())
def test_validation_never_mutates_a_broken_input(mutation: Mutation, data: st.DataObject) -> None:
    """Reporting a violation reads the arrays and leaves them as they were."""
    _, broken = data.draw(mutated(mutation))
    kwargs = broken.kwargs()
    before = snapshot(kwargs)
    with contracts.checking(mode="strict", depth="full", collect="all"), \
            pytest.raises(contracts.ContractViolation):
        broken.cls(**kwargs)
    assert same(before, snapshot(kwargs))


@pytest.mark.parametrize("mutation", MAPPING_MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@given(data=st.data())
def test_a_broken_mapping_raises_exactly_its_rule(mutation: Any, data: st.DataObject) -> None:
    """from_mapping arguments broken in one way raise that rule alone and leave them intact."""
    case = data.draw(mapping_mutated(mutation))
    before = snapshot({"ids": case.seq_ids, "drafts": case.drafts, "fill": case.placeholder})
    assert set(_codes(case.build, "all")) == {mutation.code}
    assert _codes(case.build, "first") == (mutation.code,)
    assert same(before, snapshot({"ids": case.seq_ids, "drafts": case.drafts,
                                  "fill": case.placeholder}))


@settings(max_examples=4 * settings().max_examples)
@given(pair=doubly_mutated())
def test_two_breaks_are_reported_by_real_rules(pair: tuple[Any, Any, Any]) -> None:
    """Two broken rules at once: at least one is named, and no check gives up (no SG000)."""
    first, second, broken = pair
    codes = _codes(broken.build, "all")
    assert "SG000" not in codes, codes
    assert {first.code, second.code} & set(codes), codes


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@settings(max_examples=20)
@given(data=st.data())
def test_both_compiled_metadata_predicates_agree_with_the_walk(
    mutation: Mutation, data: st.DataObject
) -> None:
    """The numpy-only predicate and the any-backend one both say "all good" exactly when
    the explaining walk finds no metadata violation, on broken objects too."""
    _, broken = data.draw(mutated(mutation))
    with contracts.checking(mode="off"):
        obj = broken.build()
    plan = broken.cls.__sg_plan__
    findings, _ = metadata_findings(obj, plan.fields, plan.subject, first_only=False)
    general = plan.compiled_fast_check().__globals__["general_check"]
    assert plan.fast_check(obj) is (findings == [])
    assert general(obj) is (findings == [])
