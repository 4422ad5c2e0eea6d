"""``DraftTokens``: dense draft rows, one per decode seq, built so by construction."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._arrays import describe, short_repr
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._dims import DIMENSIONS
from specguard.contracts._core._registry import Boundary, structural_rule
from specguard.contracts._core._validate import report
from specguard.contracts._core._violation import Finding

__all__ = ["DraftTokens"]

_ID_DTYPES = ("int32", "int64")
# Seq ids name requests, not tokens: engines hand out 64-bit ids whatever the token width.
_SEQ_ID_DTYPE = np.dtype(np.int64)


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
        dtype = _id_dtype(dtype)
        if not isinstance(drafts, Mapping):
            _report([("SG001", Finding(
                f"drafts must be a mapping of seq id to drafts, got {type(drafts).__name__}",
                "draft_token_ids", expected="Mapping[int, ids]", actual=type(drafts).__name__))])
            drafts = {}
        ids = _int_array(seq_ids, "seq_ids", _SEQ_ID_DTYPE)
        fill = _placeholders(placeholder, ids.shape[0], dtype)
        # An invalid mtp_k is the constructor's to report (SG001/SG006), not a row problem.
        width = int(mtp_k) if _is_count(mtp_k) else 0
        try:
            rows = np.empty((ids.shape[0], width), dtype=dtype)
        except (ValueError, MemoryError) as error:  # an mtp_k no draft rows can hold
            _report([("SG006", Finding(
            f"rows of mtp_k={short_repr(mtp_k)} cannot be allocated: {error}", "mtp_k",
            expected="a usable draft count", actual=short_repr(mtp_k)))])
            width, rows = 0, np.empty((ids.shape[0], 0), dtype=dtype)
        counts = np.zeros(ids.shape[0], dtype=dtype)
        findings = _fill_rows(ids, drafts, rows, counts, fill) if width else []
        findings += _strangers(ids, drafts)
        _report(findings)
        return cls(mtp_k=mtp_k, vocab_size=vocab_size, seq_ids=ids,
                   draft_token_ids=rows, num_drafts=counts)


def _report(findings: list[tuple[str, Finding]]) -> None:
    report("DraftTokens", findings, boundary=Boundary.SCHEDULE.value)


def _is_count(value: object) -> bool:
    """A usable draft width: the constructor reports anything else (SG001/SG006)."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        return False
    return 1 <= int(value) <= (DIMENSIONS["mtp_k"].maximum or int(value))


def _id_dtype(dtype: Any) -> np.dtype[Any]:
    """int32 or int64 (numpy or torch spelling); anything else is reported."""
    name = str(dtype).removeprefix("torch.")
    if name in _ID_DTYPES:
        return np.dtype(name)
    with contextlib.suppress(TypeError):
        resolved: np.dtype[Any] = np.dtype(dtype)
        if resolved.name in _ID_DTYPES:
            return resolved
    _report([("SG002", Finding(
        f"ids are stored as int32 or int64, not {short_repr(dtype)}", "draft_token_ids",
        expected="int32|int64", actual=short_repr(dtype)))])
    return np.dtype(np.int64)


def _int_array(values: object, field: str, dtype: np.dtype[Any]) -> np.ndarray:
    """A 1-D int64 copy of ``values`` whose entries fit ``dtype``; reported when not."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError, RuntimeError) as error:
        _report([("SG001", Finding(f"cannot be read as ids: {error}", field))])
        return np.zeros(0, dtype=np.int64)
    is_ids = array.size == 0 or np.issubdtype(array.dtype, np.integer)
    if array.ndim != 1 or not is_ids or not _fits(array, dtype):
        _report([("SG002", Finding(
            f"expected a 1-D sequence of integer ids that fit {dtype}, got {describe(array)}",
            field, expected=f"{dtype}[n]", actual=describe(array)))])
        return np.zeros(0, dtype=np.int64)
    return array.astype(np.int64)


def _placeholders(placeholder: object, n: int, dtype: np.dtype[Any]) -> np.ndarray:
    """One placeholder id per row, from a single id or one id per decode seq."""
    fill: np.ndarray | None = None
    if isinstance(placeholder, int | np.integer) and not isinstance(placeholder, bool):
        value = int(placeholder)
        if np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
            return np.full(n, value, dtype=np.int64)
    elif placeholder is not None:
        fill = _ids_or_none(placeholder, dtype)
    if fill is None or fill.shape[0] != n:
        _report([("SG108", Finding(
            f"placeholder must be one id, or one id per decode seq, that fits {dtype}; "
            f"got {describe(placeholder)}", "draft_token_ids",
            expected=f"an int or {n} ids", actual=describe(placeholder)))])
        return np.zeros(n, dtype=np.int64)
    return fill


def _ids_or_none(raw: object, dtype: np.dtype[Any]) -> np.ndarray | None:
    """``raw`` as 1-D int64 ids that fit ``dtype`` (None: no ids), or None when it is not."""
    if raw is None:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.asarray(raw)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return None
    is_ids = array.size == 0 or np.issubdtype(array.dtype, np.integer)
    if array.ndim != 1 or not is_ids or not _fits(array, dtype):
        return None
    return array.astype(np.int64)


def _fill_rows(
    ids: np.ndarray, drafts: Mapping[Any, Any], rows: np.ndarray, counts: np.ndarray,
    fill: np.ndarray,
) -> list[tuple[str, Finding]]:
    """Write each decode seq's drafts, then its placeholder, into its own row."""
    findings: list[tuple[str, Finding]] = []
    width = rows.shape[1]
    for row, seq_id in enumerate(ids.tolist()):
        own = _ids_or_none(drafts.get(seq_id), rows.dtype)
        if own is None:
            findings.append(("SG002", Finding(
                f"drafts are not 1-D integer ids that fit {rows.dtype}", "draft_token_ids",
                position=row, seq_id=seq_id, actual=describe(drafts.get(seq_id)))))
            own = np.zeros(0, dtype=np.int64)
        if own.shape[0] > width:
            findings.append(("SG102", Finding(
                f"seq has {own.shape[0]} drafts", "draft_token_ids", position=row,
                seq_id=seq_id, expected=f"at most mtp_k={width}")))
            own = own[:width]
        rows[row, : own.shape[0]] = own
        rows[row, own.shape[0] :] = fill[row]
        counts[row] = own.shape[0]
    return findings


def _fits(values: np.ndarray, dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return values.size == 0 or bool(values.min() >= info.min and values.max() <= info.max)


def _strangers(ids: np.ndarray, drafts: Mapping[int, Any]) -> list[tuple[str, Finding]]:
    known = set(ids.tolist())
    # 1.0 and True hash and compare like seq 1: only an integer key names a seq.
    extra = [key for key in drafts if key not in known
             or isinstance(key, bool) or not isinstance(key, int | np.integer)]
    if not extra:
        return []
    stranger = extra[0]
    more = f" ({len(extra) - 1} more such seqs)" if len(extra) > 1 else ""
    if isinstance(stranger, int | np.integer) and not isinstance(stranger, bool):
        return [("SG114", Finding(
            f"has drafts but is not a decode seq of this batch{more}", "draft_token_ids",
            seq_id=int(stranger)))]
    return [("SG114", Finding(
        f"drafts given for key {short_repr(stranger)}, which is not a decode seq id of this "
        f"batch{more}",
        "draft_token_ids"))]


structural_rule(
    "SG114", "drafts belong to decode seqs of the batch",
    boundary=Boundary.SCHEDULE,
    why="""Drafts keyed by a seq that is not decoding in this batch are stale (the seq was
    preempted or finished) or misassigned; either way the runner must not see them.
    Checked when dense rows are built from a mapping.""",
    bug="vllm-metal #365 review: every req_id in scheduled_spec_decode_tokens must belong "
    "to the current decode set.",
)
