"""Seq ids on the host as a direct-address table: lookups and repeats without a sort.

Engines number their seqs with counters, so the ids of one batch are non-negative and
span a range a few times the batch size. Over such a range a table indexed by
``id - lowest`` answers "where is this id" and "is any id repeated" in O(n) array
operations, where a sort costs O(n log n) and, at large batches, most of the time of a
validation. Ids spread wider than that (or negative) take the sorting path.
"""

from __future__ import annotations

import numpy as np

__all__ = ["any_repeated", "dense_span", "positions_of"]

#: A table may hold this many slots per id (plus a constant) before sorting is cheaper.
_SLOTS_PER_ID = 8
_SLACK = 4096


def dense_span(ids: np.ndarray) -> tuple[int, int] | None:
    """``(lowest, span)`` of non-negative 1-D integer ids compact enough for a table."""
    if ids.ndim != 1 or ids.dtype.kind != "i" or not ids.shape[0]:
        return None
    low, high = int(np.minimum.reduce(ids)), int(np.maximum.reduce(ids))
    span = high - low + 1
    if low < 0 or span > _SLOTS_PER_ID * ids.shape[0] + _SLACK:
        return None
    return low, span


def any_repeated(ids: np.ndarray, low: int, span: int) -> bool:
    """Whether an id appears twice (``ids`` within the span): one byte of table per slot.

    Marking each id's slot and counting the marks costs about a third more than counting
    with ``bincount``, for an eighth of the memory: the table stays as small as the ids.
    """
    # Ids near 0 are marked as they are: a few more slots are cheaper than a shifted copy.
    marks = np.zeros(low + span if low <= span else span, dtype=np.bool_)
    marks[ids if low <= span else ids - low] = True
    return bool(int(np.count_nonzero(marks)) != ids.shape[0])


def positions_of(ids: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """The position in ``ids`` of every key, or None when an id repeats or a key is absent.

    Both are 1-D integer arrays. A table over the ids' span when they are compact, else
    one stable sort of the ids and a binary search per key.
    """
    n = ids.shape[0]
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    if n == 0:
        return None
    bounds = dense_span(ids)
    if bounds is not None:
        low, span = bounds
        # Ids near 0 index the table as they are: a few more slots beat a shifted copy.
        shift = 0 if low <= span else low
        size = low + span - shift
        table = np.full(size, -1, dtype=np.intp)
        slots = ids - shift if shift else ids
        order = np.arange(n)
        table[slots] = order
        if not bool((table[slots] == order).all()):
            return None  # a repeated id: the later write won
        wanted = keys - shift if shift else keys
        if int(np.minimum.reduce(wanted)) < 0 or int(np.maximum.reduce(wanted)) >= size:
            return None
        found: np.ndarray = table[wanted]
        return None if int(np.minimum.reduce(found)) < 0 else found
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    if n > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        return None
    at = np.minimum(np.searchsorted(ordered, keys), n - 1)
    if not bool((ordered[at] == keys).all()):
        return None
    found = order[at]
    return found.astype(np.intp, copy=False)
