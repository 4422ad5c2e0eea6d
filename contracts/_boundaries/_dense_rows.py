"""Turning the engines' draft forms into dense rows, one per decode seq, in batch order.

Engines keep drafts as ``{seq_id: drafts}`` (missing when none) or as a compacted
``(m, w)`` array with the ids it is for. :class:`~specguard.contracts.DraftTokens` is
dense by construction: these readers build its rows with vectorised passes where the
input is what engines send, and fall back to a row-by-row pass, which names every
problem by rule, seq and batch position, where it is not.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specguard.contracts._boundaries._id_index import positions_of
from specguard.contracts._core._arrays import describe, short_repr
from specguard.contracts._core._compiled import exact_ints
from specguard.contracts._core._delivery import report
from specguard.contracts._core._dims import DIMENSIONS
from specguard.contracts._core._registry import Boundary
from specguard.contracts._core._violation import Finding

__all__ = ["dense_from_mapping", "dense_from_rows", "draft_row", "row_mapping"]

# Seq ids name requests, not tokens: engines hand out 64-bit ids whatever the token width.
_SEQ_ID_DTYPE = np.dtype(np.int64)
_ID_DTYPES = ("int32", "int64")


def dense_from_mapping(
    seq_ids: Sequence[int] | np.ndarray,
    drafts: Mapping[int, Sequence[int] | np.ndarray],
    *,
    mtp_k: int,
    placeholder: int | Sequence[int] | np.ndarray,
    dtype: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(seq_ids, rows, num_drafts)`` of :meth:`DraftTokens.from_mapping`: one row per
    seq of ``seq_ids``, its drafts then ``placeholder``. What cannot be read is reported
    (by rule, seq and position) and left as placeholders."""
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
    # The vectorised fill takes the clean common case; anything it cannot vouch
    # for goes row by row, which names each problem by rule, seq and position.
    if not (width and _fill_clean(ids, drafts, rows, counts, fill)):
        findings = _fill_rows(ids, drafts, rows, counts, fill) if width else []
        findings += _strangers(ids, drafts)
        _report(findings)
    return ids, rows, counts


def dense_from_rows(seq_ids: Any, rows: Any, rows_for: Any, mtp_k: Any, placeholder: Any,
                    dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(seq_ids, rows, num_drafts)`` of :meth:`DraftTokens.from_rows` without a Python
    pass over the rows, or None when only the row-by-row path can say what is wrong."""
    return _dense(seq_ids, rows, rows_for, mtp_k, placeholder, _id_dtype(dtype))


def _report(findings: list[tuple[str, Finding]]) -> None:
    report("DraftTokens", findings, boundary=Boundary.SCHEDULE.value)


def _is_count(value: object) -> bool:
    """A usable draft width: the constructor reports anything else (SG001/SG006)."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        return False
    return 1 <= int(value) <= (DIMENSIONS["mtp_k"].maximum or int(value))


#: Spellings already resolved: every builder call names its dtype, most the same one.
_RESOLVED: dict[Any, np.dtype[Any]] = {}


def _id_dtype(dtype: Any) -> np.dtype[Any]:
    """int32 or int64 (numpy or torch spelling); anything else is reported."""
    with contextlib.suppress(KeyError, TypeError):
        return _RESOLVED[dtype]
    name = str(dtype).removeprefix("torch.")
    if name in _ID_DTYPES:
        return _remember(dtype, np.dtype(name))
    with contextlib.suppress(TypeError):
        resolved: np.dtype[Any] = np.dtype(dtype)
        if resolved.name in _ID_DTYPES:
            return _remember(dtype, resolved)
    _report([("SG002", Finding(
        f"ids are stored as int32 or int64, not {short_repr(dtype)}", "draft_token_ids",
        expected="int32|int64", actual=short_repr(dtype)))])
    return np.dtype(np.int64)


def _remember(spelling: Any, resolved: np.dtype[Any]) -> np.dtype[Any]:
    with contextlib.suppress(TypeError):  # an unhashable spelling is resolved every time
        _RESOLVED[spelling] = resolved
    return resolved


def _int_array(values: object, field: str, dtype: np.dtype[Any]) -> np.ndarray:
    """A 1-D int64 copy of ``values`` whose entries fit ``dtype``; reported when not."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError, RuntimeError) as error:
        _report([("SG001", Finding(f"cannot be read as ids: {error}", field))])
        return np.zeros(0, dtype=np.int64)
    is_ids = array.size == 0 or array.dtype.kind in "iu"
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
        low, high = _limits(dtype)
        if low <= value <= high:
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
    if array.dtype.kind in "fO" and type(raw) is list:
        # numpy promotes a list mixing ints with numpy's uint64 scalars to float64, and
        # keeps other integer-like entries as objects: each entry is read as an index
        # instead (as the engine views read lists), refusing floats, strings and None.
        exact = _indices(raw)
        if exact is None:
            return None
        array = exact
    is_ids = array.size == 0 or np.issubdtype(array.dtype, np.integer)
    if array.ndim != 1 or not is_ids or not _fits(array, dtype):
        return None
    return array.astype(np.int64)


def draft_row(raw: object) -> np.ndarray | None:
    """One seq's drafts as ``DraftTokens.from_mapping`` reads them: 1-D int64 ids that fit
    int64, or None when they are not (what an engine view's fast reading must agree with)."""
    return _ids_or_none(raw, np.dtype(np.int64))


def _indices(values: list[Any]) -> np.ndarray | None:
    """The entries of ``values`` by ``operator.index`` as int64, or None when one refuses
    (a float, a string, None, an int past int64, a hostile ``__index__``)."""
    try:
        return np.array([operator.index(v) for v in values], dtype=np.int64)
    except Exception:  # an entry's own __index__ may raise anything
        return None


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


def _positions(ids: np.ndarray, keys: list[Any]) -> np.ndarray | None:
    """The batch position of each key, or None unless every key is a plain int naming
    exactly one decode seq (duplicates, strangers and odd keys take the reporting path)."""
    if not keys:
        return positions_of(ids, np.zeros(0, dtype=np.int64))
    exact = exact_ints(keys)  # plain ints within int64, read where they lie: no bool
    if exact is not None:
        return positions_of(ids, exact)
    try:  # one C-level pass: the dtype says whether every key is an int within int64
        wanted = np.array(keys)
    except (TypeError, ValueError, OverflowError):
        return None
    if wanted.dtype != np.int64 or wanted.shape != (len(keys),):
        return None
    # numpy folds a bool key into its int neighbours; only keys 0 and 1 can be one, and a
    # dict holds each of those at most once.
    if any(type(keys[i]) is bool for i in np.flatnonzero((wanted == 0) | (wanted == 1))):
        return None
    return positions_of(ids, wanted)


_UNSIGNED = {np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}
_RUN_TYPES = frozenset({list, tuple, np.ndarray})


def _stack(values: list[Any], width: int, dtype: np.dtype[Any]
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """The drafts as one ``(m, length)`` integer array (rows of uneven length: one flat
    run) and their lengths, or None unless every entry reads as 1-D integer ids, at most
    ``width`` of them, that fit ``dtype``: exactly the entries the row-by-row path takes.
    """
    if not values:
        return np.zeros((0, 0), dtype=dtype), np.zeros(0, dtype=np.intp)
    try:
        found = _stack_lists(values) if type(values[0]) is list else None
        if found is None:
            found = _stack_arrays(values) if type(values[0]) is np.ndarray \
                else _stack_runs(values)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return None
    if found is None:
        return None
    stacked, lengths = found
    if int(lengths.max()) > width:
        return None
    if stacked.size and (stacked.dtype.kind not in "iu" or not _fits(stacked, dtype)):
        return None
    return stacked, lengths


def _stack_lists(values: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """Lists of plain ints, all of one length: read where they lie in one compiled pass
    (None for anything else, which numpy's discovery below reads)."""
    length = len(values[0])
    stacked = exact_ints(values, length) if length else None
    if stacked is None:
        return None
    return (stacked.reshape(len(values), length),
            np.full(len(values), length, dtype=np.intp))


def _stack_arrays(values: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """Arrays: one concatenation. 0-d entries make it raise, 2-D ones leave it 2-D, and
    a bool array among integer ones is found by :func:`_has_bool_run`."""
    lengths = np.fromiter(map(len, values), dtype=np.intp, count=len(values))
    flat = np.concatenate(values)
    if flat.ndim != 1 or flat.shape[0] != int(lengths.sum()):
        return None
    if flat.size and flat.dtype.kind in "iu" and _has_bool_run(values, flat, lengths):
        return None
    if int(lengths.min()) == int(lengths.max()):
        return flat.reshape(len(values), int(lengths[0])), lengths
    return flat, lengths


def _stack_runs(values: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """Lists and tuples of ids: one ``np.array`` when they are of one length."""
    try:
        stacked: np.ndarray | None = np.array(values)
    except ValueError:  # numpy refuses runs of uneven length
        stacked = None
    if stacked is not None and stacked.ndim == 2:
        lengths = np.full(len(values), stacked.shape[1], dtype=np.intp)
    else:  # bytes and strings iterate as ints and characters: not runs of ids
        if not set(map(type, values)) <= _RUN_TYPES:
            return None
        lengths = np.fromiter(map(len, values), dtype=np.intp, count=len(values))
        stacked = np.array(list(itertools.chain.from_iterable(values)))
        if stacked.ndim != 1 or stacked.shape[0] != int(lengths.sum()):
            return None
    if stacked.size and stacked.dtype.kind in "iu" and _has_bool_run(values, stacked, lengths):
        return None
    return stacked, lengths


def _has_bool_run(values: list[Any], stacked: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether an entry is a run of bools, which numpy folds into integer neighbours.

    Only an entry whose ids are all 0 or 1 can be one, so only those are looked at.
    """
    flat = stacked.reshape(-1)
    # 0 and 1 are the only ids below 2 once negatives wrap to huge unsigned values.
    small = flat.view(_UNSIGNED[flat.dtype]) <= 1 if flat.dtype in _UNSIGNED else \
        (flat >= 0) & (flat <= 1)
    if not np.count_nonzero(small):
        return False
    if stacked.ndim == 2:
        suspects = np.flatnonzero(small.reshape(stacked.shape).all(axis=1))
    else:
        runs = np.repeat(np.arange(lengths.shape[0]), lengths)
        others = np.bincount(runs, weights=~small, minlength=lengths.shape[0])
        suspects = np.flatnonzero((others == 0) & (lengths > 0))
    return any(np.asarray(values[i]).dtype.kind == "b" for i in suspects.tolist())


def _fill_clean(ids: np.ndarray, drafts: Mapping[Any, Any], rows: np.ndarray,
                counts: np.ndarray, fill: np.ndarray) -> bool:
    """Fill ``rows`` and ``counts`` with array operations when the mapping is clean.

    Returns False, having written nothing that matters, when a key or a value needs the
    row-by-row path to be reported (a stranger, a repeated seq id, a non-int key, drafts
    that are not 1-D ids fitting the dtype, too many drafts, rows of uneven length).
    """
    keys = list(drafts)
    positions = _positions(ids, keys)
    if positions is None:
        return False
    stacked = _stack(list(drafts.values()), rows.shape[1], rows.dtype)
    if stacked is None:
        return False
    values, lengths = stacked
    rows[:] = fill[:, None]
    if values.ndim == 2:
        rows[positions, : values.shape[1]] = values
    else:  # ragged: row j's drafts are the next lengths[j] values of the flat run
        starts = np.cumsum(lengths) - lengths
        columns = np.arange(values.shape[0]) - np.repeat(starts, lengths)
        rows[np.repeat(positions, lengths), columns] = values
    counts[positions] = lengths
    return True


def _dense(seq_ids: Any, rows: Any, rows_for: Any, mtp_k: Any, placeholder: Any,
           dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``from_rows``' result by array operations, or None when anything needs reporting."""
    if not (isinstance(rows, np.ndarray) and isinstance(rows_for, np.ndarray)
            and isinstance(seq_ids, np.ndarray) and _is_count(mtp_k)):
        return None
    if rows.ndim != 2 or rows_for.ndim != 1 or seq_ids.ndim != 1 \
            or rows.shape[0] != rows_for.shape[0] or rows.shape[1] > int(mtp_k):
        return None
    if rows.dtype.kind not in "iu" or rows_for.dtype.kind not in "iu" \
            or seq_ids.dtype.kind not in "iu":
        return None
    if not (_fits(rows, dtype) and _fits(seq_ids, _SEQ_ID_DTYPE)):
        return None
    low, high = _limits(dtype)
    if not isinstance(placeholder, int | np.integer) or isinstance(placeholder, bool) \
            or not low <= int(placeholder) <= high:
        return None
    n = seq_ids.shape[0]
    positions = positions_of(seq_ids, rows_for)
    if positions is None:
        return None  # a repeated seq id, or a row for a seq not decoding here (SG114)
    if positions.shape[0] > 1 and int(np.bincount(positions, minlength=n).max()) > 1:
        return None  # two rows for one seq: the mapping form keeps the last
    table = np.full((n, int(mtp_k)), int(placeholder), dtype=dtype)
    table[positions, : rows.shape[1]] = rows
    counts = np.zeros(n, dtype=dtype)
    counts[positions] = rows.shape[1]
    return seq_ids.astype(_SEQ_ID_DTYPE), table, counts


def row_mapping(rows: Any, rows_for: Any) -> Any:
    """``from_rows``' input in the mapping form, for the reporting path."""
    try:
        keys = np.asarray(rows_for).tolist()
        listed = list(rows)
    except (TypeError, ValueError, RuntimeError):
        return rows
    if not isinstance(keys, list) or len(keys) != len(listed):
        _report([("SG004", Finding(
            f"{len(listed)} draft rows for {describe(rows_for)} seq ids", "draft_token_ids",
            expected="one seq id per row", actual=describe(rows_for)))])
        return {}
    return dict(zip(keys, listed, strict=True))


_LIMITS = {np.dtype(name): (int(np.iinfo(name).min), int(np.iinfo(name).max))
           for name in _ID_DTYPES}


def _limits(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The range of an id dtype (``np.iinfo`` costs microseconds per call)."""
    found = _LIMITS.get(dtype)
    if found is None:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return found


def _fits(values: np.ndarray, dtype: np.dtype[Any]) -> bool:
    if values.size == 0:
        return True
    if values.dtype == dtype or (values.dtype.kind == "i" and values.dtype.itemsize
                                 <= dtype.itemsize):
        return True  # every value of a narrower signed dtype fits
    low, high = _limits(dtype)
    return bool(np.minimum.reduce(values, None) >= low
                and np.maximum.reduce(values, None) <= high)


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
