"""The floor: every ScheduledBatch rule checked by hand, with no framework at all.

What an engine author would write to check a decode batch as fast as numpy allows: one
straight-line function, no objects, no messages on success, O(num_seqs) wherever the
rule allows it (two block-table entries per seq, then one minimum over each seq's
middle blocks, never the padded table), one sort for unique ids (one mark per id over
their span when a large batch's ids are compact), one unsigned view and one reduction
for each vocabulary bound. It answers only with the code of a
broken rule (or None), so it is a lower bound on what any validation of the same rules
can cost, not a usable validator.

:func:`check` takes numpy batches, :func:`check_torch` CPU torch batches (through numpy
views of the tensors); both read the fields of anything with the ScheduledBatch attributes.
:func:`metadata` is the metadata half of :func:`check` alone, and :func:`guarded_by_hand`
a runner method guarded with it: the floor of a guarded call at metadata depth.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from specguard.contracts.ops import UNSIGNED

__all__ = ["check", "check_torch", "guarded_by_hand", "metadata"]

T = TypeVar("T")

_ndarray = np.ndarray
_np_integer = np.integer
_INDEX = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
_BOOL = np.dtype(np.bool_)
#: The switch of :func:`guarded_by_hand`'s checks (on unless set).
_HAND_CHECKS: contextvars.ContextVar[bool] = contextvars.ContextVar("hand_checks", default=True)

# The ufuncs themselves: the array methods (.max(), .any()) add a Python-level wrapper
# that costs more than the reduction on a small array; count_nonzero is a plain C loop.
_count_nonzero = np.count_nonzero
_maximum = np.maximum.reduce
_minimum = np.minimum.reduce
_ARRAYS = ("seq_ids", "is_decode", "num_scheduled_tokens", "context_lens", "block_tables",
           "token_ids", "draft_token_ids", "num_drafts", "state_slots", "draft_seq_ids")
_OPTIONAL = frozenset({"state_slots", "draft_seq_ids"})
#: From this many seqs on, compact ids are counted in a table rather than sorted.
_TABLE_FROM = 512
_INT32_MAX = 2**31 - 1
#: Up to this many middle blocks one mask is cheapest; past it, one minimum per seq.
_SMALL_REGION = 4096
_COLUMNS = np.arange(1, _SMALL_REGION + 1)


class _Fields:
    """The batch's fields as plain attributes (what :func:`check` reads)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def check(b: Any, values: bool = True) -> str | None:
    """The code of a rule ``b`` breaks (numpy batch), or None when every rule holds;
    ``values=False`` stops after the metadata rules (:func:`metadata`)."""
    k, vocab, bs, nd, nt = b.mtp_k, b.vocab_size, b.block_size, b.num_decode, b.num_tokens
    placeholder = b.draft_placeholder
    if not (
        (type(k) is int or isinstance(k, _np_integer))
        and (type(vocab) is int or isinstance(vocab, _np_integer))
        and (type(bs) is int or isinstance(bs, _np_integer))
        and (type(nd) is int or isinstance(nd, _np_integer))
        and (type(nt) is int or isinstance(nt, _np_integer))
        and (placeholder is None or type(placeholder) is int
             or isinstance(placeholder, _np_integer))
    ):
        return "SG001"
    if k < 1 or vocab < 1 or bs < 1 or nd < 0 or nt < 0:
        return "SG006"
    ids, dec, nst, ctx = b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens
    tables, tokens, drafts, ndr = b.block_tables, b.token_ids, b.draft_token_ids, b.num_drafts
    slots, owners = b.state_slots, b.draft_seq_ids
    if not (
        type(ids) is _ndarray and type(dec) is _ndarray and type(nst) is _ndarray
        and type(ctx) is _ndarray and type(tables) is _ndarray and type(tokens) is _ndarray
        and type(drafts) is _ndarray and type(ndr) is _ndarray
        and (slots is None or type(slots) is _ndarray)
        and (owners is None or type(owners) is _ndarray)
    ):
        return _type_code(b)
    if not (
        ids.dtype in _INDEX and dec.dtype is _BOOL and nst.dtype in _INDEX
        and ctx.dtype in _INDEX and tables.dtype in _INDEX and tokens.dtype in _INDEX
        and drafts.dtype in _INDEX and ndr.dtype in _INDEX
        and (slots is None or slots.dtype in _INDEX)
        and (owners is None or owners.dtype in _INDEX)
    ):
        return "SG002"
    if ids.ndim != 1:
        return "SG003"
    n = ids.shape[0]
    per_seq = (n,)
    if not (
        dec.shape == per_seq and nst.shape == per_seq and ctx.shape == per_seq
        and tables.ndim == 2 and tables.shape[0] == n and tokens.shape == (nt,)
        and drafts.shape == (nd, k) and ndr.shape == (nd,)
        and (slots is None or slots.shape == per_seq)
        and (owners is None or owners.shape == (nd,))
    ):
        return _shape_code(b)
    if not values:
        return None
    if n and _repeated_or_negative(ids):
        return "SG010"
    # SG103, SG106, SG107 from one decode count; an all-decode batch needs one pass.
    width = k + 1
    decoding = _count_nonzero(dec)
    if decoding == n:
        if n and _count_nonzero(nst != width):
            return "SG103"
        total = n * width
    else:
        if _count_nonzero(dec & (nst != width)):
            return "SG103"
        total = int(nst.sum())
    if total != nt:
        return "SG106"
    if decoding != nd or (decoding != n and _count_nonzero(~dec & (nst < 1))):
        return "SG107"
    # SG108, SG109, SG112: an unsigned view turns both bounds into one maximum.
    if nd:
        if placeholder is None:
            if _maximum(drafts.view(UNSIGNED[drafts.dtype]), None) >= vocab:
                return "SG108"
        elif _count_nonzero((drafts != placeholder)
                            & (drafts.view(UNSIGNED[drafts.dtype]) >= vocab)):
            return "SG108"
        if _maximum(ndr.view(UNSIGNED[ndr.dtype]), None) > k:
            return "SG109"
    if nt and _maximum(tokens.view(UNSIGNED[tokens.dtype]), None) >= vocab:
        return "SG112"
    if slots is not None and n and _minimum(slots, None) < 0:
        return "SG113"
    # SG115: the row owners are the decode seqs in batch order (all of them: no gather).
    if owners is not None and nd and _count_nonzero(
            (ids if decoding == n else ids[dec]) != owners):
        return "SG115"
    if not n:
        return None
    # SG111 first: with it, every context is at least one token, so no clipping below.
    # A decode seq also needs a prompt token before its scheduled ones.
    if _count_nonzero(ctx < nst) or (nd and _count_nonzero(dec & (ctx == nst))):
        return "SG111"
    max_blocks = tables.shape[1]
    if max_blocks == 0 or _maximum(ctx, None) > max_blocks * bs:
        return "SG110"
    # SG110: the first and the last needed block of each seq, gathered from the flat table.
    size = int(bs)
    last = ctx - 1
    if size & (size - 1) == 0:
        last >>= size.bit_length() - 1
    else:
        last //= size
    flat = tables.reshape(-1)
    needed = last.copy()  # each seq's last needed column, before it becomes a flat index
    if n * max_blocks > _INT32_MAX:
        last = last.astype(np.intp)
    last += np.arange(0, n * max_blocks, max_blocks, dtype=last.dtype)
    if _minimum(tables[:, 0] | flat[last], None) < 0:
        return "SG110"
    # Every block between the first and the last needed one: one minimum per seq over
    # exactly its middle blocks (reduceat on the flat table: no mask as large as it).
    end = int(_maximum(needed, None))
    if end <= 1:
        return None
    if n * (end - 1) <= _SMALL_REGION or not tables.flags.c_contiguous:  # a mask is cheaper
        return "SG110" if _count_nonzero(
            (tables[:, 1:end] < 0) & (_COLUMNS[: end - 1][None, :] < needed[:, None])) else None
    inner = np.flatnonzero(needed > 1)
    if inner.shape[0]:
        bounds = np.empty(2 * inner.shape[0], dtype=np.intp)
        bounds[0::2] = inner * max_blocks + 1
        bounds[1::2] = bounds[0::2] + needed[inner] - 1
        if _minimum(np.minimum.reduceat(flat, bounds)[0::2], None) < 0:
            return "SG110"
    return None


def _repeated_or_negative(ids: np.ndarray) -> bool:
    """SG010. Compact non-negative ids (engine counters) of a large batch are counted in
    a table over their span; otherwise one sort answers both "no negative id" (its first
    element) and "no repeat"."""
    n = ids.shape[0]
    if n >= _TABLE_FROM:
        low, high = int(_minimum(ids, None)), int(_maximum(ids, None))
        if low >= 0 and high - low < 8 * n + 4096:
            near_zero = low <= high - low
            marks = np.zeros(high + 1 if near_zero else high - low + 1, dtype=np.bool_)
            marks[ids if near_zero else ids - low] = True
            return bool(_count_nonzero(marks) != n)
    ordered = np.sort(ids)
    return bool(ordered[0] < 0 or (n > 1 and _count_nonzero(ordered[1:] == ordered[:-1])))


def _type_code(b: Any) -> str:
    """SG005 when an array of another backend sneaked in, SG001 for anything else."""
    for name in _ARRAYS:
        value = getattr(b, name)
        if name in _OPTIONAL and value is None:
            continue
        if type(value) is not _ndarray:
            return "SG005" if hasattr(value, "dtype") and hasattr(value, "shape") else "SG001"
    raise AssertionError("unreachable: every array is an ndarray")


def _shape_code(b: Any) -> str:
    """The rule owning the first disagreeing dimension, in field order (SG003 for ranks)."""
    n = b.seq_ids.shape[0]
    per_seq = ("is_decode", "num_scheduled_tokens", "context_lens")
    for name in per_seq:
        shape = getattr(b, name).shape
        if len(shape) != 1:
            return "SG003"
        if shape[0] != n:
            return "SG105"
    tables = b.block_tables
    if tables.ndim != 2:
        return "SG003"
    if tables.shape[0] != n:
        return "SG105"
    if b.token_ids.ndim != 1:
        return "SG003"
    if b.token_ids.shape[0] != b.num_tokens:
        return "SG104"
    drafts = b.draft_token_ids
    if drafts.ndim != 2 or b.num_drafts.ndim != 1:
        return "SG003"
    if drafts.shape[0] != b.num_decode:
        return "SG101"
    if drafts.shape[1] != b.mtp_k:
        return "SG102"
    if b.num_drafts.shape[0] != b.num_decode:
        return "SG101"
    owners = b.draft_seq_ids
    if owners is not None and owners.ndim == 1 and owners.shape[0] != b.num_decode:
        return "SG101"
    slots = b.state_slots
    return "SG003" if slots is not None and slots.ndim != 1 else "SG105"


def check_torch(b: Any) -> str | None:
    """The code of a rule ``b`` breaks (CPU torch batch), or None when every rule holds.

    The fastest way to read CPU tensors is through numpy: ``Tensor.numpy()`` views the
    same memory without a copy and costs far less than one torch operation's dispatch.
    """
    import torch

    tensor = torch.Tensor
    ids, dec, nst, ctx = b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens
    tables, tokens, drafts, ndr = b.block_tables, b.token_ids, b.draft_token_ids, b.num_drafts
    slots, owners = b.state_slots, b.draft_seq_ids
    if not (
        type(ids) is tensor and type(dec) is tensor and type(nst) is tensor
        and type(ctx) is tensor and type(tables) is tensor and type(tokens) is tensor
        and type(drafts) is tensor and type(ndr) is tensor
        and (slots is None or type(slots) is tensor)
        and (owners is None or type(owners) is tensor)
    ):
        arrays = [getattr(b, name) for name in _ARRAYS]
        return "SG005" if any(type(a) is _ndarray for a in arrays) else "SG001"
    if not ids.is_cpu:
        raise ValueError("the floor reads CPU tensors only")
    return check(_Fields(
        mtp_k=b.mtp_k, vocab_size=b.vocab_size, block_size=b.block_size,
        num_decode=b.num_decode, num_tokens=b.num_tokens,
        draft_placeholder=b.draft_placeholder, seq_ids=ids.numpy(), is_decode=dec.numpy(),
        num_scheduled_tokens=nst.numpy(), context_lens=ctx.numpy(),
        block_tables=tables.numpy(), token_ids=tokens.numpy(), draft_token_ids=drafts.numpy(),
        num_drafts=ndr.numpy(), state_slots=None if slots is None else slots.numpy(),
        draft_seq_ids=None if owners is None else owners.numpy()))


def metadata(b: Any) -> str | None:
    """The code of a metadata rule ``b`` breaks (numpy batch), or None: the scalars'
    types and ranges, the arrays' backend, dtypes, ranks and shared dimensions; no value."""
    return check(b, False)


def guarded_by_hand(method: Callable[[Any, Any], T]) -> Callable[[Any, Any], T]:
    """``method(self, batch)`` guarded by hand: the floor of a guarded call.

    What an engine author would write to check a runner method's batch argument at the
    boundary, with a switch to turn it off: one context-variable read, a type check and
    :func:`metadata`, raising the broken rule's code."""
    from specguard.contracts import ScheduledBatch

    @functools.wraps(method)
    def guarded(self: Any, batch: Any) -> T:
        if _HAND_CHECKS.get():
            if not isinstance(batch, ScheduledBatch):
                raise TypeError(f"batch: expected a ScheduledBatch, got {type(batch).__name__}")
            broken = metadata(batch)
            if broken is not None:
                raise ValueError(f"batch breaks {broken}")
        return method(self, batch)

    return guarded
