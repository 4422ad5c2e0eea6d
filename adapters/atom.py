"""ATOM (ROCm/ATOM) MTP batches, read by duck typing and checked against the contracts.

ATOM is not imported: :class:`AtomView` reads its ``ScheduledBatch`` through ATOM's own
field names and builds a ``specguard.contracts.ScheduledBatch`` from views of its arrays (O(batch)
work, no per-token loop, the token and draft arrays are not copied)::

    view = AtomView(mtp_k=3, vocab_size=129280, block_size=16, tracker=StepTracker())
    scheduler = guard_scheduler(scheduler, view)   # every batch is checked before forward
    ...
    view.verified(batch, sampled_tokens, num_bonus_tokens)   # after the rejection sampler
    view.drafted(batch, draft_token_ids)                     # after the MTP head

What it recognises, in ATOM's terms:

* ``scheduled_spec_decode_tokens`` dense ``(bs, k)`` (upstream since #1771) or compacted
  ``(n_with_drafts, k)`` (before it): the compacted form is the ``IndexError: index 127
  is out of bounds`` bug, reported as SG101 naming the seq without a row;
* ``block_tables`` filtered by ``if seq.block_table`` and ``per_req_cache_groups``
  compacted to the seqs with a group: SG105 names the first seq without an entry;
* decode ``context_lens`` include ATOM's placeholders: the view subtracts the rejected
  count the runner will use (for deferred rows, the previous step's, from the tracker);
* ATOM's layout assumptions (one phase per batch, ``[deferred | new]``, ``num_spec_step``):
  :class:`~specguard.adapters._atom_layout.AtomLayout`, rules SG611-SG613.

``block_tables`` reaches the contract as a read-only broadcast of one block id per seq
(its first block, or -1 when its table is empty or shorter than its context), so SG110
gives its verdict without copying the tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from specguard.adapters._atom_layout import AtomLayout
from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.adapters.step_tracker import StepLinks, StepState, StepTracker
from specguard.contracts import (
    Boundary,
    DrafterOutput,
    Finding,
    ScheduledBatch,
    VerifyOutput,
    report,
)
from specguard.contracts.ops import is_int

__all__ = ["AtomLayout", "AtomView"]

_SUBJECT = "ATOM ScheduledBatch"


class AtomView:
    """Validates ATOM ``ScheduledBatch`` objects; one instance per engine (it keeps state).

    ``mtp_k``, ``vocab_size`` and ``block_size`` are the engine's configuration. Give it a
    :class:`StepTracker` to check step-to-step relations and ATOM's ``[deferred | new]``
    layout, and to read deferred rows the way the runner does. ``per_req_state`` says
    whether the model keeps per-request state (GDN, DeepSeek-V4); None infers it from a
    non-empty ``per_req_cache_groups``.
    """

    def __init__(self, *, mtp_k: int, vocab_size: int, block_size: int,
                 tracker: StepTracker | None = None, per_req_state: bool | None = None) -> None:
        self.mtp_k = mtp_k
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.tracker = tracker
        self.per_req_state = per_req_state

    def __call__(self, batch: Any) -> ScheduledBatch:
        """Check one batch (and its relation to the previous step); return the contract view."""
        seq_ids = _ids(_read(batch, "req_ids"))
        previous = self.tracker.close() if self.tracker is not None else None
        links = _links(self.tracker, seq_ids)
        fields = self._fields(batch, seq_ids, links, previous)
        scheduled = build(ScheduledBatch, fields, state=previous)
        build(AtomLayout, _layout(batch, self.mtp_k, seq_ids, links, previous), state=previous)
        if self.tracker is not None:
            # Deferred rows: the runner gathers their drafts from the previous forward.
            refilled = links.prev_rows[fields["is_decode"]] >= 0
            self.tracker.schedule(scheduled, refilled=refilled)
        return scheduled

    def verified(self, batch: Any, sampled_tokens: Any, num_bonus_tokens: Any) -> VerifyOutput:
        """The rejection sampler's rows of a decode batch: ``[bs, k+1]`` and accepted counts.

        ATOM's ``num_bonus_tokens`` is the number of accepted drafts (not vLLM's bonus).
        """
        out = build(VerifyOutput, {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
            "seq_ids": _ids(_read(batch, "req_ids")), "token_ids": sampled_tokens,
            "num_accepted": num_bonus_tokens})
        if self.tracker is not None:
            self.tracker.verified(out)
        return out

    def drafted(self, batch: Any, draft_token_ids: Any) -> DrafterOutput:
        """The MTP head's proposals for the batch, ``[bs, k]``, one row per seq in order."""
        out = build(DrafterOutput, {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
            "seq_ids": _ids(_read(batch, "req_ids")), "draft_token_ids": draft_token_ids})
        if self.tracker is not None:
            self.tracker.drafted(out)
        return out

    def _fields(self, batch: Any, seq_ids: Any, links: StepLinks,
                previous: StepState | None) -> dict[str, Any]:
        size = seq_ids.shape[0] if isinstance(seq_ids, np.ndarray) and seq_ids.ndim == 1 else 0
        num_prefill = _read(batch, "total_seqs_num_prefill")
        num_decode = _read(batch, "total_seqs_num_decode")
        is_decode = np.arange(size) >= (num_prefill if is_int(num_prefill) else size)
        context = _context_lens(batch, is_decode, links, previous, self.mtp_k)
        drafts = _read(batch, "scheduled_spec_decode_tokens") if is_decode.any() else None
        if drafts is None and not is_decode.any():
            drafts = np.zeros((0, self.mtp_k), dtype=np.int32)
        return {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size, "block_size": self.block_size,
            "num_decode": num_decode, "num_tokens": _read(batch, "total_tokens_num"),
            "seq_ids": seq_ids, "is_decode": is_decode,
            "num_scheduled_tokens": _read(batch, "num_scheduled_tokens"),
            "context_lens": context,
            "block_tables": _block_summary(_read(batch, "block_tables"), context,
                                           self.block_size),
            "token_ids": _read(batch, "scheduled_tokens"),
            "draft_token_ids": drafts,
            "num_drafts": _num_drafts(is_decode, links, previous, self.mtp_k),
            "state_slots": _state_slots(_read(batch, "per_req_cache_groups"), self.per_req_state),
        }


def _read(batch: Any, name: str) -> Any:
    """An ATOM field, or None (reported as SG001) when the object lacks it."""
    try:
        return getattr(batch, name)
    except AttributeError:
        report(_SUBJECT, [("SG001", Finding(
            f"the batch has no field {name!r}", name, expected=f"ATOM ScheduledBatch.{name}"))],
            boundary=Boundary.SCHEDULE.value)
        return None


def _ids(req_ids: Any) -> Any:
    """``req_ids`` (a list of ints) as an int64 vector.

    A list of something else becomes a vector of its own dtype, so the contract reports
    the dtype (SG002) with the batch size intact; anything else is left to the contract.
    """
    if not isinstance(req_ids, list | tuple):
        return req_ids
    if all(is_int(i) for i in req_ids):
        return np.asarray(req_ids, dtype=np.int64).reshape(len(req_ids))
    try:
        ids = np.asarray(req_ids)
    except (TypeError, ValueError, OverflowError):
        return req_ids
    return ids if ids.ndim == 1 and ids.shape[0] == len(req_ids) else req_ids


def _links(tracker: StepTracker | None, seq_ids: Any) -> StepLinks:
    size = seq_ids.shape[0] if isinstance(seq_ids, np.ndarray) and seq_ids.ndim == 1 else 0
    if tracker is None or size == 0:
        return StepLinks(np.full(size, -1, dtype=np.int64))
    links = tracker.links(seq_ids)
    if links.prev_rows.shape[0] != size:
        return StepLinks(np.full(size, -1, dtype=np.int64))
    return links


def _context_lens(batch: Any, is_decode: np.ndarray, links: StepLinks,
                  previous: StepState | None, mtp_k: int) -> Any:
    """Decode ``context_lens`` minus the rejected count the runner subtracts.

    New rows use the batch's ``num_rejected``; deferred rows use what the tracker saw the
    verifier reject in the previous step (0 after a prefill), as the runner copies it
    from the device.
    """
    raw = _read(batch, "context_lens")
    context, rejected = host_array(raw), host_array(_read(batch, "num_rejected"))
    size = is_decode.shape[0]
    if context is None or rejected is None or context.shape != (size,) \
            or rejected.shape != (size,) or not is_decode.any() \
            or not np.issubdtype(context.dtype, np.integer) \
            or not np.issubdtype(rejected.dtype, np.integer):
        return raw
    rejected = rejected.astype(np.int64)
    if previous is not None and previous.seq_ids.shape[0]:
        rows = links.prev_rows
        at = np.maximum(rows, 0)
        was_prefill = (rows >= 0) & ~previous.is_decode[at]
        advance = previous.advance[at]
        known = (rows >= 0) & previous.is_decode[at] & (advance >= 1)
        rejected[was_prefill] = 0
        rejected[known] = mtp_k - (advance[known] - 1)
    return np.where(is_decode, context - rejected, context).astype(context.dtype, copy=False)


def _num_drafts(is_decode: np.ndarray, links: StepLinks, previous: StepState | None,
                mtp_k: int) -> np.ndarray:
    """``mtp_k`` per decode seq, except 0 for a seq whose previous step was its prefill:
    its drafts have not reached the host yet, so it has no row in the compacted form."""
    counts = np.full(int(is_decode.sum()), mtp_k, dtype=np.int32)
    if previous is None or not previous.seq_ids.shape[0] or links.prev_rows.shape[0] != \
            is_decode.shape[0]:
        return counts
    rows = links.prev_rows[is_decode]
    fresh = (rows >= 0) & ~previous.is_decode[np.maximum(rows, 0)]
    counts[fresh] = 0
    return counts


def _block_summary(tables: Any, context: Any, block_size: int) -> Any:
    """One block id per seq, broadcast to ``(n_tables, width)`` without a copy.

    The id is the seq's first block when its table covers ``cdiv(context, block_size)``
    blocks, else -1: SG110 then names exactly the seqs whose table is empty or too short,
    and a table list shorter than the batch (filtered) reaches SG105 as it is.
    """
    lens = host_array(context)
    if not isinstance(tables, list | tuple) or lens is None or lens.ndim != 1 \
            or not np.issubdtype(lens.dtype, np.integer):
        return tables
    if not all(isinstance(t, list | tuple) for t in tables):
        return tables
    n = len(tables)
    needed = -(-lens[:n].astype(np.int64) // max(block_size, 1))
    needed = np.concatenate([needed, np.ones(max(n - needed.shape[0], 0), dtype=np.int64)])
    try:
        lengths = np.fromiter(map(len, tables), dtype=np.int64, count=n)
        first = np.fromiter((t[0] if t else -1 for t in tables), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        return tables  # not block ids: the contract reports the list for what it is
    covered = (lengths >= np.maximum(needed, 1)) & (first >= 0)
    column = np.where(covered, first, -1)
    # Wide enough for every table that covers its context; a longer context than any
    # table is then flagged by SG110 as it should be, without a giant view.
    width = int(max(min(needed.max(initial=1), lengths.max(initial=0) + 1), 1))
    return np.broadcast_to(column[:, None], (n, width))


def _state_slots(groups: Any, per_req_state: bool | None) -> Any:
    """``per_req_cache_groups`` as per-seq slots, or None when the model has no such state."""
    if groups is None:
        return None
    if isinstance(groups, list | tuple):
        if not groups and not per_req_state:
            return None
        if all(is_int(g) for g in groups):
            return np.asarray(groups, dtype=np.int64).reshape(len(groups))
        return groups
    return groups if per_req_state is not False else None


def _layout(batch: Any, mtp_k: int, seq_ids: Any, links: StepLinks,
            previous: StepState | None) -> dict[str, Any]:
    size = seq_ids.shape[0] if isinstance(seq_ids, np.ndarray) and seq_ids.ndim == 1 else 0
    return {
        "mtp_k": mtp_k, "num_spec_step": _read(batch, "num_spec_step"),
        "seqs_prefill": _read(batch, "total_seqs_num_prefill"),
        "seqs_decode": _read(batch, "total_seqs_num_decode"),
        "previous_was_prefill": bool(previous is not None and previous.seq_ids.shape[0]
                                     and not previous.is_decode.any()),
        "seq_ids": seq_ids if size else np.zeros(0, dtype=np.int64),
        "prev_rows": links.prev_rows if links.prev_rows.shape[0] == size
        else np.full(size, -1, dtype=np.int64),
    }
