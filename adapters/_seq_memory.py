"""What the step tracker remembers of each seq by id, across steps the seq is absent from.

A seq can leave the batch and come back: skipped for a step under a token budget,
preempted and recomputed, parked. Two facts outlive its absence:

* where it left off (its next position), so that a seq coming back resumes there, or,
  as a prefill, restarts at or before it (a recompute from a cached prefix);
* the tokens the engine sampled for it, by position (the verifier's rows, and the token a
  prefill sampled after a chunk that ends its prompt), so that a recompute can be checked
  to re-feed exactly those (and never a placeholder slot or a token that was never
  sampled).

Prompt tokens are not kept: only positions the engine sampled are. Entries are kept
for the seqs seen most recently, as many as fit both bounds: ``limit`` seqs, and
``max_bytes`` bytes (each seq's emitted tokens, 8 bytes a position, plus
:data:`SEQ_BYTES` for its entries). Older ones are forgotten whole, progress and tokens
together: a forgotten seq is one the memory never saw, whose resume point and tokens are
simply not checked, so forgetting can never make a violation of what was valid.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat

import numpy as np

from specguard.adapters._step_plan import UNKNOWN, rows_in
from specguard.contracts._core._compiled import verdict

__all__ = ["DEFAULT_MAX_BYTES", "DIRECT_UP_TO", "SEQ_BYTES", "SeqMemory"]

#: What a remembered seq costs beyond its tokens, in bytes: its entries in the two dicts
#: (keys, values, the ``(base, tokens)`` tuple) and the token array's header, rounded up.
SEQ_BYTES = 400
#: Advances of at most this many seqs are applied at once rather than logged (see
#: :meth:`SeqMemory._record`): below it, a Python loop beats the log's numpy passes.
DIRECT_UP_TO = 64
#: The memory's default bound in bytes: 64 MiB, about 27,000 seqs of 256 sampled tokens.
DEFAULT_MAX_BYTES = 64 << 20

_NOTHING = np.zeros(0, dtype=np.int64)  # never written: a first emission grows a new array


class SeqMemory:
    """Per-seq progress and emitted tokens, keyed by seq id, least recently seen dropped.

    ``_ends`` holds every remembered seq in recency order (a dict keeps insertion order,
    and a seq seen again is moved to its end), with its next position or -1; ``_emitted``
    holds ``(base, tokens)`` for the seqs the engine sampled tokens for.

    A step records whole batches (:meth:`advance`, :meth:`emitted_rows`) into a log of
    arrays, folded into the dicts every ``fold_every`` records: a seq that stays in the
    batch is then written once per fold instead of once per step, and the fold itself is
    numpy passes plus one C-level dict update per distinct seq. The dicts are exact
    after every fold. A record that could take the memory past ``limit`` is folded at
    once and applied one seq at a time, so that what is forgotten is exactly what a
    least-recently-seen memory forgets. A record that takes the memory past
    ``max_bytes`` (the log's arrays counted) is folded at once too, and the least recently
    seen seqs are then forgotten until the memory fits: :attr:`nbytes` is at most
    ``max_bytes`` whenever a call returns. An advance of at most ``direct_up_to`` seqs
    that finds the log empty is applied one seq at a time instead: for a small batch the
    log's numpy passes, paid again by every lookup until the fold, cost more than the
    dict writes they save.
    """

    def __init__(self, limit: int = 1 << 16, fold_every: int = 16,
                 max_bytes: int = DEFAULT_MAX_BYTES, direct_up_to: int = DIRECT_UP_TO) -> None:
        self.limit = limit
        self.fold_every = fold_every
        self.direct_up_to = direct_up_to
        self.max_bytes = max_bytes
        self._ends: dict[int, int] = {}
        self._emitted: dict[int, tuple[int, np.ndarray]] = {}
        self._log: list[_Record] = []
        self._logged = 0  # ids in the log: at most this many seqs are new to the dicts
        self._token_bytes = 0  # the emitted arrays of the dicts
        self._log_bytes = 0  # the arrays of the log's records

    @property
    def nbytes(self) -> int:
        """What the memory holds, in bytes: its seqs' entries and tokens, and the log."""
        return len(self._ends) * SEQ_BYTES + self._token_bytes + self._log_bytes

    def __len__(self) -> int:
        self._fold()
        return len(self._ends)

    def empty(self) -> bool:
        """Whether no seq is remembered (without folding the log)."""
        return not self._ends and not self._log

    def clear(self) -> None:
        """Forget every seq."""
        self._ends.clear()
        self._emitted.clear()
        self._log.clear()
        self._logged = 0
        self._token_bytes = self._log_bytes = 0

    def ends(self, seq_ids: np.ndarray) -> np.ndarray:
        """Each seq's next position, or -1 when it is not known."""
        found = np.fromiter(map(self._ends.get, seq_ids.tolist(), repeat(UNKNOWN)),
                            dtype=np.int64, count=seq_ids.shape[0])
        for record in self._log:  # oldest first: a later record wins
            if isinstance(record, _Advance):
                at = _last_rows_in(record.ids, seq_ids)
                hit = at >= 0
                found[hit] = record.ends[at[hit]]
        return found

    def advance(self, seq_ids: np.ndarray, starts: np.ndarray, advance: np.ndarray) -> None:
        """Record where a step left each seq: ``start + advance``, or unknown (-1)."""
        if not self._log and seq_ids.shape[0] <= self.direct_up_to:
            # Applied at once (see _record): for a decode step's few seqs, the ends in one
            # Python pass over the lists cost less than the numpy passes that make arrays
            # no log will hold.
            if verdict("touch_ends", self._ends, seq_ids, starts, advance,
                       self.limit - len(self._ends)) is None:
                listed = [start + moved if moved >= 0 and start >= 0 else UNKNOWN
                          for start, moved in zip(starts.tolist(), advance.tolist(),
                                                  strict=True)]
                _touch_all(self, seq_ids.tolist(), listed)
            self._within_bytes()
            return
        ends = np.where((advance >= 0) & (starts >= 0), starts + advance, UNKNOWN)
        self._record(_Advance(seq_ids.astype(np.int64), ends.astype(np.int64)))

    def emitted_rows(self, seq_ids: np.ndarray, positions: np.ndarray, tokens: np.ndarray,
                     counts: np.ndarray) -> None:
        """Record ``tokens[i, :counts[i]]`` as emitted for ``seq_ids[i]`` from
        ``positions[i]`` on, for every row: what :meth:`emitted` does row by row."""
        keep = (positions >= 0) & (counts > 0)
        if not keep.all():
            seq_ids, positions, tokens, counts = (
                seq_ids[keep], positions[keep], tokens[keep], counts[keep])
        if seq_ids.shape[0]:
            self._record(_Emitted(seq_ids.astype(np.int64), positions.astype(np.int64),
                                  tokens.astype(np.int64), counts.astype(np.int64)))

    def emitted(self, seq_id: int, position: int, tokens: np.ndarray) -> None:
        """Record ``tokens`` as emitted for ``seq_id`` from ``position`` on."""
        self._fold()
        self._emit(seq_id, position, tokens)

    def first_mismatch(self, seq_id: int, start: int,
                       tokens: np.ndarray) -> tuple[int, int, int] | None:
        """The first position in ``[start, start + len(tokens))`` whose token differs from
        the one emitted there, as ``(position, fed, emitted)``; None when all agree."""
        self._fold()
        entry = self._emitted.get(seq_id)
        if entry is None or start < 0:
            return None
        base, emitted = entry
        lo = max(start, base)
        hi = min(start + tokens.shape[0], base + emitted.shape[0])
        if lo >= hi:
            return None
        known = emitted[lo - base:hi - base]
        fed = tokens[lo - start:hi - start]
        bad = np.flatnonzero((known >= 0) & (fed != known))
        if bad.shape[0] == 0:
            return None
        i = int(bad[0])
        return lo + i, int(fed[i]), int(known[i])

    def _record(self, record: _Record) -> None:
        # (A small advance that finds the log empty never gets here: :meth:`advance`
        # applies it at once, a dict write per seq costing less than the numpy passes a
        # logged record costs every later lookup.)
        if len(self._ends) + self._logged + record.ids.shape[0] > self.limit:
            self._fold()  # the log's repeated ids count once from here on
            if len(self._ends) + record.ids.shape[0] > self.limit:
                record.apply_one_by_one(self)  # seqs may be forgotten on the way: in order
                self._within_bytes()
                return
        if isinstance(record, _Advance):
            self._drop_superseded(record)
        self._log.append(record)
        self._logged += record.ids.shape[0]
        self._log_bytes += record.nbytes
        if len(self._log) >= self.fold_every or self.nbytes > self.max_bytes:
            self._fold()

    def _drop_superseded(self, record: _Advance) -> None:
        """Drop the log's last advance when ``record`` moves the same seqs in the same
        order: every seq it touched is touched again, later and in the same order, and
        gets its end from ``record`` (the steady state: one decode batch, step after step).
        """
        for i in range(len(self._log) - 1, -1, -1):
            earlier = self._log[i]
            if isinstance(earlier, _Advance):
                if np.array_equal(earlier.ids, record.ids):
                    del self._log[i]
                    self._logged -= earlier.ids.shape[0]
                    self._log_bytes -= earlier.nbytes
                return

    def _fold(self) -> None:
        """Apply the log to the dicts: no seq is forgotten (see :meth:`_record`)."""
        if not self._log:
            return
        log, self._log, self._logged, self._log_bytes = self._log, [], 0, 0
        order = _by_last_touch(_recency_runs(log))
        ids = order.tolist()
        ends = np.fromiter(map(self._ends.pop, ids, repeat(UNKNOWN)), dtype=np.int64,
                           count=len(ids))
        advanced = [record for record in log if isinstance(record, _Advance)]
        if advanced:
            moved = np.concatenate([record.ids for record in advanced])
            at = _last_rows_in(moved, order)
            hit = at >= 0
            ends[hit] = np.concatenate([record.ends for record in advanced])[at[hit]]
        self._ends.update(zip(ids, ends.tolist(), strict=True))
        emitted = [record for record in log if isinstance(record, _Emitted)]
        if emitted:
            self._write_grouped(*_last_writes(emitted))
        self._within_bytes()

    def _within_bytes(self) -> None:
        """Forget the least recently seen seqs, whole, until the memory fits ``max_bytes``."""
        while self._ends and self.nbytes > self.max_bytes:
            self._forget(next(iter(self._ends)))

    def _write_grouped(self, ids: np.ndarray, positions: np.ndarray,
                       tokens: np.ndarray) -> None:
        """Write tokens sorted by seq and position, one write per seq."""
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        stops = np.r_[starts[1:], ids.shape[0]]
        for seq_id, lo, hi in zip(ids[starts].tolist(), starts.tolist(), stops.tolist(),
                                  strict=True):
            self._scatter(seq_id, positions[lo:hi], tokens[lo:hi])

    def _scatter(self, seq_id: int, positions: np.ndarray, tokens: np.ndarray) -> None:
        """Store ``tokens`` at the sorted ``positions`` of the seq's emitted array."""
        first, stop = int(positions[0]), int(positions[-1]) + 1
        if stop - first == positions.shape[0]:  # contiguous (positions are distinct)
            self._write(seq_id, first, tokens)
            return
        entry = self._emitted.get(seq_id)
        base, emitted = entry if entry is not None else (first, _NOTHING)
        low, high = min(base, first), max(base + emitted.shape[0], stop)
        grown = np.full(high - low, UNKNOWN, dtype=np.int64)
        grown[base - low: base - low + emitted.shape[0]] = emitted
        grown[positions - low] = tokens
        self._token_bytes += grown.nbytes - emitted.nbytes
        self._emitted[seq_id] = (low, grown)

    def _touch(self, seq_id: int, end: int) -> None:
        """Make ``seq_id`` the most recently seen seq with next position ``end``, dropping
        the least recently seen one when a new seq takes the memory past its limit."""
        known = self._ends.pop(seq_id, None) is not None
        self._ends[seq_id] = end
        if not known and len(self._ends) > self.limit:
            self._forget(next(iter(self._ends)))

    def _forget(self, seq_id: int) -> None:
        del self._ends[seq_id]
        entry = self._emitted.pop(seq_id, None)
        if entry is not None:
            self._token_bytes -= entry[1].nbytes

    def _emit(self, seq_id: int, position: int, tokens: np.ndarray) -> None:
        """:meth:`emitted` on the dicts alone (the log is folded)."""
        if position < 0 or tokens.shape[0] == 0:
            return
        self._touch(seq_id, self._ends.get(seq_id, UNKNOWN))
        if seq_id not in self._ends:
            return  # a memory of no seqs at all
        self._write(seq_id, position, tokens)
        self._within_bytes()

    def _write(self, seq_id: int, position: int, tokens: np.ndarray) -> None:
        """Store ``tokens`` at ``position`` in the seq's emitted array (no recency change)."""
        entry = self._emitted.get(seq_id)
        base, emitted = entry if entry is not None else (position, _NOTHING)
        self._token_bytes -= emitted.nbytes
        if position < base:  # an earlier position than any known: re-base
            pad = np.full(base - position, UNKNOWN, dtype=np.int64)
            emitted = np.concatenate([pad, emitted])
            base = position
        stop = position - base + tokens.shape[0]
        if stop > emitted.shape[0]:
            grown = np.full(stop, UNKNOWN, dtype=np.int64)
            grown[: emitted.shape[0]] = emitted
            emitted = grown
        emitted[position - base:stop] = tokens
        self._token_bytes += emitted.nbytes
        self._emitted[seq_id] = (base, emitted)


class _Advance:
    """One batch's advance recorded into the memory: where the step left each seq."""

    __slots__ = ("ends", "ids")

    def __init__(self, ids: np.ndarray, ends: np.ndarray) -> None:
        self.ids, self.ends = ids, ends

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.ends.nbytes)

    def apply_one_by_one(self, memory: SeqMemory) -> None:
        _touch_all(memory, self.ids.tolist(), self.ends.tolist())


def _touch_all(memory: SeqMemory, ids: list[int], ends: list[int]) -> None:
    """``memory._touch`` of each seq in order, with its end."""
    known = memory._ends
    if len(known) + len(ids) <= memory.limit:
        # Nothing can be forgotten: what the touches one by one leave, in two C-level
        # passes (drop the batch's seqs, then append them in batch order).
        deque(map(known.pop, ids, repeat(None)), maxlen=0)
        before = len(known)
        known.update(zip(ids, ends, strict=True))
        if len(known) - before == len(ids):
            return
        # A repeated id: dict.update keeps its first place; the touches move it to its
        # last. Touching again in order gives exactly their result.
    for seq_id, end in zip(ids, ends, strict=True):
        memory._touch(seq_id, end)


class _Emitted:
    """One batch of verifier rows recorded into the memory: ``tokens[i, :counts[i]]``
    emitted for ``ids[i]`` from ``positions[i]`` on."""

    __slots__ = ("counts", "ids", "positions", "tokens")

    def __init__(self, ids: np.ndarray, positions: np.ndarray, tokens: np.ndarray,
                 counts: np.ndarray) -> None:
        self.ids, self.positions, self.tokens, self.counts = ids, positions, tokens, counts

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.positions.nbytes + self.tokens.nbytes
                   + self.counts.nbytes)

    def apply_one_by_one(self, memory: SeqMemory) -> None:
        for row, (seq_id, position, count) in enumerate(zip(
                self.ids.tolist(), self.positions.tolist(), self.counts.tolist(), strict=True)):
            memory._emit(seq_id, position, self.tokens[row, :count])


_Record = _Advance | _Emitted


def _last_writes(records: list[_Emitted]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every emitted token of ``records`` as ``(seq id, position, token)``, sorted by seq
    and position, the last write of a position winning (records and rows in order)."""
    ids, positions, tokens = [], [], []
    for record in records:
        width = record.tokens.shape[1]
        taken = np.arange(width)[None, :] < np.minimum(record.counts, width)[:, None]
        ids.append(np.broadcast_to(record.ids[:, None], taken.shape)[taken])
        positions.append((record.positions[:, None] + np.arange(width)[None, :])[taken])
        tokens.append(record.tokens[taken])
    flat_ids, flat_positions = np.concatenate(ids), np.concatenate(positions)
    flat_tokens = np.concatenate(tokens)
    order = np.lexsort((np.arange(flat_ids.shape[0]), flat_positions, flat_ids))
    flat_ids, flat_positions, flat_tokens = (
        flat_ids[order], flat_positions[order], flat_tokens[order])
    last = np.r_[(flat_ids[1:] != flat_ids[:-1]) | (flat_positions[1:] != flat_positions[:-1]),
                 True]
    return flat_ids[last], flat_positions[last], flat_tokens[last]


def _recency_runs(log: list[_Record]) -> np.ndarray:
    """The ids the log touches, in order, without the runs that the next record touches
    again in the same order (they cannot change which seq was seen last)."""
    runs = [record.ids for i, record in enumerate(log)
            if i + 1 == len(log) or not np.array_equal(record.ids, log[i + 1].ids)]
    return np.concatenate(runs)


def _last_rows_in(reference: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """For each id, the index of its last occurrence in ``reference``, or -1."""
    # The first occurrence in the reversed reference is the last one in the reference.
    rows = rows_in(reference[::-1], ids)
    return np.where(rows >= 0, reference.shape[0] - 1 - rows, UNKNOWN).astype(np.int64)


def _by_last_touch(touched: np.ndarray) -> np.ndarray:
    """The distinct ids of ``touched``, ordered by their last occurrence."""
    distinct, first_from_end = np.unique(touched[::-1], return_index=True)
    last = touched.shape[0] - 1 - first_from_end
    ordered: np.ndarray = distinct[np.argsort(last, kind="stable")]
    return ordered
