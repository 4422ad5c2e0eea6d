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

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SeqMemory"]

UNKNOWN = -1


@dataclass
class _Seq:
    end: int = UNKNOWN
    """The seq's next position: where its last known step left it, or -1."""
    base: int = UNKNOWN
    """Position of ``emitted[0]``, or -1 while nothing was emitted."""
    emitted: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Emitted tokens from ``base`` on; -1 where a position is not known."""


class SeqMemory:
    """Per-seq progress and emitted tokens, keyed by seq id, least recently seen dropped."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = limit
        self._seqs: OrderedDict[int, _Seq] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seqs)

    def clear(self) -> None:
        """Forget every seq."""
        self._seqs.clear()

    def _entry(self, seq_id: int) -> _Seq:
        entry = self._seqs.get(seq_id)
        if entry is None:
            entry = self._seqs[seq_id] = _Seq()
            if len(self._seqs) > self.limit:
                self._seqs.popitem(last=False)
        else:
            self._seqs.move_to_end(seq_id)
        return entry

    def ends(self, seq_ids: np.ndarray) -> np.ndarray:
        """Each seq's next position, or -1 when it is not known."""
        out = np.full(seq_ids.shape[0], UNKNOWN, dtype=np.int64)
        for i, seq_id in enumerate(seq_ids.tolist()):
            entry = self._seqs.get(seq_id)
            if entry is not None:
                out[i] = entry.end
        return out

    def advance(self, seq_ids: np.ndarray, starts: np.ndarray, advance: np.ndarray) -> None:
        """Record where a step left each seq: ``start + advance``, or unknown (-1)."""
        ends = np.where((advance >= 0) & (starts >= 0), starts + advance, UNKNOWN)
        for seq_id, end in zip(seq_ids.tolist(), ends.tolist(), strict=True):
            self._entry(seq_id).end = end

    def emitted(self, seq_id: int, position: int, tokens: np.ndarray) -> None:
        """Record ``tokens`` as emitted for ``seq_id`` from ``position`` on."""
        if position < 0 or tokens.shape[0] == 0:
            return
        entry = self._entry(seq_id)
        if entry.base < 0:
            entry.base = position
        if position < entry.base:  # an earlier position than any known: re-base
            pad = np.full(entry.base - position, UNKNOWN, dtype=np.int64)
            entry.emitted = np.concatenate([pad, entry.emitted])
            entry.base = position
        stop = position - entry.base + tokens.shape[0]
        if stop > entry.emitted.shape[0]:
            grown = np.full(stop, UNKNOWN, dtype=np.int64)
            grown[: entry.emitted.shape[0]] = entry.emitted
            entry.emitted = grown
        entry.emitted[position - entry.base:stop] = tokens

    def first_mismatch(self, seq_id: int, start: int,
                       tokens: np.ndarray) -> tuple[int, int, int] | None:
        """The first position in ``[start, start + len(tokens))`` whose token differs from
        the one emitted there, as ``(position, fed, emitted)``; None when all agree."""
        entry = self._seqs.get(seq_id)
        if entry is None or entry.base < 0 or start < 0:
            return None
        lo = max(start, entry.base)
        hi = min(start + tokens.shape[0], entry.base + entry.emitted.shape[0])
        if lo >= hi:
            return None
        known = entry.emitted[lo - entry.base:hi - entry.base]
        fed = tokens[lo - start:hi - start]
        bad = np.flatnonzero((known >= 0) & (fed != known))
        if bad.shape[0] == 0:
            return None
        i = int(bad[0])
        return lo + i, int(fed[i]), int(known[i])
