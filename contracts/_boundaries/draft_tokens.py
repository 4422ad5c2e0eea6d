"""``DraftTokens``: dense draft rows, one per decode seq, built so by construction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specguard.contracts._boundaries._dense_rows import (
    dense_from_mapping,
    dense_from_rows,
    row_mapping,
)
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, structural_rule

__all__ = ["DraftTokens"]


@boundary_object(Boundary.SCHEDULE, minimums={"mtp_k": 1, "vocab_size": 1})
class DraftTokens(BoundaryObject):
    """The draft rows the scheduler hands the runner: ``(num_decode, mtp_k)``.

    Row ``i`` belongs to ``seq_ids[i]``, the ``i``-th decode seq in batch order. A seq
    without drafts (one that just finished prefill) still has a row, filled with a
    placeholder that is a valid token id, and ``num_drafts`` says how many are real.
    """

    mtp_k: int
    """Draft tokens per decode seq."""
    vocab_size: int
    """Vocabulary size; placeholders and drafts are in ``[0, vocab_size)``."""
    seq_ids: Index[Array, "num_decode"]
    """The decode seqs, in batch order: row ``i`` belongs to ``seq_ids[i]``."""
    draft_token_ids: Index[Array, "num_decode mtp_k"]
    """Draft ids, then placeholder ids for the slots without a real draft."""
    num_drafts: Index[Array, "num_decode"]
    """Real drafts per row, in ``[0, mtp_k]``."""

    @classmethod
    def from_mapping(
        cls,
        seq_ids: Sequence[int] | np.ndarray,
        drafts: Mapping[int, Sequence[int] | np.ndarray],
        *,
        mtp_k: int,
        vocab_size: int,
        placeholder: int | Sequence[int] | np.ndarray,
        dtype: Any = np.int32,
    ) -> DraftTokens:
        """Dense rows from the engines' usual form: seq id → drafts, missing when none.

        ``seq_ids`` lists the decode seqs in batch order; each gets exactly one row. They
        are stored as int64 whatever ``dtype`` is: ``dtype`` is the width of token ids.
        ``placeholder`` fills the slots without a real draft: one id for all rows, or one
        per seq (the seq's own last token is a good choice). It has no default on
        purpose: a silent ``0`` made placeholder rows look like drafts of token 0, so the
        caller states what the free slots hold, and ``num_drafts`` says how many are real.
        The rows go to the target model as they are, so a placeholder must be a
        vocabulary id (SG108): ``contracts.PLACEHOLDER`` (-1) is refused here. A runner
        that masks its placeholder slots declares the value on the
        :class:`ScheduledBatch` instead (``draft_placeholder=-1``), where SG108 lets
        exactly that value through. A seq with more than ``mtp_k`` drafts, or drafts for a
        seq not in ``seq_ids``, is a violation.
        """
        ids, rows, counts = dense_from_mapping(seq_ids, drafts, mtp_k=mtp_k,
                                               placeholder=placeholder, dtype=dtype)
        return cls(mtp_k=mtp_k, vocab_size=vocab_size, seq_ids=ids,
                   draft_token_ids=rows, num_drafts=counts)

    @classmethod
    def from_rows(
        cls,
        seq_ids: Sequence[int] | np.ndarray,
        rows: Any,
        *,
        rows_for: Sequence[int] | np.ndarray,
        mtp_k: int,
        vocab_size: int,
        placeholder: int | Sequence[int] | np.ndarray,
        dtype: Any = np.int32,
    ) -> DraftTokens:
        """Dense rows from a compacted array: ``rows[j]`` holds the drafts of ``rows_for[j]``.

        The form engines keep on the host: one ``(m, w)`` array for the ``m`` seqs that
        have drafts (``w <= mtp_k``) and their ids. Every decode seq of ``seq_ids`` gets
        its row, in batch order; seqs without one get ``placeholder`` (stated, as for
        :meth:`from_mapping`) and 0 drafts. The
        result equals ``from_mapping(seq_ids, dict(zip(rows_for, rows)), ...)``, problems
        and messages included, without a Python pass over the rows.
        """
        dense = dense_from_rows(seq_ids, rows, rows_for, mtp_k, placeholder, dtype)
        if dense is None:
            return cls.from_mapping(seq_ids, row_mapping(rows, rows_for), mtp_k=mtp_k,
                                    vocab_size=vocab_size, placeholder=placeholder,
                                    dtype=dtype)
        ids, table, counts = dense
        return cls(mtp_k=mtp_k, vocab_size=vocab_size, seq_ids=ids,
                   draft_token_ids=table, num_drafts=counts)


structural_rule(
    "SG114", "drafts belong to decode seqs of the batch",
    boundary=Boundary.SCHEDULE,
    why="""Drafts keyed by a seq that is not decoding in this batch are stale (the seq was
    preempted or finished) or misassigned; either way the runner must not see them.
    Checked when dense rows are built from a mapping.""",
    bug="vllm-metal #365 review: every req_id in scheduled_spec_decode_tokens must belong "
    "to the current decode set.",
)
