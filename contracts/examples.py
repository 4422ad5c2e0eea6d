"""Clean boundary objects, one broken object per contract rule, and the two motivating crashes.

The docs' rule catalogue prints, for every rule, the message its broken object raises,
produced from the live code when the site is built; the tests hold every registered rule
to an example that breaks that rule first. Each broken object is a clean one with one
field changed, so an example reads as "this is the mistake" and nothing else. The rules
of the engine adapters have their examples in :mod:`specguard.adapters.examples`, which
also holds the complete catalogue.

The clean batch: four seqs in batch order, three decoding with ``mtp_k = 3`` (seq 13 has
just finished prefill and has no drafts yet, so its row holds placeholders) and one
prefill chunk of five tokens. :data:`STORIES` rebuilds the two crashes the docs tell
(ATOM's compacted draft rows, vLLM's ``-1`` at the MTP head's embedding) as the objects
that would carry them across a contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from specguard import contracts as sg

__all__ = [
    "CLEAN",
    "EXAMPLES",
    "MTP_K",
    "NO_EXAMPLE",
    "STORIES",
    "VOCAB",
    "Example",
    "KvTransfer",
    "batch_fields",
    "draft_tokens",
    "drafter_input",
    "drafter_output",
    "ids",
    "logits_rows",
    "model_input",
    "request_output",
    "scheduled_batch",
    "tokens_across_ranks",
    "verify_output",
    "violation_of",
]

#: The clean objects' drafts per step and vocabulary size.
MTP_K = 3
VOCAB = 1000
_MTP_K, _VOCAB = MTP_K, VOCAB


def ids(*values: int | list[int]) -> npt.NDArray[np.int32]:
    """An int32 array of ``values`` (a vector of ints, or a matrix of int lists)."""
    return np.array(values, dtype=np.int32)


_ids = ids


def batch_fields(**changes: Any) -> dict[str, Any]:
    """The clean batch's constructor arguments, with ``changes`` applied."""
    fields: dict[str, Any] = {
        "mtp_k": _MTP_K,
        "vocab_size": _VOCAB,
        "block_size": 16,
        "num_decode": 3,
        "num_tokens": 17,
        "seq_ids": _ids(11, 12, 13, 14),
        "is_decode": np.array([True, True, True, False]),
        "num_scheduled_tokens": _ids(4, 4, 4, 5),
        "context_lens": _ids(20, 36, 9, 5),
        "block_tables": _ids([0, 1, -1], [2, 3, 4], [5, -1, -1], [6, -1, -1]),
        "token_ids": np.arange(100, 117, dtype=np.int32),
        "draft_token_ids": _ids([101, 102, 103], [105, 106, 107], [108, 108, 108]),
        "num_drafts": _ids(3, 3, 0),
    }
    fields.update(changes)
    return fields


def scheduled_batch(**changes: Any) -> sg.ScheduledBatch:
    return sg.ScheduledBatch(**batch_fields(**changes))


def draft_tokens(**changes: Any) -> sg.DraftTokens:
    fields: dict[str, Any] = {
        "mtp_k": _MTP_K,
        "vocab_size": _VOCAB,
        "seq_ids": _ids(11, 12, 13),
        "draft_token_ids": _ids([101, 102, 103], [105, 106, 107], [108, 108, 108]),
        "num_drafts": _ids(3, 3, 0),
    }
    return sg.DraftTokens(**{**fields, **changes})


def model_input(**changes: Any) -> sg.ModelInput:
    fields: dict[str, Any] = {
        "vocab_size": _VOCAB,
        "num_slots": 7 * 16,
        "num_tokens": 17,
        "seq_ids": _ids(11, 12, 13, 14),
        "input_ids": np.arange(100, 117, dtype=np.int32),
        "positions": _ids(16, 17, 18, 19, 32, 33, 34, 35, 5, 6, 7, 8, 0, 1, 2, 3, 4),
        "slot_mapping": _ids(16, 17, 18, 19, 64, 65, 66, 67, 85, 86, 87, 88, 96, 97, 98, 99,
                             100),
        "query_start_loc": _ids(0, 4, 8, 12, 17),
    }
    return sg.ModelInput(**{**fields, **changes})


def verify_output(**changes: Any) -> sg.VerifyOutput:
    fields: dict[str, Any] = {
        "mtp_k": _MTP_K,
        "vocab_size": _VOCAB,
        "seq_ids": _ids(11, 12, 13),
        "token_ids": _ids([101, 102, 103, 104], [105, 555, -1, -1], [777, -1, -1, -1]),
        "num_accepted": _ids(3, 1, 0),
    }
    return sg.VerifyOutput(**{**fields, **changes})


def drafter_input(**changes: Any) -> sg.DrafterInput:
    fields: dict[str, Any] = {
        "vocab_size": _VOCAB,
        "num_tokens": 12,
        "seq_ids": _ids(11, 12, 13),
        "input_ids": _ids(102, 103, 104, 104, 106, 555, 555, 555, 777, 777, 777, 777),
        "positions": _ids(17, 18, 19, 20, 33, 34, 35, 36, 6, 7, 8, 9),
        "query_start_loc": _ids(0, 4, 8, 12),
        "sample_indices": _ids(3, 5, 8),
    }
    return sg.DrafterInput(**{**fields, **changes})


def drafter_output(**changes: Any) -> sg.DrafterOutput:
    fields: dict[str, Any] = {
        "mtp_k": _MTP_K,
        "vocab_size": _VOCAB,
        "seq_ids": _ids(11, 12, 13),
        "draft_token_ids": _ids([201, 202, 203], [204, 205, 206], [207, 208, 209]),
    }
    return sg.DrafterOutput(**{**fields, **changes})


#: The clean stream's slots, before three padding rows.
_PADDED_SLOTS = (16, 17, 18, 19, 64, 65, 66, 67, 85, 86, 87, 88, 96, 97, 98, 99, 100)


def _padded_input(**changes: Any) -> sg.ModelInput:
    """The clean stream padded to 20 rows, a captured graph's size: three padding rows
    of token 0 at position 0 that write no KV."""
    fields: dict[str, Any] = {
        "num_tokens": 20,
        "input_ids": np.concatenate([np.arange(100, 117, dtype=np.int32), _ids(0, 0, 0)]),
        "positions": _ids(16, 17, 18, 19, 32, 33, 34, 35, 5, 6, 7, 8, 0, 1, 2, 3, 4, 0, 0, 0),
        "slot_mapping": _ids(*_PADDED_SLOTS, -1, -1, -1),
        "num_padding": 3,
    }
    return model_input(**{**fields, **changes})


def _draft_step(**changes: Any) -> sg.DrafterInput:
    """Draft step 1 after the clean drafter input: one token per seq (the first drafts),
    one position past each sample, seq_lens and max_seq_len advanced with it."""
    fields: dict[str, Any] = {
        "num_tokens": 3,
        "input_ids": _ids(201, 204, 207),
        "positions": _ids(21, 35, 7),
        "query_start_loc": _ids(0, 1, 2, 3),
        "sample_indices": _ids(0, 1, 2),
        "seq_lens": _ids(22, 36, 8),
        "max_seq_len": 36,
        "draft_step": 1,
    }
    return drafter_input(**{**fields, **changes})

def logits_rows(**changes: Any) -> sg.LogitsRows:
    # The clean batch's logits: three decode seqs scheduled 3 drafts each (seq 13's are
    # placeholders, verified all the same) and the prefill seq: 13 rows. Seqs 11 and 13
    # follow a grammar; its bitmask holds 13's four rows first, then 11's.
    fields: dict[str, Any] = {
        "num_logits": 13,
        "num_rows": 8,
        "seq_ids": _ids(11, 12, 13, 14),
        "num_drafts": _ids(3, 3, 3, 0),
        "row_starts": _ids(4, -1, 0, -1),
        "row_counts": _ids(4, 0, 4, 0),
    }
    return sg.LogitsRows(**{**fields, **changes})


def request_output(**changes: Any) -> sg.RequestOutput:
    # The clean verify rows as delivered: seq 11 accepted everything, seq 12 stops at its
    # end-of-sequence id 555 and is finished, seq 13 reaches its limit of 8 tokens.
    fields: dict[str, Any] = {
        "vocab_size": _VOCAB,
        "seq_ids": _ids(11, 12, 13),
        "token_ids": _ids([101, 102, 103, 104], [105, 555, -1, -1], [777, -1, -1, -1]),
        "num_emitted": _ids(4, 2, 1),
        "num_generated": _ids(10, 3, 7),
        "max_new_tokens": _ids(64, 64, 8),
        "stop_token_ids": _ids([999, -1], [555, 2], [999, -1]),
        "finished": np.array([False, True, True]),
    }
    return sg.RequestOutput(**{**fields, **changes})


def tokens_across_ranks(**changes: Any) -> sg.TokensAcrossRanks:
    # Rank 1 of four: it runs 17 tokens, the clean batch.
    fields: dict[str, Any] = {
        "dp_size": 4,
        "dp_rank": 1,
        "own_tokens": 17,
        "tokens_across_ranks": _ids(12, 17, 4, 9),
    }
    return sg.TokensAcrossRanks(**{**fields, **changes})


#: A clean instance of every boundary class, by class name; keyword arguments change fields.
CLEAN: dict[str, Callable[..., sg.BoundaryObject]] = {
    "ScheduledBatch": scheduled_batch,
    "DraftTokens": draft_tokens,
    "ModelInput": model_input,
    "VerifyOutput": verify_output,
    "DrafterInput": drafter_input,
    "DrafterOutput": drafter_output,
    "LogitsRows": logits_rows,
    "RequestOutput": request_output,
    "TokensAcrossRanks": tokens_across_ranks,
}


@dataclass(frozen=True)
class Example:
    """A broken object for one rule: what is wrong with it, and how to build it."""

    code: str
    mistake: str
    build: Callable[[], object]


@sg.boundary_object(sg.Boundary.ANY)
class KvTransfer(sg.BoundaryObject):
    """An engine's own object: the KV blocks a prefill node hands a decode node."""

    # A one-name shape stays quoted: unquoted, evaluating the annotation raises NameError.
    block_ids: sg.Index[sg.Array, "num_blocks"]  # noqa: F821, UP037
    """Blocks sent, in transfer order."""
    block_hashes: sg.Index[sg.Array, "num_blocks"]  # noqa: F821, UP037
    """Content hash of each block sent, checked on arrival."""


def _torch_token_ids() -> Any:
    import torch

    return torch.arange(100, 117, dtype=torch.int32)


def _compacted_draft_rows() -> sg.ScheduledBatch:
    # The scheduler wrote rows only for seqs that already had drafts (ATOM #1444).
    rows = {11: [101, 102, 103], 12: [105, 106, 107]}
    return scheduled_batch(draft_token_ids=np.asarray(list(rows.values()), dtype=np.int32),
                  num_drafts=_ids(3, 3))


def _stale_drafts() -> sg.DraftTokens:
    drafts = {11: [101, 102, 103], 12: [105, 106, 107], 99: [1, 2, 3]}
    return sg.DraftTokens.from_mapping([11, 12, 13], drafts, mtp_k=_MTP_K, vocab_size=_VOCAB,
                                       placeholder=108)


_EXAMPLES = (
    Example("SG001", "draft rows handed over as the scheduler's dict",
            lambda: scheduled_batch(draft_token_ids={11: [101, 102, 103], 12: [105, 106, 107]})),
    Example("SG002", "token ids stored as floats",
            lambda: scheduled_batch(token_ids=np.arange(100, 117, dtype=np.float32))),
    Example("SG003", "the draft matrix flattened to one axis",
            lambda: scheduled_batch(draft_token_ids=np.arange(101, 110, dtype=np.int32))),
    Example("SG004", "an engine's own object (declared with `boundary_object`) with one hash "
            "missing for three blocks sent",
            lambda: KvTransfer(block_ids=_ids(4, 5, 6), block_hashes=_ids(91, 92))),
    Example("SG005", "token ids on torch, everything else on numpy",
            lambda: scheduled_batch(token_ids=_torch_token_ids())),
    Example("SG006", "mtp_k of 0", lambda: scheduled_batch(mtp_k=0)),
    Example("SG010", "the data-parallel dummy seq carries id -1",
            lambda: scheduled_batch(seq_ids=_ids(11, 12, 13, -1))),
    Example("SG101", "draft rows only for the decode seqs that already have drafts",
            _compacted_draft_rows),
    Example("SG102", "draft rows two wide while mtp_k is 3",
            lambda: scheduled_batch(draft_token_ids=_ids([101, 102], [105, 106], [108, 108]))),
    Example("SG103", "the draft-less decode seq scheduled one token instead of mtp_k+1",
            lambda: scheduled_batch(num_scheduled_tokens=_ids(4, 4, 1, 5), num_tokens=14,
                           token_ids=np.arange(100, 114, dtype=np.int32))),
    Example("SG104", "one token missing from the flat token stream",
            lambda: scheduled_batch(token_ids=np.arange(100, 116, dtype=np.int32))),
    Example("SG105", "the prefill seq's block table filtered out",
            lambda: scheduled_batch(block_tables=_ids([0, 1, -1], [2, 3, 4], [5, -1, -1]))),
    Example("SG106", "num_tokens not updated after the prefill chunk grew by one",
            lambda: scheduled_batch(num_scheduled_tokens=_ids(4, 4, 4, 6),
                                    context_lens=_ids(20, 36, 9, 6))),
    Example("SG107", "seq 13 flagged prefill while num_decode still counts it",
            lambda: scheduled_batch(is_decode=np.array([True, True, False, False]))),
    Example("SG108", "a -1 placeholder row for the seq without drafts",
            lambda: scheduled_batch(
                draft_token_ids=_ids([101, 102, 103], [105, 106, 107], [-1, -1, -1]))),
    Example("SG109", "a row claiming four real drafts with mtp_k 3",
            lambda: scheduled_batch(num_drafts=_ids(3, 4, 0))),
    Example("SG110", "a block table one block short of its context",
            lambda: scheduled_batch(
                block_tables=_ids([0, 1, -1], [2, 3, -1], [5, -1, -1], [6, -1, -1]))),
    Example("SG111", "a context shorter than the chunk scheduled for it",
            lambda: scheduled_batch(context_lens=_ids(20, 36, 9, 3))),
    Example("SG112", "a -1 padding placeholder in the scheduled tokens",
            lambda: scheduled_batch(token_ids=np.concatenate(
                [np.arange(100, 116, dtype=np.int32), _ids(-1)]))),
    Example("SG113", "a negative state slot",
            lambda: scheduled_batch(state_slots=_ids(0, 1, -1, 3))),
    Example("SG114", "drafts left over for a seq that is no longer decoding", _stale_drafts),
    Example("SG115", "the draft rows of seqs 11 and 12 swapped",
            lambda: scheduled_batch(draft_seq_ids=_ids(12, 11, 13))),
    Example("SG201", "an accepted count past mtp_k",
            lambda: verify_output(num_accepted=_ids(3, 4, 0))),
    Example("SG202", "a verify row with a hole before its correction token",
            lambda: verify_output(token_ids=_ids([101, 102, 103, 104], [105, -1, 555, -1],
                                                  [777, -1, -1, -1]),
                                   num_accepted=_ids(3, 2, 0))),
    Example("SG301", "padded speculation's -1 for a discarded row fed to the MTP head",
            lambda: drafter_input(input_ids=_ids(102, 103, 104, 104, 106, 555, 555, 555,
                                                  777, 777, 777, -1))),
    Example("SG302", "seq 12 sampling from seq 11's last token",
            lambda: drafter_input(sample_indices=_ids(3, 3, 8))),
    Example("SG303", "a negative position",
            lambda: drafter_input(positions=_ids(17, 18, 19, 20, 33, 34, 35, 36, -1, 7, 8, 9))),
    Example("SG304", "span offsets that stop one token short of the stream",
            lambda: drafter_input(query_start_loc=_ids(0, 4, 8, 11))),
    Example("SG305", "a slot past the end of the KV cache",
            lambda: model_input(slot_mapping=_ids(16, 17, 18, 19, 64, 65, 66, 67, 85, 86, 87,
                                                   88, 96, 97, 98, 99, 112))),
    Example("SG306", "a draft step whose seq_lens were not advanced with its positions",
            lambda: _draft_step(seq_lens=_ids(21, 35, 7))),
    Example("SG307", "a draft step's max_seq_len computed before its increment",
            lambda: _draft_step(max_seq_len=35)),
    Example("SG308", "a padding row left with a slot of the previous step",
            lambda: _padded_input(slot_mapping=_ids(*_PADDED_SLOTS, -1, 16, -1))),
    Example("SG309", "seq 14's span running into the padding rows",
            lambda: _padded_input(query_start_loc=_ids(0, 4, 8, 12, 18))),
    Example("SG310", "a real token of seq 12 given the padding slot",
            lambda: _padded_input(slot_mapping=_ids(
                16, 17, 18, 19, 64, -1, 66, 67, 85, 86, 87, 88, 96, 97, 98, 99, 100,
                -1, -1, -1))),
    Example("SG116", "a skipped drafter's row claiming four proposed drafts with mtp_k 3",
            lambda: drafter_output(num_proposed=_ids(3, 4, 0))),
    Example("SG311", "logits laid out with one row per request, as if nothing were drafted",
            lambda: logits_rows(num_logits=4)),
    Example("SG312", "a bitmask laid out with two drafts for seq 11, which the runner "
            "schedules three", lambda: logits_rows(row_counts=_ids(3, 0, 4, 0))),
    Example("SG401", "an emitted count one past the tokens in the row",
            lambda: request_output(num_emitted=_ids(4, 3, 1))),
    Example("SG402", "seq 12 given the token its drafts had after its end-of-sequence id",
            lambda: request_output(token_ids=_ids([101, 102, 103, 104], [105, 555, 556, -1],
                                                  [777, -1, -1, -1]),
                                   num_emitted=_ids(4, 3, 1))),
    Example("SG403", "seq 11 given all four verified tokens with two left to its limit",
            lambda: request_output(max_new_tokens=_ids(12, 64, 8))),
    Example("SG404", "seq 13 at its limit but still running",
            lambda: request_output(finished=np.array([False, True, False]))),
    Example("SG707", "a vector with an entry for three ranks in a group of four",
            lambda: tokens_across_ranks(tokens_across_ranks=_ids(12, 17, 4))),
    Example("SG708", "the vector of the previous forward, when this rank ran 12 tokens",
            lambda: tokens_across_ranks(tokens_across_ranks=_ids(12, 12, 4, 9))),
    Example("SG709", "an idle rank's entry left at -1",
            lambda: tokens_across_ranks(tokens_across_ranks=_ids(12, 17, -1, 9))),
)

#: The broken object of every rule that one can break on its own, by rule code.
EXAMPLES: dict[str, Example] = {example.code: example for example in _EXAMPLES}

def _atom_1444() -> sg.ScheduledBatch:
    # 128 decode seqs; seq 127 just finished prefill, so the scheduler's
    # `if seq.spec_token_ids.size > 0` filter gave it no entry in the drafts dict.
    n, k, vocab = 128, 3, 129280
    drafts = {seq: [1000 + seq, 2000 + seq, 3000 + seq] for seq in range(n - 1)}
    tokens = np.arange(n * (k + 1), dtype=np.int32) % vocab
    return sg.ScheduledBatch(
        mtp_k=k, vocab_size=vocab, block_size=16, num_decode=n, num_tokens=n * (k + 1),
        seq_ids=np.arange(n, dtype=np.int32), is_decode=np.ones(n, dtype=bool),
        num_scheduled_tokens=np.full(n, k + 1, dtype=np.int32),
        context_lens=np.full(n, 40, dtype=np.int32),
        block_tables=np.arange(n * 3, dtype=np.int32).reshape(n, 3),
        token_ids=tokens,
        draft_token_ids=np.asarray(list(drafts.values()), dtype=np.int32),
        num_drafts=np.full(n - 1, k, dtype=np.int32),
    )


def _vllm_26231() -> sg.DrafterInput:
    # Four requests, four tokens each; request 2 is mid chunked prefill, so padded
    # speculation kept its row and marked its next token -1.
    next_tokens = _ids(5001, 5002, -1, 5004)
    spans = np.arange(16, dtype=np.int32).reshape(4, 4) + 700
    spans[:, -1] = next_tokens
    return sg.DrafterInput(
        vocab_size=129280, num_tokens=16, seq_ids=_ids(0, 1, 2, 3),
        input_ids=spans.reshape(-1), positions=np.arange(16, dtype=np.int32) % 4 + 60,
        query_start_loc=_ids(0, 4, 8, 12, 16), sample_indices=_ids(3, 7, 11, 15),
    )


#: The two crashes that motivated specguard, rebuilt as the objects that carry them.
STORIES: dict[str, Example] = {
    "atom-1444": Example("SG101", "ATOM #1444: a compacted (127, 3) draft array for 128 decode "
                         "seqs", _atom_1444),
    "vllm-26231": Example("SG301", "vLLM #26231: padded speculation's -1 reaching the MTP "
                          "head's embed_tokens", _vllm_26231),
}

#: Rules that no object can break on its own, and why (none today).
NO_EXAMPLE: dict[str, str] = {
    "SG000": "No known input makes a built-in check fail to evaluate any more: the "
    "hostile-input fuzz (huge integers, sparse tensors, lying ndarray subclasses, empty "
    "device tensors) holds every check to a verdict. SG000 stays as the safety net for "
    "inputs nobody has imagined yet and for the checks of an engine's own rules.",
}


def violation_of(example: Example, depth: str = "full") -> sg.ContractViolation:
    """Build a broken object under strict checking at ``depth`` (full unless told) and
    return what it raised."""
    with sg.checking(mode="strict", depth=depth, collect="first"):
        try:
            example.build()
        except sg.ContractViolation as error:
            return error
    raise LookupError(f"the example of {example.code} ({example.mistake}) broke no rule")

