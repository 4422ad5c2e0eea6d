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
from itertools import chain
from operator import countOf
from typing import Any, cast

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._packing import exact_ints, pack_int64
from specguard.contracts import DeliveryContext, DraftTokens
from specguard.contracts._boundaries._dense_rows import draft_row
from specguard.contracts.ops import PLACEHOLDER, is_int

__all__ = ["PLACEHOLDER", "dense_drafts", "draft_tokens", "listed_rows"]

def draft_tokens(order: Sequence[str], drafts: Mapping[Any, Any], *, mtp_k: int,
                 vocab_size: int, placeholders: bool,
                 listed: tuple[np.ndarray, np.ndarray | None] | None = None) -> DraftTokens:
    """One row per request with drafts, in batch order (seq id = batch position).

    ``placeholders`` allows trailing ``-1`` slots (counted out of ``num_drafts``): vLLM's
    async placeholders, and from 0.33 the slots the runner clamps before embedding.
    ``listed`` is :func:`dense_drafts` of the same arguments, when the caller has it."""
    positions, rows = listed if listed is not None else dense_drafts(order, drafts, mtp_k)
    if rows is None:
        position = dict(zip(order, range(len(order)), strict=True))
        decode = sorted(position[r] for r in drafts if r in position)
        listed_by: dict[Any, Any] = {  # an id not in the batch stays, for the contract to name
            position.get(r, r): _real(d, placeholders) for r, d in drafts.items()}
        with DeliveryContext(names=order):
            return DraftTokens.from_mapping(
                decode, listed_by, mtp_k=mtp_k, vocab_size=vocab_size, placeholder=0)
    counts = np.full(rows.shape[0], mtp_k, dtype=np.int64)
    if placeholders and (rows == PLACEHOLDER).any():
        trailing = np.cumprod(rows[:, ::-1] == PLACEHOLDER, axis=1).sum(axis=1)
        counts -= trailing
        rows = np.where(np.arange(mtp_k)[None, :] < counts[:, None], rows, 0)
    return build(DraftTokens, {
        "mtp_k": mtp_k, "vocab_size": vocab_size,
        "seq_ids": positions, "draft_token_ids": rows,
        "num_drafts": counts}, names=order)


def dense_drafts(order: Sequence[str], drafts: Mapping[Any, Any],
                 mtp_k: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The batch positions of the requests with drafts, sorted, and their drafts as listed
    (placeholders kept) as one ``(n, mtp_k)`` array; the array is None unless every
    request with drafts is in ``order`` and lists exactly ``mtp_k`` integers.

    C-level passes only: dict lookups by ``map`` and one ``np.array`` of the lists.
    """
    if not drafts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, mtp_k), dtype=np.int64)
    if len(drafts) == len(order) and tuple(drafts) == tuple(order):
        return np.arange(len(order), dtype=np.int64), _dense(list(drafts.values()), mtp_k)
    position = dict(zip(order, range(len(order)), strict=True))
    found = list(map(position.get, drafts))
    if None in found:  # drafts for a request that is not scheduled
        return np.array(sorted(p for p in found if p is not None), dtype=np.int64), None
    decode = sorted(cast(list[int], found))
    requests = map(order.__getitem__, decode)
    return np.array(decode, dtype=np.int64), _dense(list(map(drafts.__getitem__, requests)),
                                                     mtp_k)


def _dense(lists: list[Any], mtp_k: int) -> np.ndarray | None:
    """The lists as a ``(n, mtp_k)`` integer array, or None when they are not exactly that.

    C-level passes: the lists' types, their lengths, their entries flattened into one
    stream, and that stream packed into machine integers by :func:`pack_int64`, which
    reads each entry as ``operator.index`` does (refusing a float, a string or None, where a cast
    to int64 would truncate or parse them): well under half of what ``np.array`` takes
    to discover the shape and dtype of nested lists.
    """
    if not lists:
        return np.zeros((0, mtp_k), dtype=np.int64)
    exact = exact_ints(lists, mtp_k)  # lists of plain ints, read where they lie
    if exact is not None:
        return exact.reshape(len(lists), mtp_k)
    count = len(lists)
    if countOf(map(type, lists), list) != count or countOf(map(len, lists), mtp_k) != count:
        return None
    flat = pack_int64(chain.from_iterable(lists), count * mtp_k)
    if flat is None:
        return None
    # A bool is an integer to operator.index; numpy makes lists of nothing but bools a
    # bool array. Only entries equal to 0 or 1 can be one (a negative is huge unsigned),
    # and only those are looked at; where one is, numpy's own reading decides.
    small = np.flatnonzero(flat.view(np.uint64) <= 1).tolist()
    if any(type(lists[i // mtp_k][i % mtp_k]) is bool for i in small):
        return _by_numpy(lists, mtp_k)
    return flat.reshape(len(lists), mtp_k)


def _by_numpy(lists: list[Any], mtp_k: int) -> np.ndarray | None:
    """:func:`_dense` list by list, as ``DraftTokens.from_mapping`` reads a seq's drafts
    (numpy's discovery of each list's dtype: a list of bools is no ids)."""
    rows = np.empty((len(lists), mtp_k), dtype=np.int64)
    for i, listed in enumerate(lists):
        row = draft_row(listed)
        if row is None or row.shape != (mtp_k,):
            return None
        rows[i] = row
    return rows


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
