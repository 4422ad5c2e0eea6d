"""The default depth, essential: metadata plus the value rules that stop the seeds.

The two seeds (ATOM's compacted draft rows, vLLM's ``-1`` at the MTP head) and the
wrong-anchor family are caught out of the box; every other value rule waits for
``full``, and ``metadata`` reads no value at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts
from specguard.contracts import examples
from specguard.contracts._core._config import from_environ


def test_the_default_depth_is_essential():
    """Out of the box (and when SPECGUARD_DEPTH is unset) the depth is essential."""
    assert contracts.Config().depth is contracts.Depth.ESSENTIAL
    assert from_environ({}).depth is contracts.Depth.ESSENTIAL
    assert from_environ({"SPECGUARD_DEPTH": "Essential"}).depth is contracts.Depth.ESSENTIAL


#: The value rules of the logits rows, the request output and the per-rank token counts:
#: hand-overs with no other check, each a pass or two over a few small arrays.
HAND_OVER_RULES = {"SG306", "SG307", "SG401", "SG402", "SG403", "SG404", "SG708", "SG709"}


def test_the_essential_rules_are_the_seed_rules():
    """Exactly the embedding-id rule (with its Model Runner V2 form, SG628), the
    draft-row owner rule and the rules of the hand-overs nothing else checks run by
    default."""
    essential = {code for code, rule in contracts.REGISTRY.items()
                 if rule.depth is contracts.Depth.ESSENTIAL}
    assert essential == {"SG108", "SG115", "SG301", "SG628"} | HAND_OVER_RULES
    assert all(contracts.REGISTRY[code].check is not None for code in essential)


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


def test_full_depth_rules_wait_for_full():
    """A scheduled token id past the vocabulary (SG112, full depth) passes by default and
    fails at full."""
    bad: dict[str, Any] = {"token_ids": np.array([1] * 14 + [999])}
    build(contracts.ScheduledBatch, **bad)
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, **bad)
    assert caught.value.codes == ("SG112",)


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
