"""vLLM's ``scheduled_spec_decode_tokens`` as dense contract rows.

The common case (every request lists exactly ``k`` integer drafts) becomes one
``(num_decode, k)`` array in a single numpy conversion; under async scheduling the
trailing ``-1`` placeholders of each row are found with array operations and counted
out of ``num_drafts``. Anything else (trimmed or over-long lists, foreign values, drafts
for requests that are not scheduled) goes through ``DraftTokens.from_mapping``, which
reports each problem by rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from specguard.adapters._build import build, made
from specguard.contracts import DraftTokens
from specguard.contracts.ops import PLACEHOLDER, is_int

__all__ = ["PLACEHOLDER", "draft_tokens", "listed_rows"]

def draft_tokens(order: Sequence[str], drafts: Mapping[Any, Any], *, mtp_k: int,
                 vocab_size: int, placeholders: bool) -> DraftTokens:
    """One row per request with drafts, in batch order (seq id = batch position).

    ``placeholders`` allows trailing ``-1`` slots (counted out of ``num_drafts``): vLLM's
    async placeholders, and from 0.33 the slots the runner clamps before embedding."""
    position = {request: i for i, request in enumerate(order)}
    decode = sorted(position[r] for r in drafts if r in position)
    rows = None if len(decode) != len(drafts) else _dense(
        [drafts[order[p]] for p in decode], mtp_k)
    if rows is None:
        listed = {position.get(r, r): _real(d, placeholders) for r, d in drafts.items()}
        return made(lambda: DraftTokens.from_mapping(
            decode, listed, mtp_k=mtp_k, vocab_size=vocab_size, placeholder=0), names=order)
    counts = np.full(rows.shape[0], mtp_k, dtype=np.int64)
    if placeholders:
        trailing = np.cumprod(rows[:, ::-1] == PLACEHOLDER, axis=1).sum(axis=1)
        counts -= trailing
        rows = np.where(np.arange(mtp_k)[None, :] < counts[:, None], rows, 0)
    return build(DraftTokens, {
        "mtp_k": mtp_k, "vocab_size": vocab_size,
        "seq_ids": np.asarray(decode, dtype=np.int64), "draft_token_ids": rows,
        "num_drafts": counts}, names=order)


def _dense(lists: list[Any], mtp_k: int) -> np.ndarray | None:
    """The lists as a ``(n, mtp_k)`` integer array, or None when they are not exactly that."""
    if not lists:
        return np.zeros((0, mtp_k), dtype=np.int64)
    if not all(type(d) is list and len(d) == mtp_k for d in lists):
        return None
    try:
        rows = np.array(lists)
    except (TypeError, ValueError, OverflowError):
        return None
    if rows.dtype.kind != "i" or rows.shape != (len(lists), mtp_k):
        return None
    return rows.astype(np.int64, copy=False)


def _real(drafts: Any, placeholders: bool) -> Any:
    """Drafts without their trailing ``-1`` placeholders, when the runner deals with them
    (fills them from the previous step, or clamps them before embedding)."""
    if not placeholders or not isinstance(drafts, list | tuple | np.ndarray):
        return drafts
    end = len(drafts)
    while end and _is_int64(drafts[end - 1]) and drafts[end - 1] == PLACEHOLDER:
        end -= 1
    return drafts[:end]


def listed_rows(lists: list[Any], mtp_k: int) -> np.ndarray:
    """The drafts as listed (placeholders kept), ``(n, mtp_k)``, cut or zero-padded."""
    rows = _dense(lists, mtp_k)
    if rows is not None:
        return rows
    rows = np.zeros((len(lists), mtp_k), dtype=np.int64)
    for row, listed in enumerate(lists):
        values = [int(d) for d in listed[:mtp_k] if _is_int64(d)] \
            if isinstance(listed, list | tuple) else []
        rows[row, : len(values)] = values
    return rows


def _is_int64(value: Any) -> bool:
    return is_int(value) and -(2**63) <= int(value) < 2**63
