"""Rules as strong as their titles: the cases a hostile review found them too weak for."""

from __future__ import annotations

import re

import numpy as np
import pytest
from contract_builders import CLEAN, build, kwargs

from specguard import contracts

SB, MI, DI = contracts.ScheduledBatch, contracts.ModelInput, contracts.DrafterInput
BACKENDS = ("numpy", "torch")


def _raises(message: str):
    return pytest.raises(contracts.ContractViolation, match=re.escape(message))


@pytest.fixture(autouse=True)
def _full_depth():
    with contracts.checking(depth="full"):
        yield


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [MI, DI], ids=lambda c: c.__name__)
def test_sg303_positions_at_or_past_max_model_len(cls, backend):
    """With max_model_len given, a position at the limit is SG303."""
    build(cls, backend, max_model_len=7)
    with _raises("token 4: position is 6 (expected 0 <= position < max_model_len=6)"):
        build(cls, backend, max_model_len=6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg303_a_huge_position_inside_a_span(backend):
    """positions=[0, 1, 2**62, ...]: the span's third token does not follow its second."""
    with _raises("SG303 positions are within max_model_len and contiguous in each span "
                 "[ModelInput.positions, runner → target model]: seq 7 at batch position 0, "
                 "token 2: position is 4611686018427387904 follows 1 in the same span "
                 "(expected the previous position + 1)"):
        build(MI, backend, positions=np.array([0, 1, 2**62, 5, 6, 0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg303_a_gap_or_repeat_inside_a_span(backend):
    """A repeated position inside seq 8's span is SG303; a new span may start anywhere."""
    with _raises("seq 8 at batch position 1, token 4: position is 5 follows 5 in the same "
                 "span"):
        build(MI, backend, positions=np.array([0, 1, 2, 5, 5, 0]))
    build(MI, backend, positions=np.array([10, 11, 12, 0, 1, 99]))


def test_sg303_leaves_broken_spans_to_sg304():
    """Spans that go back are SG304's: SG303 does not guess where positions restart."""
    with pytest.raises(contracts.ContractViolation) as caught:
        build(MI, query_start_loc=np.array([0, 4, 3, 6]))
    assert caught.value.codes == ("SG304",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg110_padding_in_the_middle_of_the_needed_blocks(backend):
    """Seq 42 needs five blocks; a -1 in the third is SG110 though the first and last are fine."""
    tables = CLEAN[SB]["block_tables"].copy()
    tables[2, 2] = -1
    with _raises("SG110 block tables are not empty and cover the context [ScheduledBatch."
                 "block_tables, scheduler → runner]: seq 42 at batch position 2: block 2 is "
                 "-1, padding inside the 5 blocks the context needs"):
        build(SB, backend, block_tables=tables)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg110_int32_context_near_2_31_does_not_wrap(backend):
    """An int32 context of 2**31 - 1 needs 2**29 blocks of 4; it is not read as negative."""
    context = CLEAN[SB]["context_lens"].copy()
    context[2] = 2**31 - 1
    with _raises("seq 42 at batch position 2: context needs 536870912 blocks, table has 5 "
                 "columns"):
        build(SB, backend, "int32", context_lens=context)


def test_sg110_block_size_past_int32_with_int32_lengths():
    """block_size=2**40 with int32 lengths: one block each, no overflow, no SG000."""
    build(SB, "numpy", "int32", block_size=2**40)


def _wrapping_batch(backend: str) -> contracts.ScheduledBatch:
    """Two prefill counts of 2**63 - 1: with the decode seqs' 9 tokens the int64 sum
    wraps round to 7, which is num_tokens."""
    big = 2**63 - 1
    assert (9 + 2 * big) % 2**64 == 7
    return build(SB, backend, block_size=2**62, num_tokens=7, token_ids=np.arange(7),
                 num_scheduled_tokens=np.array([3, big, 3, big, 3]),
                 context_lens=np.array([4, big, 4, big, 4]),
                 block_tables=np.arange(10).reshape(5, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg106_counts_whose_sum_wraps_are_caught(backend):
    """Counts whose int64 sum wraps round to num_tokens are SG106, naming the first."""
    with _raises("SG106 num_tokens is the sum of the per-seq counts [ScheduledBatch."
                 "num_scheduled_tokens, scheduler → runner]: seq 41 at batch position 1: "
                 "seq scheduled 9223372036854775807 tokens (expected 0..num_tokens=7)"):
        _wrapping_batch(backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sg111_decode_seq_without_a_prompt(backend):
    """A decode seq whose context is exactly its mtp_k+1 scheduled tokens is SG111."""
    context = CLEAN[SB]["context_lens"].copy()
    context[4] = 3
    with _raises("SG111 context lengths cover the scheduled tokens [ScheduledBatch."
                 "context_lens, scheduler → runner]: seq 44 at batch position 4: decode seq "
                 "has context length 3, only its 3 scheduled tokens: no prompt before them "
                 "(expected > 3)"):
        build(SB, backend, context_lens=context)


def test_sg111_a_first_prefill_chunk_may_fill_its_context():
    """A prefill seq whose context is exactly its scheduled chunk is valid."""
    context = CLEAN[SB]["context_lens"].copy()
    assert context[1] == CLEAN[SB]["num_scheduled_tokens"][1]
    build(SB, context_lens=context)


@pytest.mark.parametrize("layout", ["C", "F"])
def test_sg110_padding_inside_a_large_table(layout):
    """A -1 deep inside a 3000-block table is found, contiguous (reduceat) or not (mask)."""
    blocks = 3000
    tables = np.arange(5 * blocks).reshape(5, blocks)
    tables[2, 1234] = -1
    context = np.array([9, 4, 16 * blocks, 6, 16 * blocks])
    made = kwargs(SB, block_size=16, context_lens=context)
    made["block_tables"] = np.asfortranarray(tables) if layout == "F" else tables
    assert made["block_tables"].flags.c_contiguous == (layout == "C")
    with _raises("seq 42 at batch position 2: block 1234 is -1, padding inside the 3000 "
                 "blocks the context needs"):
        SB(**made)
