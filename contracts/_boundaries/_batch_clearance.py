"""The clearance of a numpy ScheduledBatch: its per-seq value rules in one pass.

What the rules SG010, SG103, SG106, SG107, SG108, SG109, SG111, SG112, SG113 and SG115
check, answered together: the decode count once for SG103, SG106, SG107 and SG115, one
unsigned maximum per vocabulary or range bound, one sort (or table) for the ids. SG110
reads the block tables and keeps its own pass. See :mod:`._clearance` for the contract
a clearance keeps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._id_index import any_repeated, dense_span
from specguard.contracts._core._arrays import UNSIGNED
from specguard.contracts._core._clearance import clearance

__all__: list[str] = []

_count_nonzero = np.count_nonzero
_maximum = np.maximum.reduce
_minimum = np.minimum.reduce
_add = np.add.reduce
#: Signed dtype: its unsigned twin, and the bound up to which one maximum of the twin
#: proves "in [0, bound)" (a negative value wraps to at least that).
_UNSIGNED_BOUND = {dtype: (UNSIGNED[dtype], 2 ** (8 * dtype.itemsize - 1)) for dtype in UNSIGNED}
#: From this many ids on, compact ids are counted in a table (as SG010 does).
_TABLE_FROM = 512


def _within(a: np.ndarray, bound: int) -> bool:
    """Every element in ``[0, bound)``."""
    if not a.size:
        return True
    unsigned = _UNSIGNED_BOUND.get(a.dtype)
    if unsigned is not None and bound <= unsigned[1]:
        return bool(_maximum(a.view(unsigned[0]), None) < bound)
    return bool(_minimum(a, None) >= 0 and _maximum(a, None) < bound)


def _unique_non_negative(ids: np.ndarray) -> bool:
    n = ids.shape[0]
    if n >= _TABLE_FROM:
        span = dense_span(ids)
        if span is not None:
            return not any_repeated(ids, *span)
    if n < 2:
        return not n or bool(ids[0] >= 0)
    ordered = np.sort(ids)
    return bool(ordered[0] >= 0) and not _count_nonzero(ordered[1:] == ordered[:-1])


def _drafts_valid(b: Any) -> bool:
    drafts, vocab, placeholder = b.draft_token_ids, int(b.vocab_size), b.draft_placeholder
    if placeholder is None:
        return _within(drafts, vocab)
    return not _count_nonzero((drafts != placeholder) & ((drafts < 0) | (drafts >= vocab)))


@clearance("ScheduledBatch", covers=("SG010", "SG103", "SG106", "SG107", "SG108", "SG109",
                                     "SG111", "SG112", "SG113", "SG115"))
def _clear(b: Any) -> bool:
    ids, flags, counts, context = b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens
    n, width, total = ids.shape[0], int(b.mtp_k) + 1, int(b.num_tokens)
    decoding = int(_count_nonzero(flags))
    if decoding != b.num_decode or (n and not _unique_non_negative(ids)):
        return False  # SG107's count, SG010
    if decoding == n:  # all decode: every count is mtp_k+1 (SG103), so the sum is known
        if n and (_count_nonzero(counts != width) or width > total):
            return False
        scheduled = n * width
    else:
        if _count_nonzero(flags & (counts != width)) or _count_nonzero(~flags & (counts < 1)):
            return False  # SG103, SG107's prefill counts
        if not _within(counts, total + 1):
            return False  # SG106's range, which keeps the sum below from wrapping
        scheduled = int(_add(counts, None))
    if scheduled != total:
        return False  # SG106
    if _count_nonzero(context < counts) or _count_nonzero(flags & (context == counts)):
        return False  # SG111
    slots, owners = b.state_slots, b.draft_seq_ids
    return (_drafts_valid(b)  # SG108
            and _within(b.num_drafts, int(b.mtp_k) + 1)  # SG109
            and _within(b.token_ids, int(b.vocab_size))  # SG112
            and (slots is None or not slots.size or bool(_minimum(slots, None) >= 0))  # SG113
            and (owners is None or not _count_nonzero(  # SG115
                (ids if decoding == n else ids[flags]) != owners)))
