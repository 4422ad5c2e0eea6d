"""What the step tracker remembers of each seq by id, across steps the seq is absent from.

A seq can leave the batch and come back: skipped for a step under a token budget,
preempted and recomputed, parked. Two facts outlive its absence:

* where it left off (its next position), so that a seq coming back resumes there, or,
  as a prefill, restarts at or before it (a recompute from a cached prefix);
* the tokens the verifier emitted for it, by position, so that a recompute can be checked
  to re-feed exactly those (and never a placeholder slot or a token that was never
  emitted).

Prompt tokens are not kept: only positions the verifier produced are. Entries are kept
for the ``limit`` seqs seen most recently; older ones are forgotten (they are then simply
not checked).
"""

from __future__ import annotations

from collections import deque
from itertools import repeat

import numpy as np

__all__ = ["SeqMemory"]

UNKNOWN = -1
_NOTHING = np.zeros(0, dtype=np.int64)  # never written: a first emission grows a new array


class SeqMemory:
    """Per-seq progress and emitted tokens, keyed by seq id, least recently seen dropped.

    ``_ends`` holds every remembered seq in recency order (a dict keeps insertion order,
    and a seq seen again is moved to its end), with its next position or -1; ``_emitted``
    holds ``(base, tokens)`` for the seqs the verifier emitted tokens for. Both are
    plain dicts so that a whole batch is looked up and recorded in C-level passes.
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = limit
        self._ends: dict[int, int] = {}
        self._emitted: dict[int, tuple[int, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def clear(self) -> None:
        """Forget every seq."""
        self._ends.clear()
        self._emitted.clear()

    def _touch(self, seq_id: int, end: int) -> None:
        """Make ``seq_id`` the most recently seen seq with next position ``end``, dropping
        the least recently seen one when a new seq takes the memory past its limit."""
        known = self._ends.pop(seq_id, None) is not None
        self._ends[seq_id] = end
        if not known and len(self._ends) > self.limit:
            self._forget(next(iter(self._ends)))

    def _forget(self, seq_id: int) -> None:
        del self._ends[seq_id]
        self._emitted.pop(seq_id, None)

    def ends(self, seq_ids: np.ndarray) -> np.ndarray:
        """Each seq's next position, or -1 when it is not known."""
        return np.fromiter(map(self._ends.get, seq_ids.tolist(), repeat(UNKNOWN)),
                           dtype=np.int64, count=seq_ids.shape[0])

    def advance(self, seq_ids: np.ndarray, starts: np.ndarray, advance: np.ndarray) -> None:
        """Record where a step left each seq: ``start + advance``, or unknown (-1)."""
        ends = np.where((advance >= 0) & (starts >= 0), starts + advance, UNKNOWN)
        ids, values = seq_ids.tolist(), ends.tolist()
        if len(self._ends) + len(ids) > self.limit:
            known = sum(map(self._ends.__contains__, ids))
            if len(self._ends) + len(ids) - known > self.limit:
                self._touch_each(ids, values)  # seqs to drop on the way: in batch order
                return
        # Every seq moves to the recent end in batch order, as one at a time would.
        deque(map(self._ends.pop, ids, repeat(None)), maxlen=0)
        without = len(self._ends)
        self._ends.update(zip(ids, values, strict=True))
        if len(self._ends) - without != len(ids):
            self._touch_each(ids, values)  # a repeated id: its last occurrence is its place

    def _touch_each(self, ids: list[int], ends: list[int]) -> None:
        for seq_id, end in zip(ids, ends, strict=True):
            self._touch(seq_id, end)

    def emitted(self, seq_id: int, position: int, tokens: np.ndarray) -> None:
        """Record ``tokens`` as emitted for ``seq_id`` from ``position`` on."""
        if position < 0 or tokens.shape[0] == 0:
            return
        self._touch(seq_id, self._ends.get(seq_id, UNKNOWN))
        if seq_id not in self._ends:
            return  # a memory of no seqs at all
        entry = self._emitted.get(seq_id)
        base, emitted = entry if entry is not None else (position, _NOTHING)
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
        self._emitted[seq_id] = (base, emitted)

    def first_mismatch(self, seq_id: int, start: int,
                       tokens: np.ndarray) -> tuple[int, int, int] | None:
        """The first position in ``[start, start + len(tokens))`` whose token differs from
        the one emitted there, as ``(position, fed, emitted)``; None when all agree."""
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
