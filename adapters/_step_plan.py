"""What the step tracker reads of one step, and where its seqs sat in the previous one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from specguard.adapters._host import holds_integers, host_array
from specguard.contracts import ScheduledBatch
from specguard.contracts._core._compiled import verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import same_ids

__all__ = ["UNKNOWN", "IdLookup", "StepLinks", "StepPlan", "is_integer", "rows_in"]

#: A row, position or count that is not known (not in the previous forward, not verified).
UNKNOWN = -1


@dataclass(frozen=True)
class StepPlan:
    """One step's schedule as the tracker reads it: host numpy arrays in batch order.

    Build it with :meth:`of` from a ``specguard.contracts.ScheduledBatch``, or directly from an
    engine's own schedule (the vLLM adapter does).
    """

    mtp_k: int
    """Draft tokens per decode seq."""
    seq_ids: np.ndarray
    """Seq ids in batch order; stable across steps for the same seq."""
    is_decode: np.ndarray
    """Phase per seq (bool)."""
    starts: np.ndarray
    """First scheduled position per seq (context length minus scheduled tokens; -1: unknown)."""
    num_scheduled: np.ndarray
    """Scheduled tokens per seq."""
    draft_token_ids: np.ndarray
    """``(num_decode, mtp_k)`` drafts of the decode seqs, in batch order."""
    num_drafts: np.ndarray
    """Real drafts per decode row."""
    draft_placeholder: int | None = None
    """A draft value the runner overwrites from its previous-step buffers."""
    token_ids: np.ndarray | None = None
    """The flat scheduled token stream, when it is on the host (a recompute is checked
    against the tokens its seq was emitted)."""
    num_before_drafts: np.ndarray | None = None
    """Per decode row, the tokens scheduled ahead of its drafts; None means one (the
    anchor). vLLM 0.11.x schedules the drafts proposed for a discarded prefill chunk with
    the final chunk, behind the rest of the prompt."""
    drafts_handed_over: np.ndarray | None = None
    """Per decode row (bool), drafts another instance proposed and handed over with the
    seq (a P/D consumer's first decode): real, though this engine's drafter never made
    them. None: none were."""
    first_scheduled: np.ndarray | None = None
    """Per seq (bool), the engine's own word that this is the seq's first step on this
    runner (vLLM's ``scheduled_new_reqs``). None: the tracker decides from the seqs it
    has seen, which it can only where ids are stable (:attr:`stable_ids`)."""
    stable_ids: bool = True
    """Whether a seq keeps its id while it is absent from batches. A view that numbers
    only the requests of consecutive batches (and so may renumber one that comes back)
    says False: then only :attr:`first_scheduled` tells a new seq from a returning one."""

    @classmethod
    def of(cls, batch: ScheduledBatch) -> StepPlan | None:
        """The plan of a batch, or None when its arrays are not on the host."""
        arrays = [host_array(getattr(batch, name)) for name in (
            "seq_ids", "is_decode", "context_lens", "num_scheduled_tokens",
            "draft_token_ids", "num_drafts")]
        if any(a is None for a in arrays):
            return None
        seq_ids, is_decode, context, scheduled, drafts, counts = cast(list[np.ndarray], arrays)
        if context.shape != scheduled.shape or context.ndim != 1 \
                or not holds_integers(context, scheduled):
            return None  # a batch the contract refused (warn mode hands it on): no plan
        handed = batch.drafts_handed_over
        if handed is not None:
            handed = host_array(handed)
            if handed is None:  # unread, it would read as "none handed over"
                return None
        return cls(batch.mtp_k, seq_ids, is_decode, context - scheduled, scheduled,
                   drafts, counts, batch.draft_placeholder, host_array(batch.token_ids),
                   drafts_handed_over=handed)

    def is_sound(self) -> bool:
        """Whether the arrays have the shapes and kinds the tracker relies on (a plan
        built by hand with something else than host numpy arrays is not)."""
        # One compiled call where it reads the arrays: between model forwards the dozen
        # attribute reads and reductions below cost several times the kernel.
        answer = verdict("plan_sound", np.ndarray, self.mtp_k, self.stable_ids,
                         self.seq_ids, self.is_decode, self.starts, self.num_scheduled,
                         self.draft_token_ids, self.num_drafts, self.token_ids,
                         self.num_before_drafts, self.drafts_handed_over,
                         self.first_scheduled)
        if answer is not None:
            return answer
        return self._sound_in_numpy()

    def _sound_in_numpy(self) -> bool:
        """:meth:`is_sound` where the kernels are absent or decline."""
        required = (self.seq_ids, self.is_decode, self.starts, self.num_scheduled,
                    self.draft_token_ids, self.num_drafts)
        optional = (self.token_ids, self.num_before_drafts, self.drafts_handed_over,
                    self.first_scheduled)
        if not all(isinstance(a, np.ndarray) for a in required) or not all(
                a is None or isinstance(a, np.ndarray) for a in optional):
            return False
        n = self.seq_ids.shape[0] if self.seq_ids.ndim == 1 else -1
        per_seq = (self.is_decode, self.starts, self.num_scheduled)
        if n < 0 or any(a.shape != (n,) for a in per_seq) or self.is_decode.dtype != bool:
            return False
        decode = int(_count_nonzero(self.is_decode))
        arrays = (self.seq_ids, self.starts, self.num_scheduled, self.draft_token_ids,
                  self.num_drafts)
        before = self.num_before_drafts
        if before is not None and (before.shape != (decode,)
                                   or not is_integer(before.dtype)):
            return False
        handed, first = self.drafts_handed_over, self.first_scheduled
        if handed is not None and (handed.shape != (decode,) or handed.dtype != bool):
            return False
        if first is not None and (first.shape != (n,) or first.dtype != bool):
            return False
        return (
            type(self.mtp_k) is int and self.mtp_k >= 1 and type(self.stable_ids) is bool
            and all(is_integer(a.dtype) for a in arrays)
            and self.draft_token_ids.shape == (decode, self.mtp_k)
            and self.num_drafts.shape == (decode,)
        )


@dataclass(frozen=True)
class StepLinks:
    """Where this step's seqs sat in the previous forward (ATOM calls these locations)."""

    prev_rows: np.ndarray
    """Per seq in batch order: its row in the previous forward, or -1."""
    same_order: bool = False
    """Whether the seqs are exactly the previous forward's, in its order (``prev_rows``
    is then ``arange``): a steady decode batch, step after step."""

    @property
    def deferred(self) -> np.ndarray:
        """Batch positions of the seqs that were in the previous forward."""
        return np.flatnonzero(self.prev_rows >= 0)

    @property
    def new(self) -> np.ndarray:
        """Batch positions of the seqs that were not."""
        return np.flatnonzero(self.prev_rows < 0)

    @property
    def previous_positions(self) -> np.ndarray:
        """Rows in the previous forward of the ``deferred`` seqs, in the same order."""
        return self.prev_rows[self.prev_rows >= 0]


def is_integer(dtype: Any) -> bool:
    """``np.issubdtype(dtype, np.integer)``; a numpy dtype answers by its kind, without
    the walk of numpy's type hierarchy."""
    if isinstance(dtype, np.dtype):
        return dtype.kind in ("i", "u")
    return bool(np.issubdtype(dtype, np.integer))


def rows_in(reference: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """For each id, its index in ``reference`` (the first, when repeated) or -1:
    O(n log n), no Python loop."""
    return IdLookup(reference).rows(ids)


class IdLookup:
    """:func:`rows_in` against one step's seq ids, sorted once for all its lookups.

    A step's ids are looked up several times (the next batch's links, the verifier's and
    the drafter's rows); the sort is done at the first, and a lookup of the very same ids
    in the same order, all distinct (a decode batch step after step), is an ``arange``.
    """

    __slots__ = ("_distinct", "_order", "_ordered", "reference")

    def __init__(self, reference: np.ndarray, *, like: IdLookup | None = None) -> None:
        """``like`` is the lookup of another step: when it holds the very same ids in
        the same order (a steady batch, step after step), its sort is this one's too."""
        self.reference = reference
        self._order: np.ndarray | None = None
        self._ordered = reference
        self._distinct = False
        if like is not None and like._order is not None \
                and same_ids(like.reference, reference):
            self._order, self._ordered, self._distinct = like._order, like._ordered, \
                like._distinct

    def identical(self, ids: np.ndarray) -> bool:
        """Whether ``ids`` are the reference itself, in order, all distinct (each id's row
        is then its own index)."""
        self._sort()
        return self._distinct and same_ids(ids, self.reference)

    def _sort(self) -> np.ndarray:
        """The reference's stable sort order, made at the first lookup."""
        if self._order is None:
            reference = self.reference
            self._order = np.argsort(reference, kind="stable")
            self._ordered = reference[self._order]
            self._distinct = not _count_nonzero(self._ordered[1:] == self._ordered[:-1])
        return self._order

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """For each id, its index in the reference (the first, when repeated) or -1."""
        return self.links(ids)[0]

    def links(self, ids: np.ndarray) -> tuple[np.ndarray, bool]:
        """:meth:`rows`, and whether they are :meth:`identical` (answered on the way)."""
        reference = self.reference
        if reference.shape[0] == 0 or ids.shape[0] == 0:
            return np.full(ids.shape[0], UNKNOWN, dtype=np.int64), False
        if self._order is None:  # not sorted yet: a compiled hash lookup needs no sort
            rows = np.empty(ids.shape[0], dtype=np.int64)
            same = verdict("id_rows", reference, ids, rows)
            if same is not None:
                return rows, same
        if self.identical(ids):
            return np.arange(ids.shape[0], dtype=np.int64), True
        ordered, order = self._ordered, self._sort()
        at = np.minimum(np.searchsorted(ordered, ids), ordered.shape[0] - 1)
        return np.where(ordered[at] == ids, order[at], UNKNOWN).astype(np.int64), False
