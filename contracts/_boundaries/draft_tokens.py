"""``DraftTokens``: dense draft rows, one per decode seq, built so by construction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from contracts._boundaries._types import Array, Index
from contracts._core._contract import BoundaryObject, boundary_object
from contracts._core._registry import Boundary, structural_rule
from contracts._core._validate import report
from contracts._core._violation import Finding

__all__ = ["DraftTokens"]

_INT64 = np.iinfo(np.int64)


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
    seq_ids: Index[Array, num_decode]
    """The decode seqs, in batch order: row ``i`` belongs to ``seq_ids[i]``."""
    draft_token_ids: Index[Array, "num_decode mtp_k"]
    """Draft ids, then placeholder ids for the slots without a real draft."""
    num_drafts: Index[Array, num_decode]
    """Real drafts per row, in ``[0, mtp_k]``."""

    @classmethod
    def from_mapping(
        cls,
        seq_ids: Sequence[int] | np.ndarray,
        drafts: Mapping[int, Sequence[int] | np.ndarray],
        *,
        mtp_k: int,
        vocab_size: int,
        placeholder: int | Sequence[int] | np.ndarray = 0,
        dtype: Any = np.int32,
    ) -> DraftTokens:
        """Dense rows from the engines' usual form: seq id → drafts, missing when none.

        ``seq_ids`` lists the decode seqs in batch order; each gets exactly one row.
        ``placeholder`` fills the slots without a real draft: one id for all rows, or one
        per seq (the seq's own last token is a good choice). A seq with more than
        ``mtp_k`` drafts, or drafts for a seq not in ``seq_ids``, is a violation.
        """
        if not isinstance(drafts, Mapping):
            report("DraftTokens", [("SG001", Finding(
                f"drafts must be a mapping of seq id to drafts, got {type(drafts).__name__}",
                "draft_token_ids"))])
            drafts = {}
        ids = _int_array(seq_ids, "seq_ids")
        fill = _placeholders(placeholder, ids.shape[0], dtype)
        rows = np.empty((ids.shape[0], mtp_k if _is_count(mtp_k) else 0), dtype=dtype)
        counts = np.zeros(ids.shape[0], dtype=dtype)
        findings = _fill_rows(ids, drafts, rows, counts, fill, mtp_k)
        findings += _strangers(ids, drafts)
        report("DraftTokens", findings)
        return cls(mtp_k=mtp_k, vocab_size=vocab_size, seq_ids=ids.astype(dtype, copy=False),
                   draft_token_ids=rows, num_drafts=counts)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 1


def _int_array(values: object, field: str) -> np.ndarray:
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as error:
        report("DraftTokens", [("SG001", Finding(f"cannot be read as ids: {error}", field))])
        return np.zeros(0, dtype=np.int64)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        report("DraftTokens", [("SG002", Finding(
            f"expected a 1-D sequence of integer ids, got {array.dtype}[{array.shape}]", field))])
        return np.zeros(0, dtype=np.int64)
    return array.astype(np.int64, copy=False)


def _placeholders(placeholder: object, n: int, dtype: Any) -> np.ndarray:
    if isinstance(placeholder, int | np.integer) and not isinstance(placeholder, bool):
        value = int(placeholder)
        in_range = _INT64.min <= value <= _INT64.max
        fill = np.full(n if in_range else 0, value if in_range else 0, dtype=np.int64)
    else:
        fill = _int_array(placeholder, "placeholder")
    if fill.shape[0] != n or not _fits(fill, dtype):
        report("DraftTokens", [("SG108", Finding(
            f"one valid placeholder id per decode seq expected ({n} seqs)", "draft_token_ids"))])
        return np.zeros(n, dtype=np.int64)
    return fill


def _as_drafts(raw: object) -> np.ndarray | None:
    if raw is None:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.asarray(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        return None
    if array.size and (array.min() < _INT64.min or array.max() > _INT64.max):
        return None
    return array.astype(np.int64, copy=False)


def _fill_rows(
    ids: np.ndarray, drafts: Mapping[int, Any], rows: np.ndarray, counts: np.ndarray,
    fill: np.ndarray, mtp_k: int,
) -> list[tuple[str, Finding]]:
    findings: list[tuple[str, Finding]] = []
    width = rows.shape[1]
    for row, seq_id in enumerate(ids.tolist()):
        own = _as_drafts(drafts.get(seq_id))
        if own is None or not _fits(own, rows.dtype):
            findings.append(("SG002", Finding(
                f"drafts are not 1-D integer ids that fit {rows.dtype}", "draft_token_ids",
                position=row, seq_id=seq_id)))
            own = np.zeros(0, dtype=np.int64)
        if own.shape[0] > width:
            findings.append(("SG102", Finding(
                f"seq has {own.shape[0]} drafts", "draft_token_ids", position=row,
                seq_id=seq_id, expected=f"at most mtp_k={mtp_k}")))
            own = own[:width]
        rows[row, : own.shape[0]] = own
        rows[row, own.shape[0] :] = fill[row]
        counts[row] = own.shape[0]
    return findings


def _fits(values: np.ndarray, dtype: Any) -> bool:
    info = np.iinfo(dtype)
    return values.size == 0 or bool(values.min() >= info.min and values.max() <= info.max)


def _strangers(ids: np.ndarray, drafts: Mapping[int, Any]) -> list[tuple[str, Finding]]:
    known = set(ids.tolist())
    extra = [key for key in drafts if key not in known]
    if not extra:
        return []
    return [("SG114", Finding(
        f"drafts given for seq {extra[0]!r}, which is not a decode seq of this batch",
        "draft_token_ids", seq_id=extra[0] if isinstance(extra[0], int) else None))]


structural_rule(
    "SG114", "drafts belong to decode seqs of the batch",
    boundary=Boundary.SCHEDULE,
    why="""Drafts keyed by a seq that is not decoding in this batch are stale (the seq was
    preempted or finished) or misassigned; either way the runner must not see them.
    Checked when dense rows are built from a mapping.""",
    bug="vllm-metal #365 review: every req_id in scheduled_spec_decode_tokens must belong "
    "to the current decode set.",
)
