"""The ATOM seed: a compacted draft array, indexed by batch position, ran off its end.

A decode batch of 128 seqs whose last seq has just left prefill (no drafts yet) handed
the runner a ``(127, 3)`` array; ``drafts[127]`` raised IndexError in every DP rank. The
contract rejects the batch where it is built, naming the seq and its batch position; the
mapping form builds one row per decode seq and is valid by construction.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from contract_builders import BACKENDS, ID_DTYPES, build, decode_batch

from specguard import contracts

N, K, VOCAB = 128, 3, 1000


def _drafts(n: int) -> np.ndarray:
    return (np.arange(n * K).reshape(n, K) % (VOCAB - 1)) + 1


def test_compacted_array_is_what_crashed_atom():
    """Indexing the compacted array by the draft-less seq's batch position is the IndexError."""
    compacted = _drafts(N - 1)
    with pytest.raises(IndexError, match="index 127 is out of bounds for axis 0 with size 127"):
        compacted[np.array([127])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ID_DTYPES)
def test_compacted_drafts_raise_sg101_naming_seq_127(backend, dtype):
    """A (127, 3) draft array for 128 decode seqs is SG101 at seq 127, batch position 127."""
    with pytest.raises(contracts.ContractViolation) as caught:
        decode_batch(np.arange(N), _drafts(N - 1), np.full(N - 1, K), mtp_k=K,
                     backend=backend, dtype=dtype)
    short = "i32" if dtype == "int32" else "i64"
    assert caught.value.codes == ("SG101",)
    assert str(caught.value).splitlines()[1] == (
        "  SG101 one draft row per decode seq, in batch order "
        "[ScheduledBatch.draft_token_ids, scheduler → runner]: seq 127 at batch position 127: "
        f"decode seq without a draft row: draft_token_ids is {short}[127,3] but num_decode=128 "
        "(expected num_decode=128; actual 127) "
        "{mtp_k=3, num_decode=128, num_tokens=512, num_seqs=128, max_blocks=2}"
    )
    violation = caught.value.violations[0]
    assert (violation.seq_id, violation.position, violation.field) == (127, 127, "draft_token_ids")


def test_compacted_drafts_with_full_counts_name_the_draftless_seq():
    """When num_drafts still has a zero for the draft-less seq, that seq is the one named."""
    counts = np.full(N, K)
    counts[-1] = 0
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "seq 127 at batch position 127: decode seq has no drafts and no draft row: "
        "draft_token_ids is i32[127,3] but num_decode=128"
    )):
        decode_batch(np.arange(N), _drafts(N - 1), counts, mtp_k=K)


def _mixed_batch_fields(order: np.ndarray) -> dict[str, Any]:
    """130 seqs with ids 1000+i in a shuffled order; positions 3 and 64 are prefill."""
    n = order.shape[0]
    is_decode = np.ones(n, dtype=bool)
    is_decode[[3, 64]] = False
    scheduled = np.where(is_decode, K + 1, 5)
    return {
        "mtp_k": K, "vocab_size": VOCAB, "block_size": 16, "num_decode": int(is_decode.sum()),
        "num_tokens": int(scheduled.sum()), "seq_ids": 1000 + order, "is_decode": is_decode,
        "num_scheduled_tokens": scheduled, "context_lens": np.full(n, 20),
        "block_tables": np.arange(2 * n).reshape(n, 2),
        "token_ids": np.arange(int(scheduled.sum())) % VOCAB,
    }


@pytest.mark.parametrize("draftless_row", [0, 60, 127])
def test_permuted_batch_names_the_right_seq_and_position(draftless_row):
    """Ids differ from positions and the draft-less seq sits anywhere: the message names it."""
    order = np.random.default_rng(7).permutation(130)
    fields = _mixed_batch_fields(order)
    decode_positions = np.flatnonzero(fields["is_decode"])
    position = int(decode_positions[draftless_row])
    seq_id = 1000 + int(order[position])
    counts = np.full(N, K)
    counts[draftless_row] = 0
    compacted = np.delete(_drafts(N), draftless_row, axis=0)
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, dtype="int32", **fields,
              draft_token_ids=compacted, num_drafts=counts)
    assert re.search(re.escape(
        f"SG101 one draft row per decode seq, in batch order [ScheduledBatch.draft_token_ids, "
        f"scheduler → runner]: seq {seq_id} at batch position {position}: decode seq has no "
        "drafts and no draft row: draft_token_ids is i32[127,3] but num_decode=128"
    ), str(caught.value))
    assert (caught.value.violations[0].seq_id, caught.value.violations[0].position) == (
        seq_id, position)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mapping_form_builds_one_row_per_decode_seq(backend):
    """from_mapping with seq 127 missing gives 128 rows; row 127 is placeholder, 0 drafts."""
    rows = _drafts(N)
    engine_drafts = {seq: rows[seq] for seq in range(N - 1)}
    drafts = contracts.DraftTokens.from_mapping(
        np.arange(N), engine_drafts, mtp_k=K, vocab_size=VOCAB, placeholder=0)
    assert isinstance(drafts.draft_token_ids, np.ndarray)
    assert isinstance(drafts.num_drafts, np.ndarray)
    assert drafts.draft_token_ids.shape == (N, K)
    assert drafts.draft_token_ids[127].tolist() == [0, 0, 0]
    assert drafts.num_drafts[127] == 0
    assert (drafts.num_drafts[:127] == K).all()
    assert (drafts.draft_token_ids[:127] == rows[:127]).all()
    with contracts.checking(depth="full"):
        batch = decode_batch(np.arange(N), drafts.draft_token_ids, drafts.num_drafts,
                             mtp_k=K, backend=backend)
    assert tuple(batch.draft_token_ids.shape) == (N, K)


def test_mapping_form_of_permuted_batch_keeps_batch_order():
    """Rows follow the decode seqs' batch order, not the mapping's order or the ids."""
    order = np.random.default_rng(7).permutation(130)
    fields = _mixed_batch_fields(order)
    decode_ids = fields["seq_ids"][fields["is_decode"]]
    missing = int(decode_ids[60])
    engine_drafts = {int(s): [int(s) % 7 + 1] * K for s in decode_ids[::-1] if s != missing}
    drafts = contracts.DraftTokens.from_mapping(
        decode_ids, engine_drafts, mtp_k=K, vocab_size=VOCAB, placeholder=5)
    with contracts.checking(depth="full"):
        build(contracts.ScheduledBatch, dtype="int32", **fields,
              draft_token_ids=drafts.draft_token_ids, num_drafts=drafts.num_drafts)
    assert drafts.draft_token_ids[60].tolist() == [5, 5, 5]
    assert drafts.num_drafts[60] == 0
    assert drafts.draft_token_ids[0].tolist() == [int(decode_ids[0]) % 7 + 1] * K
