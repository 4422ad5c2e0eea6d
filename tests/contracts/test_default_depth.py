"""The default depth, essential: metadata plus every value rule within the budget.

Every rule's example is caught out of the box, unless the rule says (with its measured
cost) why it waits for ``full``; ``metadata`` reads no value at all.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts
from specguard.adapters import examples as adapter_examples
from specguard.contracts import examples
from specguard.contracts._core._config import from_environ


def test_the_default_depth_is_essential():
    """Out of the box (and when SPECGUARD_DEPTH is unset) the depth is essential."""
    assert contracts.Config().depth is contracts.Depth.ESSENTIAL
    assert from_environ({}).depth is contracts.Depth.ESSENTIAL
    assert from_environ({"SPECGUARD_DEPTH": "Essential"}).depth is contracts.Depth.ESSENTIAL


#: The value rules of the logits rows, the request output and the per-rank token counts:
#: hand-overs with no other check, each a pass or two over a few small arrays.
HAND_OVER_RULES = {"SG311", "SG312", "SG401", "SG402", "SG403", "SG404", "SG708", "SG709"}


def test_every_value_rule_runs_by_default_unless_it_says_why_not():
    """The default depth runs every value rule; one kept for full depth states what it
    costs there, measured, and so does a rule whose check reads further at full depth."""
    value_rules = [r for r in contracts.REGISTRY.values()
                   if r.depth is not contracts.Depth.METADATA]
    assert len(value_rules) > 40
    full_only = [r.code for r in value_rules if r.depth is contracts.Depth.FULL]
    assert all(contracts.REGISTRY[code].deeper for code in full_only)
    for described in (r for r in value_rules if r.deeper):
        assert re.search(r"\d+(\.\d+)? ?[µm]s", described.deeper), described.code
    assert "SG110" in {r.code for r in value_rules if r.deeper}


def test_a_rule_kept_for_full_depth_must_say_why():
    """Declaring a full-depth rule without its reason is refused at import."""
    def check(obj: Any, values: Any) -> None:
        """Why the rule exists, but not why it waits for full depth."""

    with pytest.raises(ValueError, match="SG999 runs only at full depth: say why in deeper="):
        contracts.rule("SG999", "a rule without a reason", boundary=contracts.Boundary.SCHEDULE,
                       applies_to=("ScheduledBatch",), fields=(), bug="none",
                       depth=contracts.Depth.FULL)(check)
    assert "SG999" not in contracts.REGISTRY


@pytest.mark.parametrize("code", sorted(adapter_examples.EXAMPLES))
def test_the_default_settings_catch_every_rules_example(code):
    """Each rule's broken example raises that rule at the default settings, unless the
    catalogue marks the rule as full-depth only with its measured reason."""
    rule = contracts.REGISTRY[code]
    if rule.depth is contracts.Depth.FULL:
        assert rule.deeper
        return
    caught = adapter_examples.example_violation(code, depth=contracts.current_config().depth.value)
    assert code in caught.codes


def test_a_minus_one_draft_is_caught_by_default():
    """A -1 in a draft row the runner reads (SG108) is the seed bug: caught by default,
    not only at full depth; metadata depth reads no value."""
    bad: dict[str, Any] = {"draft_token_ids": np.array([[5, 6], [7, -1], [0, 0]])}
    with contracts.checking(depth="metadata"):
        build(contracts.ScheduledBatch, **bad)
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, **bad)
    assert caught.value.codes == ("SG108",)
    assert caught.value.violations[0].position == 2  # decode row 1, after the two prefills


@pytest.mark.parametrize("code", sorted(HAND_OVER_RULES))
def test_the_hand_over_rules_catch_their_examples_by_default(code):
    """Each rule of the three hand-overs stops its catalogue example at the default
    settings, and none of them reads a value at metadata depth."""
    example = examples.EXAMPLES[code]
    with contracts.checking(depth="metadata"):
        example.build()
    with pytest.raises(contracts.ContractViolation) as caught:
        example.build()
    assert caught.value.codes == (code,)


def test_a_scheduled_token_id_past_the_vocabulary_is_caught_by_default():
    """A scheduled token id past the vocabulary (SG112) reaches the target's embedding:
    caught at the default depth, not at metadata depth."""
    bad: dict[str, Any] = {"token_ids": np.array([1] * 14 + [999])}
    with contracts.checking(depth="metadata"):
        build(contracts.ScheduledBatch, **bad)
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, **bad)
    assert caught.value.codes == ("SG112",)


def test_a_hole_in_the_middle_of_a_block_table_waits_for_full_depth():
    """SG110 reads each table's ends by default and every needed block at full depth
    (its ``deeper``): a -1 between a seq's first and last needed block is found at full
    depth only, while a table that ends short is found by default."""
    tables = build(contracts.ScheduledBatch).block_tables  # seq 42 needs blocks 4..8
    holed = tables.copy()
    holed[2, 2] = -1
    build(contracts.ScheduledBatch, block_tables=holed)
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, block_tables=holed)
    assert caught.value.codes == ("SG110",)
    short = tables.copy()
    short[2, 4] = -1
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, block_tables=short)
    assert caught.value.codes == ("SG110",)


@pytest.mark.parametrize("cls", [contracts.ModelInput, contracts.DrafterInput],
                         ids=lambda c: c.__name__)
def test_every_embedding_input_is_checked_by_default(cls):
    """An id past the vocabulary in either embedding input is SG301 at the default depth."""
    with pytest.raises(contracts.ContractViolation) as caught:
        build(cls, input_ids=np.array([1, 2, 3, 4, 5, 32]))
    assert caught.value.codes == ("SG301",)


def test_validate_takes_the_depth_by_name():
    """validate(obj, depth=...) accepts the three depths by name."""
    with contracts.checking(depth="metadata"):
        batch = build(contracts.ScheduledBatch, draft_seq_ids=np.array([42, 40, 44]))
    assert contracts.validate(batch, depth="metadata") == []
    with pytest.raises(contracts.ContractViolation):
        contracts.validate(batch, depth="essential")


@pytest.mark.parametrize("code", ["SG116", "SG306", "SG307", "SG308", "SG309", "SG310"])
def test_the_hand_over_rules_catch_their_example_by_default(code):
    """The padding, draft-step and proposed-count rules stop their catalogue example at
    the default settings; metadata depth reads no value."""
    from specguard.contracts import examples

    example = examples.EXAMPLES[code]
    with contracts.checking(depth="metadata"):
        example.build()
    with pytest.raises(contracts.ContractViolation) as caught:
        example.build()
    assert caught.value.codes == (code,)


def test_compile_checks_generates_every_class_check_once_and_then_nothing():
    """At start-up an engine compiles every metadata check, so its first steps do not;
    a second call finds nothing left, and validation then uses the compiled checks."""
    from specguard.contracts._core._contract import BoundaryObject, boundary_object

    @boundary_object(contracts.Boundary.SCHEDULE)
    class CompiledAtStartUp(BoundaryObject):
        mtp_k: int

    plan: Any = CompiledAtStartUp.__sg_plan__  # type: ignore[attr-defined]
    assert getattr(plan.fast_check, "__sg_stand_in__", False)
    assert contracts.compile_checks() >= 1
    assert not getattr(plan.fast_check, "__sg_stand_in__", False)
    assert contracts.compile_checks() == 0
    assert CompiledAtStartUp(mtp_k=2).mtp_k == 2
