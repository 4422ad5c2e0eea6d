"""ATOM's scheduler objects as the tests build them: ATOM's field names, types and meanings.

Written from the description of ROCm/ATOM at 80b5b02be (the version of the IndexError)
and at HEAD; nothing here imports ATOM. ``decode_batch`` and ``prefill_batch`` do what
``ScheduledBatch.__init__`` does with the seqs it is given, in batch order, including its
filters: draft rows only for seqs with drafts (compacted, pre-fix) or one per seq
(dense, HEAD), ``block_tables`` only for seqs with a table, ``per_req_cache_groups`` only
for seqs with a group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BLOCK_SIZE = 16
VOCAB = 1000
EOS = 2  # ATOM appends EOS placeholders after a step: valid ids


@dataclass
class AtomSequence:
    """The fields of ATOM's ``Sequence`` that ``ScheduledBatch.__init__`` reads."""

    id: int
    token_ids: list[int]
    num_cached_tokens: int = 0
    num_rejected: int = 0
    num_bonus_tokens: int = 0
    spec_token_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    block_table: list[int] = field(default_factory=list)
    has_per_req_cache: bool = False
    per_req_cache_group: int = -1

    @property
    def num_tokens(self) -> int:
        """Tokens held by the seq, ATOM's placeholders included."""
        return len(self.token_ids)


@dataclass
class AtomScheduledBatch:
    """ATOM's ``ScheduledBatch`` (scheduler.py L197-354): per-seq fields follow ``req_ids``."""

    req_ids: list[int]
    num_scheduled_tokens: np.ndarray
    temperatures: np.ndarray
    context_lens: np.ndarray
    num_rejected: np.ndarray
    num_bonus: np.ndarray
    per_req_cache_groups: list[int]
    num_cached_tokens: list[int]
    scheduled_tokens: np.ndarray
    block_tables: list[list[int]]
    last_block_num_tokens: list[int]
    total_tokens_num: int
    total_tokens_num_prefill: int
    total_tokens_num_decode: int
    total_seqs_num: int
    total_seqs_num_prefill: int
    total_seqs_num_decode: int
    num_spec_step: int
    is_dummy_run: bool = False
    scheduled_spec_decode_tokens: np.ndarray | None = None


def sequence(seq_id: int, num_tokens: int, *, drafts: int = 0, mtp_k: int = 3,
             num_rejected: int = 0, cache_group: int | None = None) -> AtomSequence:
    """A seq holding ``num_tokens`` tokens, its table covering them, with ``drafts`` drafts."""
    tokens = [(seq_id * 7 + i) % (VOCAB - 3) + 3 for i in range(num_tokens)]
    blocks = -(-num_tokens // BLOCK_SIZE)
    return AtomSequence(
        id=seq_id, token_ids=tokens, num_rejected=num_rejected,
        spec_token_ids=(np.arange(drafts, dtype=np.int32) + seq_id) % VOCAB,
        block_table=list(range(seq_id * 64, seq_id * 64 + blocks)),
        has_per_req_cache=cache_group is not None,
        per_req_cache_group=-1 if cache_group is None else cache_group)


def _common(seqs: list[AtomSequence], scheduled: list[int], context: list[int],
            tokens: list[int], mtp_k: int) -> dict[str, Any]:
    n = len(seqs)
    return {
        "req_ids": [s.id for s in seqs],
        "num_scheduled_tokens": np.asarray(scheduled, dtype=np.int32).reshape(n),
        "temperatures": np.zeros(n, dtype=np.float32),
        "context_lens": np.asarray(context, dtype=np.int32).reshape(n),
        "num_rejected": np.asarray([s.num_rejected for s in seqs], dtype=np.int32).reshape(n),
        "num_bonus": np.asarray([s.num_bonus_tokens for s in seqs], dtype=np.int32).reshape(n),
        "per_req_cache_groups": [s.per_req_cache_group for s in seqs
                                 if s.has_per_req_cache and s.per_req_cache_group >= 0],
        "num_cached_tokens": [s.num_cached_tokens for s in seqs],
        "scheduled_tokens": np.asarray(tokens, dtype=np.int32),
        "block_tables": [s.block_table for s in seqs if s.block_table],
        "last_block_num_tokens": [s.num_tokens - (len(s.block_table) - 1) * BLOCK_SIZE
                                  for s in seqs],
        "total_tokens_num": sum(scheduled), "total_seqs_num": n,
    }


def decode_batch(seqs: list[AtomSequence], *, mtp_k: int = 3, dense: bool = False,
                 num_spec_step: int | None = None) -> AtomScheduledBatch:
    """A decode step: every seq ``mtp_k + 1`` tokens; drafts compacted or dense."""
    q = mtp_k + 1
    tokens: list[int] = []
    for s in seqs:
        start = s.num_tokens - s.num_rejected - q
        tokens.extend(s.token_ids[start:start + q])
    drafts = {s.id: s.spec_token_ids for s in seqs if s.spec_token_ids.size > 0}
    if dense:
        rows = np.zeros((len(seqs), mtp_k), dtype=np.int32)
        for i, s in enumerate(seqs):
            if s.id in drafts:
                rows[i] = drafts[s.id]
    else:
        rows = np.asarray(list(drafts.values()))
    common = _common(seqs, [q] * len(seqs), [s.num_tokens for s in seqs], tokens, mtp_k)
    return AtomScheduledBatch(
        **common, total_tokens_num_prefill=0, total_tokens_num_decode=q * len(seqs),
        total_seqs_num_prefill=0, total_seqs_num_decode=len(seqs),
        num_spec_step=mtp_k if num_spec_step is None else num_spec_step,
        scheduled_spec_decode_tokens=rows)


def prefill_batch(seqs: list[AtomSequence], chunks: list[int]) -> AtomScheduledBatch:
    """A prefill step: each seq's next chunk from its ``num_cached_tokens``."""
    tokens: list[int] = []
    for s, chunk in zip(seqs, chunks, strict=True):
        tokens.extend(s.token_ids[s.num_cached_tokens:s.num_cached_tokens + chunk])
    context = [s.num_cached_tokens + c for s, c in zip(seqs, chunks, strict=True)]
    common = _common(seqs, chunks, context, tokens, 0)
    return AtomScheduledBatch(
        **common, total_tokens_num_prefill=sum(chunks), total_tokens_num_decode=0,
        total_seqs_num_prefill=len(seqs), total_seqs_num_decode=0, num_spec_step=0)


def after_prefill(s: AtomSequence, mtp_k: int = 3) -> None:
    """ATOM's postprocess of a final prefill chunk: ``k + 1`` placeholders appended."""
    s.num_cached_tokens = s.num_tokens
    s.token_ids.extend([EOS] * (mtp_k + 1))
    s.num_rejected = 0


def after_decode(s: AtomSequence, delivered_rejected: int, mtp_k: int = 3) -> None:
    """ATOM's postprocess of a decode step: ``(k + 1) - num_rejected`` placeholders, where
    ``num_rejected`` is the delivered (previous) step's count."""
    s.num_rejected = delivered_rejected
    s.token_ids.extend([EOS] * (mtp_k + 1 - delivered_rejected))
    grown = -(-s.num_tokens // BLOCK_SIZE)
    s.block_table.extend(range(s.block_table[-1] + 1, s.block_table[-1] + 1 + grown
                               - len(s.block_table)))
