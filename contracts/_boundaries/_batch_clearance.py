"""The clearances of a numpy ScheduledBatch and of its DraftTokens: their per-seq value
rules in one pass.

What the rules SG010, SG103, SG106, SG107, SG108, SG109, SG111, SG112, SG113 and SG115
check, answered together: the decode count once for SG103, SG106, SG107 and SG115, one
unsigned maximum per vocabulary or range bound, one sort (or table) for the ids. SG110
reads the block tables and keeps its own pass. See :mod:`._clearance` for the contract
a clearance keeps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._seq_ids import unique_non_negative
from specguard.contracts._core._clearance import clearance
from specguard.contracts._core._compiled import int_or_none, verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import minimum_of as _minimum
from specguard.contracts._core._values import all_within

__all__: list[str] = []

_add = np.add.reduce


def _drafts_valid(b: Any) -> bool:
    drafts, vocab, placeholder = b.draft_token_ids, int(b.vocab_size), b.draft_placeholder
    if placeholder is None:
        return all_within(drafts, vocab)
    return not _count_nonzero((drafts != placeholder) & ((drafts < 0) | (drafts >= vocab)))


def _compiled_batch(b: Any) -> bool | None:
    return verdict(
        "scheduled_batch", b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens,
        int(b.mtp_k), int(b.num_tokens), int(b.num_decode), b.draft_token_ids,
        int(b.vocab_size), int_or_none(b.draft_placeholder), b.num_drafts, b.token_ids,
        b.state_slots, b.draft_seq_ids)


@clearance("ScheduledBatch", covers=("SG010", "SG103", "SG106", "SG107", "SG108", "SG109",
                                     "SG111", "SG112", "SG113", "SG115"),
           compiled=_compiled_batch)
def _clear(b: Any) -> bool:
    ids, flags, counts, context = b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens
    n, width, total = ids.shape[0], int(b.mtp_k) + 1, int(b.num_tokens)
    decoding = int(_count_nonzero(flags))
    if decoding != b.num_decode or (n and not unique_non_negative(ids)):
        return False  # SG107's count, SG010
    if decoding == n:  # all decode: every count is mtp_k+1 (SG103), so the sum is known
        if n and (_count_nonzero(counts != width) or width > total):
            return False
        scheduled = n * width
    else:
        if _count_nonzero(flags & (counts != width)) or _count_nonzero(~flags & (counts < 1)):
            return False  # SG103, SG107's prefill counts
        if not all_within(counts, total + 1):
            return False  # SG106's range, which keeps the sum below from wrapping
        scheduled = int(_add(counts, None))
    if scheduled != total:
        return False  # SG106
    if _count_nonzero(context < counts) or _count_nonzero(flags & (context == counts)):
        return False  # SG111
    slots, owners = b.state_slots, b.draft_seq_ids
    return (_drafts_valid(b)  # SG108
            and all_within(b.num_drafts, int(b.mtp_k) + 1)  # SG109
            and all_within(b.token_ids, int(b.vocab_size))  # SG112
            and (slots is None or not slots.size or bool(_minimum(slots, None) >= 0))  # SG113
            and (owners is None or not _count_nonzero(  # SG115
                (ids if decoding == n else ids[flags]) != owners)))


def _compiled_draft_tokens(d: Any) -> bool | None:
    # The same three answers as a DrafterOutput's, so the same compiled pass.
    return verdict("drafter_output", d.seq_ids, d.draft_token_ids, int(d.vocab_size),
                   d.num_drafts, int(d.mtp_k))


@clearance("DraftTokens", covers=("SG010", "SG108", "SG109"), compiled=_compiled_draft_tokens)
def _clear_draft_tokens(d: Any) -> bool:
    """The scheduler's draft rows: unique owners, vocabulary ids, counts within mtp_k."""
    ids, drafts, counts, mtp_k = d.seq_ids, d.draft_token_ids, d.num_drafts, int(d.mtp_k)
    return (unique_non_negative(ids) and all_within(drafts, int(d.vocab_size))  # SG010, SG108
            and all_within(counts, mtp_k + 1))  # SG109
