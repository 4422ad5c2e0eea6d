"""``@guard`` on coroutine functions checks what they return once awaited."""

from __future__ import annotations

import asyncio
import inspect
import re

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import guard


def _drafts(rows: list[list[int]]) -> contracts.DrafterOutput:
    return contracts.DrafterOutput(mtp_k=2, vocab_size=10, seq_ids=np.arange(len(rows)),
                                   draft_token_ids=np.array(rows).reshape(len(rows), 2))


@guard(contracts.DrafterOutput, step=int)
async def _propose(rows, step=0):
    await asyncio.sleep(0)
    return rows


def test_async_result_is_checked_after_await():
    """The awaited DrafterOutput is validated and returned as it is."""
    clean = _drafts([[1, 2]])
    assert inspect.iscoroutinefunction(_propose)
    assert asyncio.run(_propose(clean)) is clean


def test_async_result_of_the_wrong_type_is_sg001_not_a_coroutine():
    """A wrong awaited result names its own type, never 'coroutine'."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG001 field has the declared type [_propose.return, drafter → scheduler]: expected "
        "DrafterOutput, got 3"
    )):
        asyncio.run(_propose(3))


def test_async_arguments_are_checked():
    """Arguments of a coroutine function are checked like those of a plain function."""
    with pytest.raises(contracts.ContractViolation, match=re.escape("_propose.step")):
        asyncio.run(_propose(_drafts([[1, 2]]), step="one"))  # pyright: ignore[reportArgumentType]


def test_async_result_mutated_after_construction_is_revalidated():
    """A DrafterOutput whose ids went out of the vocabulary is caught at the await."""
    drafts = _drafts([[1, 2]])
    drafts.draft_token_ids[0, 1] = 99
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation,
                                                           match="SG108"):
        asyncio.run(_propose(drafts))


@pytest.mark.parametrize("kind", ["async generator", "generator"])
def test_a_generator_with_a_return_spec_is_refused_at_decoration(kind):
    """What a generator yields is never checked: a return spec on one is a TypeError."""
    def rows():
        yield 1

    async def rows_async():
        yield 1

    with pytest.raises(TypeError, match="cannot check what the generator"):
        guard(int)(rows if kind == "generator" else rows_async)
