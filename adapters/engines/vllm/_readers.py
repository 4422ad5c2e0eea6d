"""Reading a ``SchedulerOutput``'s dicts into arrays in the runner's batch order.

vLLM hands the scheduler's decisions over as Python dicts keyed by request id; these
readers turn them into arrays with C-level passes where the entries are what vLLM sends
(ints, lists of ints), and one entry at a time where they are not, reporting what they
cannot read (SG001, SG002, SG105, SG114) instead of raising a foreign error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import countOf
from typing import Any

import numpy as np

from specguard.adapters._packing import exact_ints, pack_int64
from specguard.contracts import Boundary, Finding, report
from specguard.contracts.ops import is_int

__all__ = ["SUBJECT", "batch_order", "check_keys", "computed_tokens", "count_of", "counts_of",
           "draft_width", "in_order", "length_of", "listed", "listed_counts", "read_mapping",
           "rows_of"]

#: How violations of a ``SchedulerOutput`` name their object.
SUBJECT = "vLLM SchedulerOutput"


def draft_width(output: Any, mtp_k: int) -> int:
    """The step's ``num_spec_tokens_to_schedule`` (0.33 dynamic K), or ``mtp_k``; a K_t
    above ``mtp_k`` is SG102."""
    width = getattr(output, "num_spec_tokens_to_schedule", None)
    if not is_int(width):
        return mtp_k
    if not 0 <= int(width) <= mtp_k:
        report(SUBJECT, [("SG102", Finding(
            f"num_spec_tokens_to_schedule={int(width)} is outside [0, mtp_k={mtp_k}]",
            "num_spec_tokens_to_schedule", expected=f"0 <= K_t <= {mtp_k}",
            actual=str(int(width))))], boundary=Boundary.SCHEDULE.value)
        return mtp_k
    return int(width)


def read_mapping(output: Any, name: str) -> Mapping[Any, Any]:
    value = getattr(output, name, None)
    if isinstance(value, Mapping):
        return value
    report(SUBJECT, [("SG001", Finding(
        f"{name} must be a dict keyed by request id, got {type(value).__name__}", name))],
        boundary=Boundary.SCHEDULE.value)
    return {}


def batch_order(req_ids: Any, counts: Mapping[Any, Any]) -> tuple[Any, ...]:
    """The runner's batch order as a tuple of request ids, or the order of
    ``num_scheduled_tokens`` when none is given (or, reported as SG001, when what is
    given is not a sequence of request ids)."""
    if req_ids is None:
        return tuple(counts)
    reason = None
    if isinstance(req_ids, str | bytes) or not isinstance(req_ids, Sequence):
        reason = f"req_ids must be a sequence of request ids, got {type(req_ids).__name__}"
    else:
        order = tuple(req_ids)
        try:
            set(order)
        except TypeError as error:
            reason = f"req_ids holds an entry that cannot be a request id: {error}"
        else:
            return order
    report(SUBJECT, [("SG001", Finding(reason, "req_ids",
                                        expected="a sequence of request ids (str)"))],
           boundary=Boundary.SCHEDULE.value)
    return tuple(counts)  # warn mode: carry on in the scheduler's own order


def check_keys(output: Any, order: tuple[str, ...], counts: Mapping[Any, Any],
                drafts: Mapping[Any, Any], *, ordered: bool) -> None:
    """What ``metadata`` depth checks of the dicts, by their keys alone (C-level set
    operations; no entry is read): every request of the batch has a scheduled count
    (SG105), every request with drafts is in the batch (SG114), and the total is an int."""
    total = getattr(output, "total_num_scheduled_tokens", None)
    if not is_int(total):
        report(SUBJECT, [("SG001", Finding(
            f"total_num_scheduled_tokens must be an int, got {type(total).__name__}",
            "total_num_scheduled_tokens"))], boundary=Boundary.SCHEDULE.value)
    batch: Any = counts.keys() if ordered else set(order)
    if not ordered and not batch <= counts.keys():
        at, request = next((i, r) for i, r in enumerate(order) if r not in counts)
        report(SUBJECT, [("SG105", Finding(
            f"request {request!r} is in the batch without a scheduled token count",
            "num_scheduled_tokens", position=at))], boundary=Boundary.SCHEDULE.value)
    if len(drafts) == len(order) and tuple(drafts) == order:
        return  # a decode batch: the drafts' requests are the batch's, in its order
    if not drafts.keys() <= batch:
        request = next(r for r in drafts if r not in batch)
        report(SUBJECT, [("SG114", Finding(
            f"request {request!r} has drafts but is not in the batch",
            "scheduled_spec_decode_tokens"))], boundary=Boundary.SCHEDULE.value)


def in_order(counts: Mapping[Any, Any], order: tuple[str, ...], *,
             own: bool = False) -> list[Any]:
    """``counts[r]`` (None when absent) for each request of ``order``: one C-level pass, or
    none when ``order`` is the dict's own order (``own`` says it was made as
    ``tuple(counts)``, which spares comparing the two)."""
    if own or (len(counts) == len(order) and tuple(counts) == order):
        return list(counts.values())
    return list(map(counts.get, order))


def ints_of(values: list[Any] | tuple[Any, ...]) -> np.ndarray | None:
    """``values`` as an int64 vector when every one is an integer within int64 (a plain
    ``int``, or one that ``operator.index`` reads, such as a numpy integer), else None.

    :func:`pack_int64` packs the machine integers in one C-level pass and refuses a
    float, a string or None, where a cast to int64 would truncate or parse them. It also
    takes a bool, which is no count: only entries equal to 0 or 1 can be one, so only
    those have their types looked at (all of them at once when there are many).
    """
    exact = exact_ints(values)  # plain ints, read where they lie: no bool among them
    if exact is not None:
        return exact
    packed = pack_int64(values, len(values))
    if packed is None:  # not an integer, or one past int64
        return None
    small = np.flatnonzero(packed.view(np.uint64) <= 1)  # 0 or 1 (a negative is huge)
    if small.shape[0] > _LOOKED_AT_ONE_BY_ONE:
        return packed if not countOf(map(type, values), bool) else None
    if small.shape[0] and any(type(values[i]) is bool for i in small.tolist()):
        return None
    return packed


#: Past this many entries equal to 0 or 1, one C-level count of the bools beats looking
#: at each of those entries.
_LOOKED_AT_ONE_BY_ONE = 64


def counts_of(values: list[Any], order: tuple[str, ...]) -> np.ndarray:
    plain = ints_of(values)
    if plain is not None:
        return plain
    return np.array([count_of(v, r) for v, r in zip(values, order, strict=True)], dtype=np.int64)


def count_of(value: Any, request: str) -> int:
    if is_int(value):
        return int(value)
    if value is not None:
        report(SUBJECT, [("SG002", Finding(
            f"request {request!r}: scheduled token count {value!r} is not an integer",
            "num_scheduled_tokens"))], boundary=Boundary.SCHEDULE.value)
    return 0


def listed_counts(drafts: Mapping[Any, Any], order: tuple[str, ...],
                   dense: tuple[np.ndarray, np.ndarray | None] | None = None,
                   mtp_k: int = 0) -> np.ndarray:
    """``len(drafts[r])`` per request of ``order``, 0 when it has none: C-level passes, or
    one request at a time when some entry has no length. ``dense`` is
    :func:`dense_drafts` of the same drafts: when every request of ``order`` has its
    ``mtp_k`` drafts there, the counts are known without reading the lists again."""
    if not drafts:
        return np.zeros(len(order), dtype=np.int64)
    if dense is not None and dense[1] is not None and dense[0].shape[0] == len(order):
        return np.full(len(order), mtp_k, dtype=np.int64)
    try:
        return np.fromiter(map(len, map(drafts.get, order, repeat(()))), dtype=np.int64,
                           count=len(order))
    except TypeError:  # None or a value without a length: counted as no drafts
        return np.array([length_of(drafts.get(r)) for r in order], dtype=np.int64)


def length_of(drafts: Any) -> int:
    if type(drafts) is list:
        return len(drafts)
    try:
        return len(drafts) if drafts is not None else 0
    except TypeError:
        return 0


def rows_of(array: Any) -> int:
    """The rows of an array, or 0 for anything without a readable shape (the contract
    then reports the object for what it is)."""
    try:
        shape = tuple(getattr(array, "shape", ()))
    except Exception:  # a hostile shape attribute: no rows to read
        return 0
    return int(shape[0]) if shape and is_int(shape[0]) else 0


def computed_tokens(output: Any, order: tuple[str, ...], *, unique: bool = False,
              plain: bool = True) -> np.ndarray:
    """``num_computed_tokens`` per request (new and cached), -1 where not given.

    ``unique`` says that no request is twice in ``order``: when the cached requests are
    then exactly ``order``, their list is the answer as it stands. ``plain=False`` reads
    one request at a time."""
    cached = getattr(output, "scheduled_cached_reqs", None)
    ids = listed(getattr(cached, "req_ids", None))
    values = listed(getattr(cached, "num_computed_tokens", None))
    if plain and unique and len(values) == len(ids) == len(order) and _same(ids, order):
        as_ints = ints_of(values)  # None for a count beyond int64: read as below
        if as_ints is not None:  # the cached requests are the batch, in order
            return as_ints
    plain = plain and set(map(type, ids)) <= {str} and set(map(type, values)) <= {int}
    computed: dict[str, int] = {}
    for new in listed(getattr(output, "scheduled_new_reqs", None)):
        value, request = getattr(new, "num_computed_tokens", None), getattr(new, "req_id", None)
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    if plain:
        computed.update(zip(ids, values, strict=False))  # what vLLM sends: one C-level pass
        try:
            return np.fromiter(map(computed.get, order, repeat(-1)), dtype=np.int64,
                               count=len(order))
        except OverflowError:  # a count past int64: left unread, as one by one leaves it
            return computed_tokens(output, order, plain=False)
    for request, value in zip(ids, values, strict=False):
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    return np.array([computed.get(r, -1) for r in order], dtype=np.int64)


def _same(ids: list[Any] | tuple[Any, ...], order: tuple[str, ...]) -> bool:
    """``tuple(ids) == order`` without the copy where ``ids`` is a list (vLLM's)."""
    return ids == list(order) if type(ids) is list else tuple(ids) == order


def listed(value: Any) -> list[Any] | tuple[Any, ...]:
    """A list or tuple as it is; anything else (vLLM never sends it) as empty."""
    return value if isinstance(value, list | tuple) else ()
