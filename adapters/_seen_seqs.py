"""The seqs a step tracker has ever seen, in a fixed number of bytes.

A seq that first appears at decode carrying real drafts got them from no drafter of this
engine (SG661): the tracker must tell "never seen" from "seen long ago", for any number
of seqs, in bounded memory, and must never mistake a seen seq for a new one (that would
be a false alarm). A Bloom filter answers exactly that way round: "not seen" is always
true, "seen" may be wrong. As it fills, more new seqs read as seen, so the rule misses
more of them, never raising on a seq it did see.
"""

from __future__ import annotations

import numpy as np

from specguard.contracts._core._compiled import verdict

__all__ = ["SeenSeqs"]

# Two odd 64-bit multipliers (Fibonacci hashing and a splitmix64 constant): multiplying
# wraps modulo 2**64, and the top bits of the products index the filter.
_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9))


class SeenSeqs:
    """A set of seq ids that answers :meth:`unseen` without false positives.

    It holds ``slots`` flags (a power of two, one byte each: 2 MiB by default); with two
    hashes, a seq never seen reads as seen with probability about
    ``(1 - exp(-2n / slots))**2`` after ``n`` seqs: 1 in 70 at ``slots / 16`` seqs
    (131,072 by default), 2 in 5 at ``slots / 2``.
    """

    def __init__(self, slots: int = 1 << 21) -> None:
        if slots < 64 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two of at least 64, not {slots}")
        self._bits = np.zeros(slots, dtype=bool)
        self._shift = 64 - (slots.bit_length() - 1)  # the top bits of a product index it

    @property
    def nbytes(self) -> int:
        """The filter's size in bytes (fixed)."""
        return int(self._bits.nbytes)

    def _slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = ids.astype(np.uint64)  # negative ids wrap: still one slot pair per id
        first, second = _MULTIPLIERS
        shift = np.uint64(self._shift)
        return (keys * first) >> shift, (keys * second) >> shift

    def add(self, ids: np.ndarray) -> None:
        """Remember ``ids`` (any integer array)."""
        if ids.shape[0]:
            first, second = self._slots(ids)
            self._bits[first] = True
            self._bits[second] = True

    def unseen(self, ids: np.ndarray) -> np.ndarray:
        """Per id, True only if it was certainly never added."""
        if not ids.shape[0]:
            return np.zeros(0, dtype=bool)
        first, second = self._slots(ids)
        unseen: np.ndarray = ~(self._bits[first] & self._bits[second])
        return unseen

    def record_batch(self, ids: np.ndarray, is_decode: np.ndarray,
                     prev_rows: np.ndarray | None, first: np.ndarray | None) -> bool:
        """The compiled pass over one batch, where the kernels are at hand: the ids not
        in the previous forward (``prev_rows < 0``; every id where None) are looked up,
        into ``first`` (per decode id, when given: :meth:`unseen`, or False for an id of
        the previous forward), then added. False where it declined: nothing written."""
        return verdict("seen_seqs", self._bits, self._shift, ids, is_decode, prev_rows,
                       first) is True

    def clear(self) -> None:
        """Forget every id."""
        self._bits[:] = False
