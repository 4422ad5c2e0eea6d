"""Every rule in the registry, both ways: clean objects pass, a violation is pinned.

The table below holds one violating object per rule code (a few codes have more); a
test fails when a registered rule has no row, so adding a rule means adding its case.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from contract_builders import CLEAN, build, convert

from specguard import contracts
from specguard.contracts import Array, Index, boundary_object

SB, DT, MI = contracts.ScheduledBatch, contracts.DraftTokens, contracts.ModelInput
DI, VO, DO = contracts.DrafterInput, contracts.VerifyOutput, contracts.DrafterOutput
LR, RO, TA = contracts.LogitsRows, contracts.RequestOutput, contracts.TokensAcrossRanks
#: The contracts' own rules; the engine adapters declare theirs (SG6xx) and test them there.
OWN_RULES = {code: rule for code, rule in contracts.REGISTRY.items()
             if getattr(rule.check, "__module__", "specguard.contracts")
             .startswith("specguard.contracts")}


@boundary_object(contracts.Boundary.ANY)
class HeadSplit(contracts.BoundaryObject):
    """Two fields sharing a dimension that no dedicated rule owns."""

    queries: Index[Array, "num_heads"]
    keys: Index[Array, "num_heads"]


def _bad_block_tables() -> np.ndarray:
    tables = CLEAN[SB]["block_tables"].copy()
    tables[3, 1] = -1  # seq 43 needs two blocks; its second is padding
    return tables


def _torch_is_decode() -> object:
    return convert(np.ones(5, dtype=bool), "torch")


Case = tuple[str, str, Callable[[], object], str]

CASES: list[Case] = [
    ("SG001", "list-for-array", lambda: build(SB, seq_ids=[40, 41, 42, 43, 44]),
     "SG001 field has the declared type [ScheduledBatch.seq_ids, scheduler → runner]: "
     "expected a numpy array or torch tensor, got list "
     "(expected numpy.ndarray | torch.Tensor; actual list)"),
    ("SG001", "str-for-int", lambda: build(SB, mtp_k="2"),
     "SG001 field has the declared type [ScheduledBatch.mtp_k, scheduler → runner]: "
     "expected int, got '2' (expected int; actual str)"),
    ("SG002", "float-ids", lambda: build(SB, token_ids=np.zeros(15, dtype=np.float32)),
     "SG002 array has an allowed dtype [ScheduledBatch.token_ids, scheduler → runner]: "
     "expected dtype int32|int64, got f32[15] (expected int32|int64; actual float32)"),
    ("SG002", "int-phases", lambda: build(SB, is_decode=np.array([1, 0, 1, 0, 1])),
     "SG002 array has an allowed dtype [ScheduledBatch.is_decode, scheduler → runner]: "
     "expected dtype bool, got i64[5] (expected bool; actual int64)"),
    ("SG003", "flat-table", lambda: build(SB, block_tables=np.zeros(5, dtype=np.int64)),
     "SG003 array has the declared rank and fixed sizes [ScheduledBatch.block_tables, "
     "scheduler → runner]: expected 2 axes [num_seqs, max_blocks], got i64[5] "
     "(expected [num_seqs, max_blocks]; actual i64[5])"),
    ("SG004", "unowned-dim", lambda: HeadSplit(queries=np.zeros(4, dtype=np.int32),
                                                keys=np.zeros(3, dtype=np.int32)),
     "SG004 named dimensions agree across fields [HeadSplit.keys, any boundary]: "
     "keys is i32[3] but num_heads=4 (expected num_heads=4; actual 3) {num_heads=4}"),
    ("SG005", "numpy-and-torch", lambda: build(SB, is_decode=_torch_is_decode()),
     "SG005 one backend and one device per object [ScheduledBatch.is_decode, "
     "scheduler → runner]: all arrays of one object share a backend and device; seq_ids is "
     "numpy but is_decode is torch on cpu (expected numpy; actual torch on cpu)"),
    ("SG006", "zero-mtp-k", lambda: build(SB, mtp_k=0),
     "SG006 scalar is within its range [ScheduledBatch.mtp_k, scheduler → runner]: "
     "must be >= 1, got 0 (expected >= 1; actual 0)"),
    ("SG010", "negative-id", lambda: build(SB, seq_ids=np.array([40, 41, -3, 43, 44])),
     "SG010 seq ids are unique and non-negative [ScheduledBatch.seq_ids, scheduler → runner]: "
     "seq -3 at batch position 2: seq id -3 is negative"),
    ("SG010", "repeated-id", lambda: build(SB, seq_ids=np.array([40, 41, 42, 41, 44])),
     "SG010 seq ids are unique and non-negative [ScheduledBatch.seq_ids, scheduler → runner]: "
     "seq 41 at batch position 3: seq id 41 appears twice (first at batch position 1)"),
    ("SG101", "short-counts", lambda: build(SB, num_drafts=np.array([2, 2])),
     "SG101 one draft row per decode seq, in batch order [ScheduledBatch.num_drafts, "
     "scheduler → runner]: seq 44 at batch position 4: decode seq without a draft row: "
     "num_drafts is i64[2] but num_decode=3 (expected num_decode=3; actual 2)"),
    ("SG102", "wide-rows", lambda: build(SB, draft_token_ids=np.zeros((3, 3), dtype=np.int64)),
     "SG102 row width follows mtp_k [ScheduledBatch.draft_token_ids, scheduler → runner]: "
     "draft_token_ids is i64[3,3] but mtp_k=2 (expected mtp_k=2; actual 3)"),
    ("SG102", "verify-width", lambda: build(VO, token_ids=np.zeros((3, 2), dtype=np.int64)),
     "SG102 row width follows mtp_k [VerifyOutput.token_ids, verifier → drafter]: "
     "token_ids is i64[3,2] but mtp_k+1=3 (expected mtp_k+1=3; actual 2)"),
    ("SG103", "decode-width", lambda: build(SB, num_scheduled_tokens=np.array([3, 4, 3, 2, 4]),
                                            num_tokens=16, token_ids=np.arange(16)),
     "SG103 decode seqs are scheduled exactly mtp_k+1 tokens [ScheduledBatch."
     "num_scheduled_tokens, scheduler → runner]: seq 44 at batch position 4: decode seq "
     "scheduled 4 tokens (expected mtp_k+1=3)"),
    ("SG104", "short-stream", lambda: build(SB, token_ids=np.arange(14)),
     "SG104 flat token stream has num_tokens entries [ScheduledBatch.token_ids, "
     "scheduler → runner]: token_ids is i64[14] but num_tokens=15 "
     "(expected num_tokens=15; actual 14)"),
    ("SG105", "short-per-seq", lambda: build(SB, context_lens=np.array([9, 4, 17, 6])),
     "SG105 one entry per seq in every per-seq array [ScheduledBatch.context_lens, "
     "scheduler → runner]: seq 44 at batch position 4: that seq has no entry: context_lens "
     "is i64[4] but num_seqs=5 (expected num_seqs=5; actual 4)"),
    ("SG106", "total", lambda: build(SB, num_tokens=16, token_ids=np.arange(16)),
     "SG106 num_tokens is the sum of the per-seq counts [ScheduledBatch.num_scheduled_tokens, "
     "scheduler → runner]: sum(num_scheduled_tokens) differs from num_tokens "
     "(expected num_tokens=16; actual 15)"),
    ("SG107", "phase-count", lambda: build(
        SB, is_decode=np.array([True, True, True, False, True]),
        num_scheduled_tokens=np.array([3, 3, 3, 3, 3])),
     "SG107 phases agree with num_decode; prefill seqs schedule at least one token "
     "[ScheduledBatch.is_decode, scheduler → runner]: is_decode marks a different number of "
     "decode seqs (expected num_decode=3; actual 4)"),
    ("SG107", "empty-prefill", lambda: build(SB, num_scheduled_tokens=np.array([3, 0, 3, 6, 3])),
     "SG107 phases agree with num_decode; prefill seqs schedule at least one token "
     "[ScheduledBatch.num_scheduled_tokens, scheduler → runner]: seq 41 at batch position 1: "
     "prefill seq scheduled no tokens (expected >= 1)"),
    ("SG108", "batch-draft", lambda: build(SB, draft_token_ids=np.array([[5, 6], [7, -1], [0, 0]])),
     "SG108 draft token ids are valid vocabulary ids [ScheduledBatch.draft_token_ids, "
     "scheduler → runner]: seq 42 at batch position 2: draft 1 of row 1 is -1 "
     "(expected 0 <= id < vocab_size=32)"),
    ("SG108", "drafter-output", lambda: build(
        DO, draft_token_ids=np.array([[1, 2], [3, 4], [5, 99]])),
     "SG108 draft token ids are valid vocabulary ids [DrafterOutput.draft_token_ids, "
     "drafter → scheduler]: seq 9 at batch position 2: draft 1 of row 2 is 99 "
     "(expected 0 <= id < vocab_size=32)"),
    ("SG109", "count", lambda: build(SB, num_drafts=np.array([2, 3, 0])),
     "SG109 real-draft counts are within [0, mtp_k] [ScheduledBatch.num_drafts, "
     "scheduler → runner]: seq 42 at batch position 2: row 1 claims 3 drafts "
     "(expected 0..mtp_k=2)"),
    ("SG110", "too-few-columns", lambda: build(SB, context_lens=np.array([9, 4, 21, 6, 3])),
     "SG110 block tables are not empty and cover the context [ScheduledBatch.block_tables, "
     "scheduler → runner]: seq 42 at batch position 2: context needs 6 blocks, table has 5 "
     "columns"),
    ("SG110", "padding-inside", lambda: build(SB, block_tables=_bad_block_tables()),
     "SG110 block tables are not empty and cover the context [ScheduledBatch.block_tables, "
     "scheduler → runner]: seq 43 at batch position 3: block table is empty or ends before "
     "the context does"),
    ("SG111", "short-context", lambda: build(SB, context_lens=np.array([9, 4, 17, 1, 3])),
     "SG111 context lengths cover the scheduled tokens [ScheduledBatch.context_lens, "
     "scheduler → runner]: seq 43 at batch position 3: context length 1 is shorter than the 2 "
     "scheduled tokens"),
    ("SG112", "sentinel-token", lambda: build(
        SB, token_ids=np.where(np.arange(15) == 7, -1, np.arange(15))),
     "SG112 scheduled token ids are valid vocabulary ids [ScheduledBatch.token_ids, "
     "scheduler → runner]: seq 42 at batch position 2, token 7: token id is -1 "
     "(expected 0 <= id < vocab_size=32)"),
    ("SG113", "negative-slot", lambda: build(SB, state_slots=np.array([0, 1, -1, 3, 4])),
     "SG113 state slots are real slots [ScheduledBatch.state_slots, scheduler → runner]: "
     "seq 42 at batch position 2: state slot is -1 (expected >= 0)"),
    ("SG114", "stranger", lambda: DT.from_mapping(
        [40, 42, 44], {40: [1, 2], 99: [3]}, mtp_k=2, vocab_size=32, placeholder=0),
     "SG114 drafts belong to decode seqs of the batch [DraftTokens.draft_token_ids, "
     "scheduler → runner]: seq 99: has drafts but is not a decode seq of this batch"),
    ("SG201", "accepted", lambda: build(VO, num_accepted=np.array([2, 3, 0])),
     "SG201 accepted counts are within [0, mtp_k] [VerifyOutput.num_accepted, "
     "verifier → drafter]: seq 42 at batch position 1: accepted count is 3 "
     "(expected 0..mtp_k=2)"),
    ("SG202", "hole", lambda: build(VO, token_ids=np.array([[5, 6, 9], [7, -1, -1], [3, -1, -1]])),
     "SG202 verify rows are accepted drafts, one token, then -1 padding [VerifyOutput."
     "token_ids, verifier → drafter]: seq 42 at batch position 1: column 1 (token) is -1 "
     "(expected 1 accepted + 1 token, then -1)"),
    ("SG202", "garbage-padding", lambda: build(
        VO, token_ids=np.array([[5, 6, 9], [7, 1, -1], [3, -1, 4]])),
     "SG202 verify rows are accepted drafts, one token, then -1 padding [VerifyOutput."
     "token_ids, verifier → drafter]: seq 44 at batch position 2: column 2 (padding) is 4 "
     "(expected 0 accepted + 1 token, then -1)"),
    ("SG115", "permuted-rows", lambda: build(SB, draft_seq_ids=np.array([42, 40, 44])),
     "SG115 draft row i belongs to decode seq i [ScheduledBatch.draft_seq_ids, "
     "scheduler → runner]: seq 40 at batch position 0: draft row 0 belongs to seq 42 "
     "(expected seq 40; actual seq 42)"),
    ("SG301", "sentinel-input", lambda: build(DI, input_ids=np.array([1, 2, 3, -1, 5, 6])),
     "SG301 no sentinel reaches an embedding [DrafterInput.input_ids, runner → drafter]: "
     "seq 8 at batch position 1, token 3: input id is -1 (expected 0 <= id < vocab_size=32)"),
    ("SG301", "model-input", lambda: build(MI, input_ids=np.array([1, 2, 3, 4, 5, 32])),
     "SG301 no sentinel reaches an embedding [ModelInput.input_ids, runner → target model]: "
     "seq 9 at batch position 2, token 5: input id is 32 (expected 0 <= id < vocab_size=32)"),
    ("SG302", "neighbour", lambda: build(DI, sample_indices=np.array([2, 2, 5])),
     "SG302 each seq samples from a token of its own span [DrafterInput.sample_indices, "
     "runner → drafter]: seq 8 at batch position 1: sample index 2 is outside the seq's span "
     "[3, 5)"),
    ("SG303", "negative-position", lambda: build(MI, positions=np.array([0, 1, 2, -5, 6, 0])),
     "SG303 positions are within max_model_len and contiguous in each span "
     "[ModelInput.positions, runner → target model]: "
     "seq 8 at batch position 1, token 3: position is -5 (expected >= 0)"),
    ("SG304", "ends", lambda: build(MI, query_start_loc=np.array([1, 3, 5, 6])),
     "SG304 query_start_loc runs from 0 to num_tokens without going back [ModelInput."
     "query_start_loc, runner → target model]: spans start at 1 and end at 6 "
     "(expected 0 and num_tokens=6)"),
    ("SG304", "backwards", lambda: build(MI, query_start_loc=np.array([0, 4, 3, 6])),
     "SG304 query_start_loc runs from 0 to num_tokens without going back [ModelInput."
     "query_start_loc, runner → target model]: seq 8 at batch position 1: span offsets "
     "decrease"),
    ("SG305", "past-cache", lambda: build(MI, slot_mapping=np.array([0, 1, 2, 64, 11, -1])),
     "SG305 slots are within the KV cache or -1 [ModelInput.slot_mapping, "
     "runner → target model]: seq 8 at batch position 1, token 3: slot is 64 "
     "(expected -1 <= slot < num_slots=64)"),
    ("SG306", "not-advanced", lambda: build(DI, seq_lens=np.array([3, 6, 1]), max_seq_len=7,
                                            draft_step=0),
     "SG306 each seq's seq_len reaches the last position of its span [DrafterInput.seq_lens, "
     "runner → drafter]: seq 8 at batch position 1: seq_len is 6 at draft step 0, but its "
     "span ends at position 6 (expected 7; actual 6)"),
    ("SG306", "past-the-span", lambda: build(DI, seq_lens=np.array([3, 7, 2])),
     "SG306 each seq's seq_len reaches the last position of its span [DrafterInput.seq_lens, "
     "runner → drafter]: seq 9 at batch position 2: seq_len is 2, but its span ends at "
     "position 0 (expected 1; actual 2)"),
    ("SG307", "before-the-increment", lambda: build(DI, seq_lens=np.array([3, 7, 1]),
                                                    max_seq_len=6),
     "SG307 max_seq_len covers every seq_len [DrafterInput.max_seq_len, runner → drafter]: "
     "seq 8 at batch position 1: seq_len is 7 is longer than max_seq_len=6 "
     "(expected >= 7; actual 6)"),
    ("SG308", "live-slot", lambda: build(MI, **_padded(slot_mapping=np.array(
        [0, 1, 2, 10, 11, 12, -1, 3]))),
     "SG308 padding rows write no KV: their slot is the padding slot id [ModelInput."
     "slot_mapping, runner → target model]: token 7: padding row 7's slot is 3 "
     "(expected padding_slot_id=-1)"),
    ("SG308", "reserved-slot", lambda: build(MI, **_padded(padding_slot_id=0)),
     "SG308 padding rows write no KV: their slot is the padding slot id [ModelInput."
     "slot_mapping, runner → target model]: token 6: padding row 6's slot is -1 "
     "(expected padding_slot_id=0)"),
    ("SG309", "sampled-padding", lambda: build(MI, **_padded(
        query_start_loc=np.array([0, 3, 5, 7]))),
     "SG309 padding rows are not sampled: no seq's span reaches into them [ModelInput."
     "query_start_loc, runner → target model]: seq 9 at batch position 2: spans end at 7, "
     "inside the 2 padding rows starting at 6 (expected <= num_tokens - num_padding=6)"),
    ("SG310", "real-row-padding-slot", lambda: build(MI, **_padded(slot_mapping=np.array(
        [0, 1, 2, -1, 11, 12, -1, -1]))),
     "SG310 real rows write KV: none uses the padding slot [ModelInput.slot_mapping, "
     "runner → target model]: seq 8 at batch position 1, token 3: real token 3 has the "
     "padding slot -1 (expected a KV-cache slot)"),
    ("SG116", "past-mtp-k", lambda: build(DO, num_proposed=np.array([2, 3, 0])),
     "SG116 proposed counts are within [0, mtp_k] [DrafterOutput.num_proposed, "
     "drafter → scheduler]: seq 8 at batch position 1: proposed count is 3 "
     "(expected 0..mtp_k=2)"),
    ("SG311", "one-row-per-request", lambda: build(LR, num_logits=3),
     "SG311 the logits hold one row per request plus one per draft [LogitsRows.num_logits, "
     "runner → target model]: the logits have 3 rows for 3 requests and 3 drafts "
     "(expected num_seqs + sum(num_drafts)=6; actual 3)"),
    ("SG311", "negative-drafts", lambda: build(LR, num_drafts=np.array([2, -1, 2])),
     "SG311 the logits hold one row per request plus one per draft [LogitsRows.num_drafts, "
     "runner → target model]: seq 42 at batch position 1: draft count is -1 (expected >= 0)"),
    ("SG312", "producer-counted-fewer", lambda: build(LR, row_counts=np.array([2, 0, 2])),
     "SG312 per-row data gives each request its 1 + K rows, inside the data [LogitsRows."
     "row_counts, runner → target model]: seq 40 at batch position 0: the data holds 2 rows "
     "for it, the logits 3 (expected 1 + num_drafts)"),
    ("SG312", "past-the-data", lambda: build(LR, num_rows=4),
     "SG312 per-row data gives each request its 1 + K rows, inside the data [LogitsRows."
     "row_starts, runner → target model]: seq 40 at batch position 0: its rows 2..5 run past "
     "the 4 rows of the data (expected rows within [0, num_rows=4))"),
    ("SG312", "rows-without-a-start", lambda: build(LR, row_counts=np.array([3, 1, 2])),
     "SG312 per-row data gives each request its 1 + K rows, inside the data [LogitsRows."
     "row_counts, runner → target model]: seq 42 at batch position 1: the data holds 1 rows "
     "for it but no first row (expected 0 rows for a request the data does not cover)"),
    ("SG312", "shared-rows", lambda: build(LR, row_starts=np.array([1, -1, 0])),
     "SG312 per-row data gives each request its 1 + K rows, inside the data [LogitsRows."
     "row_starts, runner → target model]: seq 40 at batch position 0: its rows start at 1, "
     "inside the rows 0..2 of batch position 2 (expected rows of its own)"),
    ("SG401", "count-past-row", lambda: build(RO, num_emitted=np.array([4, 2, 1])),
     "SG401 output rows are the emitted vocabulary ids, then -1 [RequestOutput.num_emitted, "
     "verifier → request]: seq 40 at batch position 0: emitted count is 4 "
     "(expected 0..width=3)"),
    ("SG401", "token-behind-count", lambda: build(RO, num_emitted=np.array([3, 1, 1])),
     "SG401 output rows are the emitted vocabulary ids, then -1 [RequestOutput.token_ids, "
     "verifier → request]: seq 42 at batch position 1: column 1 (padding) is 2 "
     "(expected 1 emitted vocabulary ids, then -1)"),
    ("SG401", "stop-outside-vocabulary", lambda: build(
        RO, stop_token_ids=np.array([[2], [2], [32]])),
     "SG401 output rows are the emitted vocabulary ids, then -1 [RequestOutput."
     "stop_token_ids, verifier → request]: seq 44 at batch position 2: stop id is 32 "
     "(expected -1 or 0 <= id < vocab_size=32)"),
    ("SG402", "token-after-eos", lambda: build(
        RO, token_ids=np.array([[5, 2, 9], [7, 2, -1], [3, -1, -1]])),
     "SG402 nothing is emitted after an accepted stop token [RequestOutput.token_ids, "
     "verifier → request]: seq 40 at batch position 0: column 1 is stop id 2, and 1 more "
     "token follows it (expected nothing after column 1)"),
    ("SG403", "past-limit", lambda: build(RO, num_generated=np.array([0, 5, 4]),
                                          finished=np.array([False, True, True])),
     "SG403 no request is given more than max_new_tokens [RequestOutput.num_emitted, "
     "verifier → request]: seq 44 at batch position 2: given 4 tokens before and 1 now "
     "(expected at most max_new_tokens=4 in total)"),
    ("SG404", "stopped-but-running", lambda: build(RO, finished=np.array([False, False, True])),
     "SG404 a request whose output hit a stop or the limit is marked finished "
     "[RequestOutput.finished, verifier → request]: seq 42 at batch position 1: emitted a "
     "stop token last but is not marked finished (expected finished)"),
    ("SG707", "short-vector", lambda: build(TA, tokens_across_ranks=np.array([15, 6])),
     "SG707 one token count per data-parallel rank [TokensAcrossRanks.tokens_across_ranks, "
     "across ranks]: tokens_across_ranks is i64[2] but dp_size=3 (expected dp_size=3; "
     "actual 2)"),
    ("SG708", "stale-entry", lambda: build(TA, own_tokens=9),
     "SG708 this rank's entry is its own token count [TokensAcrossRanks.tokens_across_ranks, "
     "across ranks]: entry 2 (this rank's) is 6 (expected own_tokens=9; actual 6)"),
    ("SG708", "rank-outside", lambda: build(TA, dp_rank=3),
     "SG708 this rank's entry is its own token count [TokensAcrossRanks.dp_rank, across "
     "ranks]: rank 3 has no entry in a vector of 3 (expected 0 <= dp_rank < dp_size=3; "
     "actual 3)"),
    ("SG709", "negative-count", lambda: build(TA, tokens_across_ranks=np.array([15, -1, 6])),
     "SG709 no rank's token count is negative [TokensAcrossRanks.tokens_across_ranks, "
     "across ranks]: entry 1 is -1 (expected >= 0)"),
]


def _padded(**changes: Any) -> dict[str, Any]:
    """The clean model input padded with two trailing rows that write no KV (its last
    real token given a slot: with padding declared, every real row writes KV)."""
    return {"num_tokens": 8, "input_ids": np.array([1, 2, 3, 4, 5, 6, 0, 0]),
            "positions": np.array([0, 1, 2, 5, 6, 0, 0, 0]),
            "slot_mapping": np.array([0, 1, 2, 10, 11, 12, -1, -1]), "num_padding": 2,
            **changes}


def test_declared_padding_and_attention_metadata_are_clean():
    """The clean objects with padding rows, seq_lens or proposed counts pass every rule."""
    with contracts.checking(depth="full", collect="all"):
        assert contracts.validate(build(MI, **_padded())) == []
        assert contracts.validate(build(MI, **_padded(num_padding=0, num_tokens=6,
                                                     input_ids=np.arange(1, 7),
                                                     positions=np.array([0, 1, 2, 5, 6, 0]),
                                                     slot_mapping=np.arange(6)))) == []
        assert contracts.validate(build(MI, **_padded(
            padding_slot_id=0, slot_mapping=np.array([1, 2, 3, 10, 11, 12, 0, 0])))) == []
        dummy = build(MI, num_tokens=3, seq_ids=np.zeros(0, dtype=np.int64),
                      input_ids=np.zeros(3, dtype=np.int64),
                      positions=np.zeros(3, dtype=np.int64),
                      slot_mapping=np.full(3, -1), query_start_loc=np.array([0]),
                      num_padding=3)
        assert contracts.validate(dummy) == []
        assert contracts.validate(build(DI, seq_lens=np.array([3, 7, 1]), max_seq_len=7,
                                        draft_step=0)) == []
        assert contracts.validate(build(DO, num_proposed=np.array([2, 0, 1]))) == []


def test_padding_longer_than_the_stream_is_named():
    """More padding rows than the stream has is SG308's, not an empty slice."""
    with contracts.checking(depth="full", collect="all"), \
            pytest.raises(contracts.ContractViolation) as caught:
        build(MI, **_padded(num_padding=9))
    assert "SG308" in caught.value.codes
    assert "num_padding=9 is more than the stream's num_tokens=8" in str(caught.value)


def _raise_index_error(obj: object, values: object) -> None:
    np.zeros(127)[127]


def _applies(rule: contracts.Rule) -> list[type[contracts.BoundaryObject]]:
    if "*" in rule.applies_to:
        return list(contracts.BOUNDARY_OBJECTS)
    return [cls for cls in contracts.BOUNDARY_OBJECTS if cls.__name__ in rule.applies_to]


def test_every_registered_rule_has_a_violation_case():
    """No rule code is left without a row in the table (SG000 has its own test)."""
    covered = {code for code, *_ in CASES} | {"SG000"}
    assert sorted(set(OWN_RULES) - covered) == []
    assert sorted(covered - set(OWN_RULES)) == []


@pytest.mark.parametrize(("code", "make", "message"),
                         [pytest.param(c, m, msg, id=f"{c}-{name}") for c, name, m, msg in CASES])
def test_violation_is_caught_with_its_message(code, make, message):
    """Each violating object raises ContractViolation with its code and pinned message."""
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=re.escape(message)
    ) as caught:
        make()
    assert caught.value.codes == (code,)


@pytest.mark.parametrize("code", sorted(OWN_RULES))
def test_clean_objects_pass_every_rule(code):
    """Each object a rule applies to passes it when clean, at full depth, collecting all."""
    classes = _applies(contracts.REGISTRY[code])
    assert classes or code == "SG114"
    with contracts.checking(depth="full", collect="all"):
        for cls in classes:
            assert contracts.validate(build(cls)) == []


def test_mapping_form_is_clean_for_sg114():
    """Drafts keyed only by the batch's decode seqs pass the SG114 check of from_mapping."""
    drafts = DT.from_mapping([40, 42, 44], {40: [1, 2], 44: [3]}, mtp_k=2, vocab_size=32,
                             placeholder=0)
    assert drafts.num_drafts.tolist() == [2, 0, 1]


def test_crashing_check_becomes_sg000_not_a_foreign_error(monkeypatch):
    """A rule whose check raises IndexError is reported as SG000, never as the IndexError."""
    broken = dataclasses.replace(contracts.REGISTRY["SG112"], check=_raise_index_error)
    monkeypatch.setattr(SB.__sg_plan__, "_rules", (broken,))
    monkeypatch.setattr(SB.__sg_plan__, "_by_depth", None)  # rules per depth follow
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(SB)
    assert not isinstance(caught.value, IndexError)
    assert caught.value.codes == ("SG000",)
    assert re.search(re.escape(
        "SG000 every check can evaluate [ScheduledBatch, scheduler → runner]: check SG112 "
        "could not evaluate: IndexError: index 127 is out of bounds for axis 0 with size 127"
    ), str(caught.value))


def test_registry_entries_are_documented():
    """Every rule has a title, a why and the bug it stops, and its code matches its key."""
    for code, rule in contracts.REGISTRY.items():
        assert rule.code == code
        assert re.fullmatch(r"SG\d{3}", code)
        assert rule.title and rule.why and rule.bug
