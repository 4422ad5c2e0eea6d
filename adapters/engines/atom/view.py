"""ATOM (ROCm/ATOM) MTP batches, read by duck typing and checked against the contracts.

ATOM is not imported: :class:`AtomView` reads its ``ScheduledBatch`` through ATOM's own
field names and builds a ``specguard.contracts.ScheduledBatch`` from views of its arrays (O(batch)
work, no per-token loop, the token and dense draft arrays are not copied)::

    view = AtomView(mtp_k=3, vocab_size=129280, block_size=16, tracker=StepTracker())
    scheduler = guard_scheduler(scheduler, view)   # every batch is checked before forward
    ...
    view.verified(batch, sampled_tokens, num_bonus_tokens)   # after the rejection sampler
    view.drafted(batch, draft_token_ids)                     # after the MTP head

What it recognises, in ATOM's terms:

* ``scheduled_spec_decode_tokens`` dense ``(bs, k)`` (upstream since #1771) or compacted
  ``(n_with_drafts, k)`` (before it; 1-D and empty when nobody has drafts): the runner
  reads a row only for a seq that was not in the previous forward, at its batch
  position, and none when it has no previous forward (a P/D consumer's first decode:
  ``scheduled_tokens`` are fed as they are, see :func:`_fed_drafts`). A compacted array
  whose rows those reads miss or misassign is the ``IndexError: index 127 is out of
  bounds`` bug, reported as SG101 naming the seq without a row (see :func:`_rows_read`);
* ``block_tables`` filtered by ``if seq.block_table`` and ``per_req_cache_groups``
  compacted to the seqs with a group: SG105 names the first seq without an entry;
* decode ``context_lens`` include ATOM's placeholders: the view subtracts the rejected
  count the runner will use (for deferred rows, the previous step's, from the tracker);
* ATOM's layout assumptions (one phase per batch, ``[deferred | new]`` before #1771,
  ``num_spec_step``): :class:`~specguard.adapters.engines.atom.layout.AtomLayout`, rules
  SG611-SG613;
* ``Scheduler.schedule()``'s ``(batch, seqs)`` or ``None``, so ``guard_scheduler`` works
  as is; :mod:`specguard.adapters.engines.atom.install` wraps a live ``ModelRunner`` instead.

``block_tables`` reaches the contract as a read-only broadcast of one block id per seq
(its first block, or -1 when its table is empty or shorter than its context), so SG110
gives its verdict without copying the tables; at ``metadata`` depth the tables are only
counted (see :func:`_block_tables`).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.adapters._packing import exact_ints, pack_int64
from specguard.adapters._step_rules import RECOMPUTE, runs
from specguard.adapters.engines.atom.layout import AtomLayout
from specguard.adapters.step_tracker import StepLinks, StepPlan, StepState, StepTracker
from specguard.contracts import (
    REGISTRY,
    Boundary,
    Depth,
    DrafterOutput,
    Finding,
    ScheduledBatch,
    VerifyOutput,
    current_config,
    report,
)
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import maximum_of as _maximum
from specguard.contracts.ops import ceil_div, is_int

__all__ = ["LAYOUTS", "AtomLayout", "AtomView"]

_SUBJECT = "ATOM ScheduledBatch"
_FIRST = itemgetter(0)
_LIST_ITEM = list.__getitem__
# The C functions themselves: the array methods add a Python-level call per use.


#: The runner versions the view models, by the ATOM change that separates them.
LAYOUTS = ("pr1771", "pre-1771")


class AtomView:
    """Validates ATOM ``ScheduledBatch`` objects; one instance per engine (it keeps state).

    ``mtp_k``, ``vocab_size`` and ``block_size`` are the engine's configuration. Give it a
    :class:`StepTracker` to check step-to-step relations, and to read draft rows and
    deferred rows the way the runner does. ``per_req_state`` says whether the model keeps
    per-request state (GDN, DeepSeek-V4); None infers it from a non-empty
    ``per_req_cache_groups``.

    ``layout`` names the runner whose reading of the batch is modelled:

    * ``"pr1771"`` (default; ATOM from ROCm/ATOM#1771, ``042e8f1c0``, to today):
      ``tokenIDProcessor.prepare_input_ids`` addresses every decode span by its own batch
      position, so any interleaving of deferred and new seqs is valid (SG612 is off);
      a batch whose prefill seqs are all on middle chunks returns from ``forward``
      before postprocess, so it does not become the runner's previous forward;
    * ``"pre-1771"`` (ATOM up to ``26ba9913d``, ROCm/ATOM#1444, included): deferred and
      new spans are written as two blocks, so the batch must be laid out
      ``[deferred | new]`` (or ``[new | deferred]`` right after a prefill forward): SG612.

    Both runners read a host draft row only for a decode seq that was not in the
    previous forward, at its batch position; a seq that was is fed its anchor and drafts
    from the device. With no previous forward at all (``prev_batch is None``: the
    tracker has seen no forward, as for a P/D consumer whose first decode is the
    runner's first forward) they feed ``scheduled_tokens`` as they are and read no host
    row. With a tracker, the view checks exactly those reads, so a compacted
    ``scheduled_spec_decode_tokens`` (before #1771) passes while every row read exists
    and belongs to its seq, and is SG101 otherwise, and a first forward's drafts are the
    ones in the token stream; without one, every decode seq must have its row.
    """

    def __init__(self, *, mtp_k: int, vocab_size: int, block_size: int,
                 tracker: StepTracker | None = None, per_req_state: bool | None = None,
                 layout: str = "pr1771") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"AtomView: layout={layout!r} is not one of {LAYOUTS} "
                             "('pr1771' for ATOM from ROCm/ATOM#1771 on, 'pre-1771' before)")
        self.mtp_k = mtp_k
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.tracker = tracker
        self.per_req_state = per_req_state
        self.layout = layout

    def schedule(self, batch: Any) -> ScheduledBatch | None:
        """Check one batch (and its relation to the previous step); return the contract view.

        Also takes what ATOM's ``Scheduler.schedule()`` returns, so that
        ``guard_scheduler(scheduler, view)`` works: ``(batch, seqs)`` is checked as
        ``batch``, and ``None`` (nothing to schedule) is returned as it is. A batch with no
        seqs, which ATOM's engine never forwards, is checked but leaves the tracker's
        previous step alone.
        """
        if batch is None:
            return None
        if isinstance(batch, tuple) and len(batch) == 2:
            batch = batch[0]
            if batch is None:
                return None
        seq_ids = _ids(_read(batch, "req_ids"))
        previous = self.tracker.close() if self.tracker is not None else None
        links = _links(self.tracker, seq_ids)
        fields = self._fields(batch, seq_ids, links, previous)
        scheduled = build(ScheduledBatch, fields, state=previous, snapshot_fields=lambda: {
            **fields, "block_tables": _padded_tables(getattr(batch, "block_tables", None))})
        build(AtomLayout, _layout(batch, self.mtp_k, seq_ids, links, previous,
                                  self.layout == "pre-1771"), state=previous)
        if self.tracker is not None:
            # Deferred rows: the runner gathers their drafts from the previous forward.
            refilled = links.prev_rows[fields["is_decode"]] >= 0
            self.tracker.schedule(scheduled, refilled=refilled,
                                  forwarded=self._becomes_previous(batch, fields["is_decode"]))
        return scheduled

    #: A view is also the check itself: ``guard_scheduler(scheduler, view)`` calls it.
    __call__ = schedule

    def skipped_forward(self) -> None:
        """A forward of something other than a scheduled batch ran (ATOM's DP
        ``dummy_execution``): the runner's previous forward is now a batch with no real
        seqs, so every seq of the next batch is fed from the host."""
        if self.tracker is not None:
            empty = np.zeros(0, dtype=np.int64)
            self.tracker.schedule(StepPlan(
                self.mtp_k, empty, np.zeros(0, dtype=bool), empty, empty,
                np.zeros((0, self.mtp_k), dtype=np.int64), empty))

    def _becomes_previous(self, batch: Any, is_decode: np.ndarray) -> bool:
        """Whether the runner's next step will see this batch as its previous forward."""
        if is_decode.shape[0] == 0:
            return False  # ATOM's engine skips forward for a batch without seqs
        if self.layout == "pre-1771" or _count_nonzero(is_decode):
            return True
        final = getattr(batch, "is_final_chunk", None)  # from #1771 on
        return final is None or not isinstance(final, list | tuple) or any(final)

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

    def drafted(self, batch: Any, draft_token_ids: Any,
                next_token_ids: Any = None) -> DrafterOutput:
        """The MTP head's proposals for the batch, ``[bs, k]``, one row per seq in order.

        ``next_token_ids`` (``[bs]``, what ATOM's ``propose_draft_token_ids`` receives) is
        the token each seq sampled in this forward. A prefill seq's, when its chunk ends
        the prompt, is its first token: with a tracker, where SG608 runs, it
        joins the seq's history next to the verifier's rows, so that a recompute which
        re-feeds anything else at that position (the EOS placeholder ATOM's preemption
        leaves there) is SG608. The sample of a middle chunk, which ATOM drops, is not kept.
        """
        out = build(DrafterOutput, {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
            "seq_ids": _ids(_read(batch, "req_ids")), "draft_token_ids": draft_token_ids})
        if self.tracker is not None:
            self.tracker.drafted(out)
            if next_token_ids is not None and runs(*RECOMPUTE):
                kept = _kept_samples(batch, self.block_size)
                if kept is not None:
                    self.tracker.record_sampled(out.seq_ids, next_token_ids, kept)
        return out

    def _fields(self, batch: Any, seq_ids: Any, links: StepLinks,
                previous: StepState | None) -> dict[str, Any]:
        size = seq_ids.shape[0] if isinstance(seq_ids, np.ndarray) and seq_ids.ndim == 1 else 0
        num_prefill = _read(batch, "total_seqs_num_prefill")
        num_decode = _read(batch, "total_seqs_num_decode")
        # ATOM orders prefills first: seqs from total_seqs_num_prefill on are decodes.
        is_decode = np.zeros(size, dtype=bool)
        if is_int(num_prefill):
            is_decode[max(int(num_prefill), 0):] = True
        decoding = _count_nonzero(is_decode)
        context = _context_lens(batch, is_decode, links, previous, self.mtp_k)
        drafts = _read(batch, "scheduled_spec_decode_tokens") if decoding else None
        if drafts is None and not decoding:
            drafts = np.zeros((0, self.mtp_k), dtype=np.int32)
        num_drafts = _num_drafts(is_decode, links, previous, self.mtp_k)
        tokens = _read(batch, "scheduled_tokens")
        scheduled = _read(batch, "num_scheduled_tokens")
        if decoding and self.tracker is not None and self.tracker.before_first_forward:
            # No previous forward (ATOM's prev_batch is None: a P/D consumer's first
            # decode): prepare_input_ids feeds scheduled_tokens as they are and reads no
            # host draft row, so the drafts are the ones in the token stream.
            fed = _fed_drafts(tokens, scheduled, is_decode, self.mtp_k)
            drafts = fed if fed is not None else drafts
        else:
            drafts = _rows_read(drafts, is_decode, links, num_drafts, self.mtp_k,
                                tracked=self.tracker is not None)
        return {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size, "block_size": self.block_size,
            "num_decode": num_decode, "num_tokens": _read(batch, "total_tokens_num"),
            "seq_ids": seq_ids, "is_decode": is_decode,
            "num_scheduled_tokens": scheduled,
            "context_lens": context,
            "block_tables": _block_tables(_read(batch, "block_tables"), context,
                                          self.block_size),
            "token_ids": tokens,
            "draft_token_ids": drafts,
            "num_drafts": num_drafts,
            "state_slots": _state_slots(_read(batch, "per_req_cache_groups"), self.per_req_state),
            "drafts_handed_over": _handed_over(batch, seq_ids, is_decode),
        }


def _handed_over(batch: Any, seq_ids: Any, is_decode: np.ndarray) -> np.ndarray | None:
    """Per decode row, whether its seq is a P/D consumer's first decode, whose drafts
    ATOM's scheduler took from the prefill instance (``kv_transfer_params``'
    ``draft_token_ids``): real drafts this runner's MTP head never proposed.

    ``remote_kv_seq_blocks`` lists the blocks of each seq whose first decode reads remote
    KV. (``is_first_decode_without_local_prefill`` would say the same per seq, but the
    scheduler clears each seq's flag before it builds a decode batch: there it is all
    False.) None when no seq of the batch is listed.
    """
    remote = getattr(batch, "remote_kv_seq_blocks", None)
    ids = host_array(seq_ids)
    if not isinstance(remote, Mapping) or not remote or ids is None or ids.ndim != 1 \
            or ids.shape != is_decode.shape:
        return None
    keys = [key for key in remote if type(key) is int]
    handed = np.isin(ids[is_decode], np.asarray(keys, dtype=np.int64))
    return handed if handed.any() else None


def _read(batch: Any, name: str) -> Any:
    """An ATOM field, or None (reported as SG001) when the object lacks it or reading it
    raises. A list or tuple of a subclass is read as the plain list its iteration gives,
    so that a subclass whose ``__len__`` or ``__iter__`` raises is a violation naming the
    field, not an exception from deep inside the view."""
    try:
        value = _plain(getattr(batch, name))
    except AttributeError:
        _unreadable(name, f"the batch has no field {name!r}")
        return None
    except Exception as error:  # a property or a container of the engine's that raises
        _unreadable(name, f"reading the batch's {name!r} raised {type(error).__name__}: "
                          f"{error}")
        return None
    return value


def _unreadable(name: str, reason: str) -> None:
    report(_SUBJECT, [("SG001", Finding(reason, name, expected=f"ATOM ScheduledBatch.{name}"))],
           boundary=Boundary.SCHEDULE.value)


def _peek(batch: Any, name: str) -> Any:
    """:func:`_read` for what only the tracker's memory reads: None, quietly, where
    reading fails (the schedule's own reading has reported it)."""
    try:
        return _plain(getattr(batch, name, None))
    except Exception:  # reported when the batch was scheduled
        return None


def _plain(value: Any) -> Any:
    """A list or tuple of a subclass as the plain list its iteration gives (which may
    raise: the callers say what then); anything else as it is."""
    if isinstance(value, list | tuple) and type(value) not in (list, tuple):
        return list(value)
    return value


def _ids(req_ids: Any) -> Any:
    """``req_ids`` (a list of ints) as an int64 vector.

    A list of something else becomes a vector of its own dtype, so the contract reports
    the dtype (SG002) with the batch size intact; anything else is left to the contract.
    """
    if not isinstance(req_ids, list | tuple):
        return req_ids
    return _int_vector(req_ids)


def _int_vector(values: list[Any] | tuple[Any, ...]) -> Any:
    """``values`` as a vector in one C-level pass: int64 when they are integers, else
    numpy's own dtype (``object`` for integers beyond int64, which the contract then
    reports for the field), or ``values`` itself when numpy cannot make a vector of them.
    """
    if not values:
        return np.zeros(0, dtype=np.int64)
    exact = exact_ints(values)  # plain ints, read where they lie: no bool among them
    if exact is not None:
        return exact
    # Integers (anything with __index__) straight into int64, in C. A float, a string
    # or an int past int64 is not packed: numpy says what it is, below.
    ids = pack_int64(values, len(values))
    if ids is not None:
        # A bool is an int to struct but its own dtype to numpy: only entries equal to
        # 0 or 1 can be one, and only those are looked at (found in one pass: unsigned,
        # a negative id is huge).
        small = np.flatnonzero(ids.view(np.uint64) <= 1).tolist()
        if not any(type(values[i]) is bool for i in small):
            return ids
    try:
        ids = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        return values
    if ids.ndim != 1 or ids.shape[0] != len(values):
        return values
    # int64 is what Python ints give; any other dtype is checked one by one (numpy
    # integers of another width, ints beyond int64, uint64 mixed with ints as float64).
    if ids.dtype != np.int64 and all(map(is_int, values)):
        try:
            return np.asarray(values, dtype=np.int64).reshape(len(values))
        except OverflowError:
            return ids.astype(object)
    return ids


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
            or rejected.shape != (size,) or not _count_nonzero(is_decode) \
            or context.dtype.kind not in "iu" or rejected.dtype.kind not in "iu":
        return raw
    tracked = previous is not None and previous.seq_ids.shape[0] > 0
    if not tracked and not _count_nonzero(rejected):
        return context  # nothing rejected to subtract: the runner's lengths as they are
    rejected = rejected.astype(np.int64)
    if previous is not None and tracked:
        rows = links.prev_rows
        at = np.maximum(rows, 0)
        was_prefill = (rows >= 0) & ~previous.is_decode[at]
        advance = np.asarray(previous.advance)[at]  # the tracker's state is on the host
        known = (rows >= 0) & previous.is_decode[at] & (advance >= 1)
        rejected[was_prefill] = 0
        rejected[known] = mtp_k - (advance[known] - 1)
    return np.where(is_decode, context - rejected, context).astype(context.dtype, copy=False)


def _num_drafts(is_decode: np.ndarray, links: StepLinks, previous: StepState | None,
                mtp_k: int) -> np.ndarray:
    """``mtp_k`` per decode seq, except 0 for a seq whose previous step was its prefill:
    its drafts have not reached the host yet, so it has no row in the compacted form."""
    counts = np.full(_count_nonzero(is_decode), mtp_k, dtype=np.int32)
    if previous is None or not previous.seq_ids.shape[0] or links.prev_rows.shape[0] != \
            is_decode.shape[0]:
        return counts
    rows = links.prev_rows[is_decode]
    fresh = (rows >= 0) & ~previous.is_decode[np.maximum(rows, 0)]
    counts[fresh] = 0
    return counts


def _rows_read(raw: Any, is_decode: np.ndarray, links: StepLinks, num_drafts: np.ndarray,
               mtp_k: int, *, tracked: bool) -> Any:
    """``scheduled_spec_decode_tokens`` as the contract's one row per decode seq, read the
    way ATOM's runner reads it (every version, ``prepare_input_ids``).

    ATOM builds the host rows from ``{seq id: drafts}`` of the seqs that have drafts on
    the host: ``np.asarray(list(d.values()))`` before #1771 (compacted; 1-D and empty
    when nobody has drafts yet), ``(bs, k)`` zero-filled from #1771 on. The runner reads
    a row only for a decode seq that was not in the previous forward (*new*), at the
    seq's batch position; *deferred* seqs are fed from the device. So:

    * an empty array is zero rows, whatever its rank;
    * with a tracker, a short (compacted) array is valid while every row the runner
      reads exists and belongs to its reader: the reader's drafts, given that seqs fresh
      from prefill (``num_drafts`` 0) have no row. It then reaches the contract as one
      row per decode seq (the rows read, zeros where the device feeds the seq).
      Otherwise the array reaches the contract as it is and SG101 names the seq whose
      row is missing;
    * when every decode seq is fed from the device, no row is read: an array that is
      not one full row per decode seq (a P/D seq's short handed-over drafts linger in
      the compacted form) reaches the contract as zeros;
    * a dense array, or anything without a tracker, reaches the contract unchanged.

    With no previous forward, :func:`_fed_drafts` replaces this reading.
    """
    rows = host_array(raw)
    if rows is None:
        return raw
    if rows.ndim == 1 and rows.shape[0] == 0:
        rows = rows.reshape(0, mtp_k)
    if not tracked:
        return rows
    decode = np.flatnonzero(is_decode)
    if links.prev_rows.shape[0] != is_decode.shape[0] or num_drafts.shape[0] != decode.shape[0]:
        return rows
    reader = links.prev_rows[decode] < 0           # new seqs, in decode order
    if not reader.any() and rows.shape != (decode.shape[0], mtp_k):
        # Every decode seq is fed from the device: no host row is read, whatever the
        # array holds (before #1771, a P/D seq's short handed-over drafts linger there).
        return np.zeros((decode.shape[0], mtp_k),
                        dtype=rows.dtype if rows.dtype.kind in "iu" else np.int32)
    if rows.ndim != 2 or rows.shape[1] != mtp_k or rows.shape[0] >= decode.shape[0]:
        return rows
    with_row = num_drafts > 0                      # seqs that have a host row
    owner = np.cumsum(with_row) - 1                # the row each seq's drafts sit in
    at = decode[reader]                            # the row each reader reads
    sound = (at < rows.shape[0]) & with_row[reader] & (owner[reader] == at)
    if not sound.all():
        return rows
    dense = np.zeros((decode.shape[0], mtp_k), dtype=rows.dtype)
    dense[reader] = rows[at]
    return dense


def _fed_drafts(tokens: Any, scheduled: Any, is_decode: np.ndarray, mtp_k: int) -> Any:
    """The drafts in the token stream, one row per decode seq: what ATOM's runner feeds
    when it has no previous forward (``prepare_input_ids``, ``prev_batch is None``, every
    version: ``scheduled_tokens`` as they are). None when the stream cannot be read that
    way (the contract then reports what is wrong with the batch)."""
    stream, counts = host_array(tokens), host_array(scheduled)
    size = is_decode.shape[0]
    if stream is None or counts is None or stream.ndim != 1 or counts.shape != (size,) \
            or stream.dtype.kind not in "iu" or counts.dtype.kind not in "iu" or not size:
        return None
    decode = np.flatnonzero(is_decode)
    ends = np.cumsum(counts, dtype=np.int64)
    if int(ends[-1]) != stream.shape[0] or (counts[decode] != mtp_k + 1).any():
        return None
    first = ends[decode] - mtp_k  # the first draft of each span, after its anchor
    return stream[first[:, None] + np.arange(mtp_k)]


def _kept_samples(batch: Any, block_size: int) -> np.ndarray | None:
    """Per seq, whether the token its prefill chunk sampled is kept as its next token:
    the chunk ends the prompt. From #1771 the batch says so (``is_final_chunk``, ATOM's
    ``cached + chunk >= num_prompt_tokens``); before, a chunk ends the seq's tokens, whose
    count the table and ``last_block_num_tokens`` give (``(blocks - 1) * block_size +
    last_block_num_tokens``). None (keep nothing) when neither can be read."""
    ids = _peek(batch, "req_ids")
    size = len(ids) if isinstance(ids, list | tuple) else -1
    final = _peek(batch, "is_final_chunk")
    if isinstance(final, list | tuple) and len(final) == size \
            and all(isinstance(f, bool | np.bool_) for f in final):
        return np.array(final, dtype=bool)
    tables = _peek(batch, "block_tables")
    last = _peek(batch, "last_block_num_tokens")
    context = host_array(_peek(batch, "context_lens"))
    if not isinstance(tables, list | tuple) or not isinstance(last, list | tuple) \
            or context is None or context.dtype.kind not in "iu" or context.ndim != 1 \
            or not len(tables) == len(last) == context.shape[0] == size \
            or not all(map(is_int, last)) or not all(isinstance(t, list | tuple) for t in tables):
        return None
    blocks = np.fromiter(map(len, tables), dtype=np.int64, count=size)
    num_tokens = (blocks - 1) * block_size + np.asarray(last, dtype=np.int64)
    kept: np.ndarray = (blocks > 0) & (context >= num_tokens)
    return kept


def _block_tables(tables: Any, context: Any, block_size: int) -> Any:
    """ATOM's block tables as the contract reads them at the current depth.

    At ``metadata`` depth a list of tables is a count: its entries are values (ATOM's
    Python lists carry no dtype to read without walking them). It reaches the contract
    as a read-only broadcast of ``-1`` ("not read"), one row per table and as wide as the
    longest context needs, so SG105 still names a filtered-out seq and messages show the
    tables' width; a snapshot of a violation holds the tables themselves
    (:func:`_padded_tables`). Where SG110 runs, every table is read and summarised
    (:func:`_block_summary`). In between (the default depth while SG110 runs at
    ``full`` only) the tables are read in one pass, their first entries
    (:func:`_first_ids`): a malformed table is named, and the contract gets the first
    entries, broadcast as wide as the longest context needs, without their lengths,
    which only SG110 reads.
    """
    depth = current_config().depth
    if not isinstance(tables, list | tuple) or depth is Depth.FULL \
            or (depth is Depth.ESSENTIAL and _COVERAGE.depth is not Depth.FULL):
        return _block_summary(tables, context, block_size)
    shape = (len(tables), _widest(context, block_size))
    if depth is Depth.METADATA:
        # What np.broadcast_to(-1, shape) gives, made by the constructor directly:
        # read-only (its buffer is bytes), every element the one -1.
        return np.ndarray(shape, dtype=np.int64, buffer=_NOT_READ, strides=(0, 0))
    first = _first_ids(tables)
    if first is None:
        return _block_summary(tables, context, block_size)
    return np.broadcast_to(first[:, None], shape)


def _first_ids(tables: list[Any] | tuple[Any, ...]) -> np.ndarray | None:
    """Each table's first block id, when every table is a non-empty list starting with
    an id, else None: one C-level pass. ``list.__getitem__`` refuses anything but a list,
    and reading the entry into int64 refuses what is not an id, so a malformed table
    takes the general reading, which leaves it to the contract to name; so does a tuple,
    an empty table or an id past int64, which the general reading knows what to do with.
    """
    try:
        return np.fromiter(map(_LIST_ITEM, tables, repeat(0)), dtype=np.int64,
                           count=len(tables))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


_NOT_READ = np.int64(-1).tobytes()
#: The rule that reads the tables' lengths: below its depth, only their first entries
#: are read (:func:`_first_ids`).
_COVERAGE = REGISTRY["SG110"]


def _widest(context: Any, block_size: int) -> int:
    """Blocks the longest context needs (at least 1), from the host context lengths."""
    lens = host_array(context)
    if lens is None or lens.ndim != 1 or not lens.shape[0] or lens.dtype.kind not in "iu":
        return 1
    # Python ints: no wrap
    return max(-(-int(_maximum(lens, None)) // max(int(block_size), 1)), 1)


def _padded_tables(tables: Any) -> Any:
    """ATOM's table lists as one ``-1``-padded int64 array, for a snapshot (written only
    when a violation is raised, so one table at a time); anything that is not a list of
    integer lists is kept as it is, for the snapshot's check to report."""
    if not isinstance(tables, list | tuple) or \
            not all(isinstance(t, list | tuple) and all(map(is_int, t)) for t in tables):
        return tables
    width = max(map(len, tables), default=0)
    padded = np.full((len(tables), width), -1, dtype=np.int64)
    try:
        for row, table in enumerate(tables):
            padded[row, : len(table)] = table
    except OverflowError:
        return tables
    return padded


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
    n = len(tables)
    needed = ceil_div(lens[:n].astype(np.int64), max(block_size, 1))
    needed = np.concatenate([needed, np.ones(max(n - needed.shape[0], 0), dtype=np.int64)])
    try:
        lengths = np.fromiter(map(len, tables), dtype=np.int64, count=n)
        first = _first_blocks(tables, lengths)
    except (TypeError, ValueError, OverflowError):
        return tables  # not block ids: the contract reports the list for what it is
    covered = (lengths >= np.maximum(needed, 1)) & (first >= 0)
    column = np.where(covered, first, -1)
    # Wide enough for every table that covers its context; a longer context than any
    # table is then flagged by SG110 as it should be, without a giant view.
    width = int(max(min(needed.max(initial=1), lengths.max(initial=0) + 1), 1))
    return np.broadcast_to(column[:, None], (n, width))


def _first_blocks(tables: list[Any] | tuple[Any, ...], lengths: np.ndarray) -> np.ndarray:
    """Each table's first block id, -1 for an empty table: C-level passes, no Python loop
    (the tables are ATOM's own lists; only their first entries are read).

    Reading a first entry through ``list.__getitem__`` is also the check that the table
    is a list (ATOM's type): one pass, not two. Tuples take a second, general pass; any
    other table, empty ones included, raises TypeError for the caller to leave the
    tables to the contract.
    """
    filled = lengths > 0
    if filled.all():
        return _first_entries(tables, len(tables))
    if not all(map(isinstance, compress(tables, (~filled).tolist()), repeat((list, tuple)))):
        raise TypeError("a block table that is not a list")
    first = np.full(len(tables), -1, dtype=np.int64)
    first[filled] = _first_entries(list(compress(tables, filled.tolist())),
                                   int(_count_nonzero(filled)))
    return first


def _first_entries(tables: list[Any] | tuple[Any, ...], count: int) -> np.ndarray:
    try:
        return np.fromiter(map(_LIST_ITEM, tables, repeat(0)), dtype=np.int64, count=count)
    except TypeError:
        if not all(map(isinstance, tables, repeat((list, tuple)))):
            raise
    return np.fromiter(map(_FIRST, tables), dtype=np.int64, count=count)


def _state_slots(groups: Any, per_req_state: bool | None) -> Any:
    """``per_req_cache_groups`` as per-seq slots, or None when the model has no such state."""
    if groups is None:
        return None
    if isinstance(groups, list | tuple):
        if not groups and not per_req_state:
            return None
        if _plain_ints(groups):
            slots = _int_vector(groups)
            if isinstance(slots, np.ndarray) and slots.dtype == np.int64:
                return slots
        if all(is_int(g) for g in groups):  # numpy integers among them
            return _int_vector(groups)
        return groups  # past int64, or not integers: the contract reports the list
    return groups if per_req_state is not False else None


def _plain_ints(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every value is a Python ``int`` (not a bool): one C-level pass."""
    return set(map(type, values)) <= {int}


def _layout(batch: Any, mtp_k: int, seq_ids: Any, links: StepLinks,
            previous: StepState | None, blocks: bool) -> dict[str, Any]:
    size = seq_ids.shape[0] if isinstance(seq_ids, np.ndarray) and seq_ids.ndim == 1 else 0
    return {
        "mtp_k": mtp_k, "blocks_by_origin": blocks,
        "num_spec_step": _read(batch, "num_spec_step"),
        "seqs_prefill": _read(batch, "total_seqs_num_prefill"),
        "seqs_decode": _read(batch, "total_seqs_num_decode"),
        "previous_was_prefill": bool(previous is not None and previous.seq_ids.shape[0]
                                     and not previous.is_decode.any()),
        "seq_ids": seq_ids if size else np.zeros(0, dtype=np.int64),
        "prev_rows": links.prev_rows if links.prev_rows.shape[0] == size
        else np.full(size, -1, dtype=np.int64),
    }
