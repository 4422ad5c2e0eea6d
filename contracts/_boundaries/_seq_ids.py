"""SG010: seq ids are unique and non-negative, in every object that carries them."""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._backend_neutral import host_value, number_text
from specguard.contracts._boundaries._id_index import any_repeated, dense_span
from specguard.contracts._core._arrays import array_kind, is_host
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks
from specguard.contracts._core._violation import Finding

__all__ = ["unique_non_negative"]

#: From this many ids on, compact ids are counted in a table instead of sorted: the
#: sort's O(n log n) dominated the validation of large batches.
_TABLE_FROM = 512
#: Up to this many ids, a Python set answers faster than a sort: one conversion instead
#: of four numpy calls, each of which costs more than the whole set on a decode step's
#: handful of seqs.
_SET_UP_TO = 64


def unique_non_negative(ids: np.ndarray) -> bool:
    """Whether 1-D host ids are unique and non-negative: a set for a few ids, a table
    over their span when a large batch's ids are compact, else one sort (its first
    element is the minimum)."""
    n = ids.shape[0]
    if n >= _TABLE_FROM:
        bounds = dense_span(ids)  # None for negative or widely spread ids
        if bounds is not None:
            return not any_repeated(ids, *bounds)
    if n < 2:
        return not n or bool(ids[0] >= 0)
    if n <= _SET_UP_TO:
        listed = ids.tolist()
        return bool(min(listed) >= 0) and len(set(listed)) == n
    ordered = np.sort(ids)
    return bool(ordered[0] >= 0) and not np.count_nonzero(ordered[1:] == ordered[:-1])


def _sorted(ids: Any) -> Any:
    if array_kind(ids) == "numpy":
        return np.sort(ids)
    return ids.sort().values


@rule("SG010", "seq ids are unique and non-negative",
      boundary=Boundary.ANY,
      applies_to=("ScheduledBatch", "DraftTokens", "VerifyOutput", "DrafterInput",
                  "DrafterOutput", "ModelInput", "LogitsRows", "RequestOutput"),
      fields={"seq_ids"},
      bug="ATOM C14: the DP dummy seq has id -1, colliding with the deferred-output flag key.")
def _unique_ids(obj: Any, values: ValueChecks) -> Finding | None:
    """Rows are matched to requests by id across steps (previous-row lookups, draft
    carry-over, output delivery). A repeated id makes two rows claim one request; a
    negative id collides with sentinel keys such as ATOM's ``-1`` deferred flag."""
    ids = obj.seq_ids
    if isinstance(ids, np.ndarray) and ids.ndim == 1 and unique_non_negative(ids):
        return None  # the common answer; an offender is located below
    found = values.any_true(ids < 0, lambda i: Finding(
        f"seq id{number_text(ids, i)} is negative", "seq_ids", position=i,
        seq_id=host_value(ids, i)))
    if found or ids.shape[0] < 2:
        return found
    ordered = _sorted(ids)
    repeated = ordered[1:] == ordered[:-1]
    return values.any_true(repeated, lambda i: _duplicate(ids, host_value(ordered, i)))


def _duplicate(ids: Any, value: int | None) -> Finding:
    """Name the second occurrence of a repeated id, when the ids are readable here."""
    if value is None or not is_host(ids):
        return Finding("a seq id appears twice", "seq_ids")
    first, second = np.flatnonzero(np.asarray(ids) == value)[:2].tolist()
    return Finding(f"seq id {value} appears twice (first at batch position {first})",
                   "seq_ids", position=second, seq_id=value)
